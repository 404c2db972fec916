package idemtest

// Ending is one way a handler behind the middleware can end, with the
// outcome the middleware specifies for it: what the first caller gets,
// what is stored under the key, what a retry gets, and how many times the
// handler has run once the retry is answered. [Endings] is the table; it is
// the contract of package middleware, and the kit's rows (and, for the rows
// with a reservation, the reservation rows every adapter of the repository
// runs) check each line of it.
type Ending struct {
	// Name says how the handler ends.
	Name string
	// Reservation is set for the endings of a handler that completes its
	// reservation in its own SQL transaction (idem.ReservationFrom and
	// sqllayer's CompleteReservation).
	Reservation bool
	// First is what the first caller gets.
	First string
	// Stored is what the key holds afterwards.
	Stored string
	// Retry is what a retry with the same key and request gets.
	Retry string
	// Runs is how many times the handler has run after the first request
	// and one retry.
	Runs int
	// Atomic is what differs with the Store in the atomic mode
	// (tiered.WithAtomic: the handler writes its rows in the Store's
	// transaction, sqllayer.TxFrom, and the Store completes); empty when
	// nothing does.
	Atomic string
}

// Words of the table.
const (
	theResponse   = "the response: status, allow-listed headers as at WriteHeader, body"
	problem500    = "500 problem (failed)"
	nothing       = "nothing (the key is released)"
	runsAgain     = "runs the handler again"
	sameResponse  = "the same response, byte for byte"
	committed     = "the response the transaction committed"
	tombstone     = "a tombstone"
	notReplayable = "409 problem (not_replayable)"
	refused       = "refused (idem.ErrConfig: the Store completes): 500 problem, nothing commits, the retry runs again"
)

// Endings returns the handler-ending table: every way user code behind the
// middleware can end, with its specified outcome. The first caller is
// always answered from the record, through the same code as every replay:
// a header changed after the status was written, or a header outside the
// replay allow-list, reaches no caller.
func Endings() []Ending {
	return []Ending{
		{Name: "writes a response the keep policy keeps (2xx, 3xx, 4xx but 408, 425, 429)", First: theResponse, Stored: "the response", Retry: sameResponse, Runs: 1},
		{Name: "writes an empty 200 on purpose (WriteHeader(200))", First: "200, empty body", Stored: "the response", Retry: sameResponse, Runs: 1},
		{Name: "returns without writing anything", First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2},
		{Name: "returns an error without writing (Gin: c.Error)", First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2},
		{Name: "returns an error (Echo): Echo's error handler writes the answer", First: "the error's response", Stored: "the response when kept (a 4xx), else nothing", Retry: "the same response when kept, else runs again", Runs: 1},
		{Name: "writes a 5xx, 408, 425 or 429", First: "the response", Stored: nothing, Retry: runsAgain, Runs: 2},
		{Name: "panics before writing", First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2},
		{Name: "writes a response, then panics", First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2},
		{Name: "flushes, then panics", First: "the connection is cut (an error, never a whole response)", Stored: nothing, Retry: runsAgain, Runs: 2, Atomic: "nothing leaves before the commit: " + problem500 + ", nothing stored, the retry runs again"},
		{Name: "calls runtime.Goexit", First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2},
		{Name: "changes headers after WriteHeader (through a map taken before, or after writing)", First: theResponse, Stored: "the response, headers as at WriteHeader", Retry: sameResponse, Runs: 1},
		{Name: "flushes (streams)", First: "the stream, live", Stored: tombstone, Retry: notReplayable, Runs: 1, Atomic: "held until the commit (nothing leaves before it): the whole response, stored; the retry gets the same response"},
		{Name: "hijacks the connection", First: "what it wrote on the connection", Stored: tombstone, Retry: notReplayable, Runs: 1, Atomic: "the same, but the connection is the handler's before the commit: if the commit fails, the retry runs again"},
		{Name: "writes a body past the response limit", First: "the response, live", Stored: tombstone, Retry: notReplayable, Runs: 1, Atomic: "the same, but the body past the limit leaves before the commit: if the commit fails, the retry runs again (keep atomic responses under the limit)"},
		{Name: "its client goes away while it runs", First: "nothing (gone)", Stored: "the response (the work goes on)", Retry: "the response", Runs: 1},
		{Name: "works longer than the lease", First: theResponse, Stored: "the response (renewals keep the claim; a duplicate meanwhile waits, then 409)", Retry: sameResponse, Runs: 1, Atomic: "the open transaction holds the claim, with no renewal"},
		{Name: "works longer than the retention", First: theResponse, Stored: "the response (the claim outlives its lease and grace)", Retry: sameResponse, Runs: 1, Atomic: "the open transaction holds the claim, with no renewal"},

		{Name: "waits for a row lock that another key's execution holds, then writes a response", First: theResponse, Stored: "the response", Retry: sameResponse, Runs: 1, Atomic: "the same: the claim's bound on waiting for a lock (the Store's wait) ends with the claim, and the handler's statements wait as in a plain transaction, under the session's own settings; on SQLite, whose one writer the other execution holds, the new key waits for it up to the wait and the SQL timeout, then 503 problem + Retry-After (never 409: no one holds the key)"},
		{Name: "shrugs off a failed statement (a deadlock victim, a lock-wait timeout) and writes on, then a 2xx", First: theResponse, Stored: "the response", Retry: sameResponse, Runs: 1, Atomic: "when the database rolled the transaction back whole (an InnoDB deadlock victim, a lock-wait timeout with innodb_rollback_on_timeout; SQLite on FULL, IOERR, BUSY, NOMEM), nothing commits: the later writes are refused (Postgres 25P02, SQLite's commit hook) or wait in a transaction the failed completion rolls back (MariaDB, autocommit off): 500 problem, nothing stored, the retry runs again; otherwise the same"},
		{Name: "has a duplicate on a Store of the other mode (a rollout, two services on one table)", First: theResponse, Stored: "the response", Retry: sameResponse + " (the duplicate waits up to its Store's wait, then replays)", Runs: 1, Atomic: "the same, either way round: a standard-mode duplicate's claim waits on the atomic owner's open transaction (bounded by its wait), then replays"},

		{Name: "reads its key with idem.KeyFrom (a downstream idempotency key), writes a response", First: theResponse, Stored: "the response", Retry: sameResponse, Runs: 1},

		{Name: "writes, completes, commits", Reservation: true, First: committed, Stored: "the response, with the business rows", Retry: sameResponse, Runs: 1, Atomic: "written in the Store's transaction, not completed: the same; completed by hand: " + refused},
		{Name: "its transaction fails before completing; it writes nothing", Reservation: true, First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2, Atomic: "the same: the Store's transaction rolls back"},
		{Name: "writes, then its transaction fails before completing", Reservation: true, First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2, Atomic: "the response written is the result: answer a failure with a 5xx, which rolls everything back"},
		{Name: "completes, then rolls back", Reservation: true, First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2, Atomic: refused},
		{Name: "completes; COMMIT fails", Reservation: true, First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2, Atomic: refused},
		{Name: "completes twice with the same response", Reservation: true, First: committed, Stored: "the response, once", Retry: sameResponse, Runs: 1, Atomic: refused},
		{Name: "completes again with other bytes (the second call fails with idem.ErrConfig)", Reservation: true, First: committed, Stored: "the first completion", Retry: sameResponse, Runs: 1, Atomic: refused},
		{Name: "writes or changes headers after completing (middleware.ErrResponseFrozen)", Reservation: true, First: committed, Stored: "the response as completed", Retry: sameResponse, Runs: 1, Atomic: refused},
		{Name: "takes its reservation and never completes", Reservation: true, First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2, Atomic: "the Store completes with the response written: stored, the retry gets the same response; runs 1"},
		{Name: "completes before writing anything (idem.ErrConfig)", Reservation: true, First: problem500, Stored: nothing, Retry: runsAgain, Runs: 2, Atomic: "the same (refused before anything reaches the database)"},
		{Name: "commits, then its instance dies before answering", Reservation: true, First: "503 problem, or the connection drops", Stored: "the response, with the business rows", Retry: sameResponse + " (any instance)", Runs: 1, Atomic: "the Store commits after the handler returns: an instance that dies in the handler commits nothing (503 problem; the retry runs again, on any instance)"},
		{Name: "commits, then its client's connection is cut", Reservation: true, First: "nothing (gone)", Stored: "the response, with the business rows", Retry: sameResponse + " (any instance)", Runs: 1},
	}
}
