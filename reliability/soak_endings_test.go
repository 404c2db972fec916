//go:build unix

package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/reliability/internal/history"
)

// How the handler's work ends. Besides the behaviours a request asks for
// (the nemesis's slow, failing and panicking work), every execution draws
// its ending from the table below, by the seed and its call's ID: most
// write a response that is kept, a few percent each end in one of the
// other ways user code behind the middleware can end. What the library
// promises for each (DESIGN §4 and §9):
//
//   - kept (2xx, 4xx): stored; the first caller and every retry get the
//     same status, allow-listed headers and body.
//   - no-write: nothing stored, the key released; the first caller gets a
//     500 problem and a retry runs again.
//   - retryable (5xx, 408, 425, 429): released; the first caller gets it.
//   - panic, before or after writing: released; a 500 problem, or the
//     connection cut.
//   - late-header: headers changed after WriteHeader (through the map taken
//     before): the first caller gets what every replay gets, the headers
//     as they were at WriteHeader.
//   - stream: a tombstone; the first caller gets the stream, the retries
//     not_replayable.
//   - long: work longer than the lease, renewed; one execution.
//   - tx-*: the reservation completed in the handler's transaction, with a
//     ledger row (the charge) in the same transaction: a commit stores
//     both; a rollback before or after completing, or a reservation taken
//     and never completed, stores nothing (500 problem, released);
//     completing twice stores once; headers changed after the completion
//     reach no caller.
//   - goexit: runtime.Goexit in the handler; the key released, the
//     connection closed.
//
// Every execution records its value as the answer it means its caller to
// get (status, allow-listed headers, body: see answerBytes), so that the
// checker holds each caller's bytes against the execution and the record.

// ending is one row of the table.
type ending struct {
	name  string
	share int  // per mille of the executions that ask for no behaviour
	tx    bool // completes the reservation in a transaction: needs SQL deciding
	long  bool // on the long route only: a record that expires under running work is another story
	// pending: the library does not meet this row yet. It is drawn only
	// when IDEM_SOAK_ENDINGS asks for it (all, or its name).
	pending bool
}

const (
	endKept            = "kept"
	endKept4xx         = "kept-4xx"
	endNoWrite         = "no-write"
	endRetryable       = "retryable"
	endPanic           = "panic"
	endPanicAfterWrite = "panic-after-write"
	endPanicAfterFlush = "panic-after-flush" // the nemesis's panic-late behaviour
	endLateHeader      = "late-header"
	endStream          = "stream"
	endLong            = "long"
	endGoexit          = "goexit"
	endTxCommit        = "tx-commit"
	endTxRollback      = "tx-rollback"
	endTxRollbackAfter = "tx-rollback-after"
	endTxNoComplete    = "tx-no-complete"
	endTxTwice         = "tx-twice"
	endTxLateHeader    = "tx-late-header"
)

// endings is the table; kept takes what the others leave.
var endings = []ending{
	{name: endKept4xx, share: 30},
	{name: endNoWrite, share: 15},
	{name: endRetryable, share: 25},
	{name: endPanic, share: 15},
	{name: endPanicAfterWrite, share: 15},
	{name: endLateHeader, share: 25},
	{name: endStream, share: 15},
	{name: endLong, share: 10, long: true},
	{name: endGoexit, share: 10},
	{name: endTxCommit, share: 30, tx: true},
	{name: endTxRollback, share: 15, tx: true},
	{name: endTxRollbackAfter, share: 15, tx: true},
	{name: endTxNoComplete, share: 15, tx: true},
	{name: endTxTwice, share: 15, tx: true},
	{name: endTxLateHeader, share: 15, tx: true},
}

// soakEndings returns the names of the endings this run draws:
// IDEM_SOAK_ENDINGS lists them (comma-separated), or says "all"; by
// default, every row the library meets. The atomic mode draws no tx-*
// row: the Store completes the key in its own transaction there, and
// every execution writes its charge in it.
func soakEndings(atomic bool) []string {
	v := os.Getenv("IDEM_SOAK_ENDINGS")
	var out []string
	for _, e := range endings {
		if e.tx && atomic {
			continue
		}
		if v == "all" || (v == "" && !e.pending) || slices.Contains(strings.Split(v, ","), e.name) {
			out = append(out, e.name)
		}
	}
	return out
}

// draw picks the ending of the execution for call on route, among the
// enabled ones.
func (a *api) draw(call, route string) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%d/%s", a.seed, call)
	x := int(h.Sum64() % 1000)
	for _, e := range endings {
		if !slices.Contains(a.endings, e.name) || (e.long && route != routeLong) || (e.tx && a.sql[route] == nil) {
			continue
		}
		if x < e.share {
			return e.name
		}
		x -= e.share
	}
	return endKept
}

// answerBytes is an HTTP answer as the history records it, from the
// handler's intent, the client's response or a stored record alike: the
// status, the replayed headers (the default allow-list, in its order),
// and the body.
func answerBytes(status int, h http.Header, body []byte) []byte {
	b := strconv.AppendInt(nil, int64(status), 10)
	b = append(b, '\n')
	for _, name := range middleware.DefaultReplayHeaders() {
		for _, v := range h.Values(name) {
			b = fmt.Appendf(b, "%s: %s\n", http.CanonicalHeaderKey(name), v)
		}
	}
	b = append(b, '\n')
	return append(b, body...)
}

// jsonHeader is the header every answer of the handler sets.
var jsonHeader = http.Header{"Content-Type": {"application/json"}}

var (
	errNoAnswer      = errors.New("soak: the handler wrote nothing")
	errRetryable     = errors.New("soak: the handler answered a status that releases the key")
	errGoexit        = errors.New("soak: the handler called runtime.Goexit")
	errRollback      = errors.New("soak: the handler rolled its transaction back")
	errNotCompleted  = errors.New("soak: the handler took its reservation and never completed it")
	errNoReservation = errors.New("soak: no reservation in the handler's context")
)

// retryableStatuses are the statuses that release the key.
var retryableStatuses = []int{
	http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
	http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
}

// respond writes a JSON answer.
func respond(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// end runs the ending name for the execution x of call, whose receipt is v.
func (a *api) end(name string, route, key, call string, w http.ResponseWriter, r *http.Request, x *history.Running, v []byte) {
	ok := answerBytes(http.StatusCreated, jsonHeader, v)
	switch name {
	case endKept4xx: // the charge declined: a 402 is an answer, and kept
		x.EndAs(name, answerBytes(http.StatusPaymentRequired, jsonHeader, v), nil)
		respond(w, http.StatusPaymentRequired, v)
	case endNoWrite:
		x.EndAs(name, nil, errNoAnswer)
	case endRetryable:
		st := retryableStatuses[len(v)%len(retryableStatuses)]
		x.EndAs(name, answerBytes(st, jsonHeader, v), errRetryable)
		respond(w, st, v)
	case endPanic:
		x.EndAs(name, nil, errPanic)
		panic(errPanic)
	case endPanicAfterWrite:
		x.EndAs(name, nil, errPanic)
		respond(w, http.StatusCreated, v)
		panic(errPanic)
	case endLateHeader:
		x.EndAs(name, ok, nil)
		h := w.Header() // taken before WriteHeader, changed after
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(v[:len(v)/2])
		h.Set("ETag", `"late-`+x.ID()+`"`)
		w.Header().Set("Location", "/late/"+x.ID())
		_, _ = w.Write(v[len(v)/2:])
	case endStream:
		if a.atomic { // the flush holds: the whole response is stored
			x.EndAs(name, ok, nil)
		} else {
			x.EndTombstone(name, ok)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(v[:len(v)/2])
		_ = http.NewResponseController(w).Flush()
		_, _ = w.Write(v[len(v)/2:])
	case endLong:
		a.long(name, a.lease+a.lease/2, w, r, x, v)
	case endGoexit:
		x.EndAs(name, nil, errGoexit)
		runtime.Goexit()
	case endTxCommit, endTxRollback, endTxRollbackAfter, endTxNoComplete, endTxTwice, endTxLateHeader:
		a.inTx(name, route, key, call, w, r, x, v)
	default:
		x.EndAs(endKept, ok, nil)
		respond(w, http.StatusCreated, v)
	}
}

// long is work that outlasts the lease by d, unless its context ends (the
// lease was lost): then it stops, as real work should.
func (a *api) long(name string, d time.Duration, w http.ResponseWriter, r *http.Request, x *history.Running, v []byte) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		err := fmt.Errorf("%w: %w", errWorkEnded, context.Cause(r.Context()))
		x.EndAs(name, nil, err)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	x.EndAs(name, answerBytes(http.StatusCreated, jsonHeader, v), nil)
	respond(w, http.StatusCreated, v)
}

// inTx is the money path: the charge's ledger row and idem's record in
// one transaction, through bun, the reservation completed last.
func (a *api) inTx(name string, route, key, call string, w http.ResponseWriter, r *http.Request, x *history.Running, v []byte) {
	ok := answerBytes(http.StatusCreated, jsonHeader, v)
	ctx := r.Context()
	res, has := idem.ReservationFrom(ctx)
	if !has {
		x.EndAs(name, nil, errNoReservation)
		http.Error(w, errNoReservation.Error(), http.StatusInternalServerError)
		return
	}
	if name == endTxNoComplete { // took it, answered, never completed
		x.EndAs(name, ok, errNotCompleted)
		respond(w, http.StatusCreated, v)
		return
	}
	sl := a.sql[route]
	wrote := false
	txErr := a.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+a.ledger+" (exec, key, call) VALUES (?, ?, ?)", x.ID(), key, call); err != nil {
			return err
		}
		respond(w, http.StatusCreated, v)
		wrote = true
		if name == endTxRollback {
			return errRollback
		}
		if err := sl.CompleteReservation(ctx, tx, res, nil); err != nil {
			return err
		}
		switch name {
		case endTxRollbackAfter:
			return errRollback
		case endTxTwice:
			return sl.CompleteReservation(ctx, tx, res, nil)
		case endTxLateHeader:
			w.Header().Set("ETag", `"late-`+x.ID()+`"`)
		}
		return nil
	})
	switch {
	case txErr == nil:
		x.EndAs(name, ok, nil)
	case errors.Is(txErr, errRollback):
		x.EndAs(name, ok, txErr)
	default:
		// The transaction failed, perhaps in its commit, whose reply may
		// have been lost: what the ledger holds says whether it committed.
		if a.committed(x.ID()) {
			x.EndAs(name, ok, nil)
			return
		}
		x.EndAs(name, ok, txErr)
		if !wrote { // the database failed before the answer: say so, as a service does
			http.Error(w, txErr.Error(), http.StatusServiceUnavailable)
		}
	}
}

// committed reports whether exec's ledger row committed, asking until the
// database answers (a fault may hold it for a few seconds).
func (a *api) committed(exec string) bool {
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var n int
		err := a.db.NewRaw("SELECT count(*) FROM "+a.ledger+" WHERE exec = ?", exec).Scan(ctx, &n)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return n > 0
		}
		time.Sleep(100 * time.Millisecond)
	}
}
