package sqllayer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// The batched statements (batch_*.go) must give every call the answer the
// single statements (reserve.go, owner.go, events.go) give it alone. The
// fuzzers here and in batch_events_fuzz_test.go hold them together: two
// Layers on one database, each with tables of its own, get the same calls
// round after round — one Layer sends each round's claims and completions
// through its batches (the batchers' own run function, so that they surely
// share statements), or its events through MarkProcessedBatch, the other
// one call at a time — and every answer, and every record after the round,
// must be the same. make test runs each for a few seconds on every backend
// at hand.

// Limits of one fuzz input: few keys, so that calls meet on them.
const (
	fuzzKeys      = 4
	fuzzMaxRounds = 6
	fuzzMaxOps    = 24
)

// Leases and retentions of the fuzz's calls: a short one lapses before the
// next round (which waits fuzzPause first, above SQLite's millisecond), a
// long one outlives the input.
const (
	fuzzShort = 4 * time.Microsecond
	fuzzLong  = time.Hour
	fuzzPause = 3 * time.Millisecond
)

type fuzzKind uint8

const (
	fuzzReserve fuzzKind = iota
	fuzzComplete
	fuzzRelease
	fuzzRenew
)

// fuzzOp is one call of a round.
type fuzzOp struct {
	kind   fuzzKind
	key    int
	fp     string
	short  bool // Reserve and Renew: a short lease; Complete: a short retention
	token  int  // Complete, Release, Renew: 0 the key's last claimant's, 1 the one before, 2 nobody's
	result []byte
}

func (op fuzzOp) lease() time.Duration {
	if op.short {
		return fuzzShort
	}
	return fuzzLong
}

// decodeRounds turns data into rounds of calls. In a round a key is the
// object of one kind of call only, so that the order of a batch and of the
// calls one at a time cannot differ in what they decide; and a key called
// more than once in a round gets long leases and retentions only, so that
// nothing lapses between the calls of a round, however long each takes.
// What is short lapses before the next round.
func decodeRounds(data []byte) [][]fuzzOp {
	var rounds [][]fuzzOp
	var round []fuzzOp
	kinds := map[int]fuzzKind{}
	ops := 0
	for len(data) >= 2 && ops < fuzzMaxOps && len(rounds) < fuzzMaxRounds {
		b0, b1 := data[0], data[1]
		data = data[2:]
		op := fuzzOp{
			kind:  fuzzKind(b0 & 3),
			key:   int(b0>>2&7) % fuzzKeys,
			fp:    string("ab"[b1&1]),
			short: b1&2 != 0,
			token: int(b1>>2&3) % 3,
		}
		if op.kind == fuzzComplete {
			n := min(int(b1>>4), len(data))
			op.result = append([]byte{}, data[:n]...)
			data = data[n:]
		}
		if k, ok := kinds[op.key]; !ok || k == op.kind {
			if ok {
				op.short = false
				for i := range round {
					if round[i].key == op.key {
						round[i].short = false
					}
				}
			}
			kinds[op.key] = op.kind
			round = append(round, op)
			ops++
		}
		if b0&0x80 != 0 && len(round) > 0 {
			rounds, round, kinds = append(rounds, round), nil, map[int]fuzzKind{}
		}
	}
	if len(round) > 0 && len(rounds) < fuzzMaxRounds {
		rounds = append(rounds, round)
	}
	return rounds
}

// fuzzPair is a batched Layer and an unbatched one on one database.
type fuzzPair struct {
	name            string
	batched, single *Layer
}

// fuzzLayer returns a Layer on s with tables of its own, dropped when tb
// ends.
func fuzzLayer(tb testing.TB, s *testenv.SQL, opts ...Option) *Layer {
	tb.Helper()
	db := s.Open(tb)
	if s.Real {
		db.SetMaxOpenConns(2)
	}
	names := []string{testenv.Name("idem_rec"), testenv.Name("idem_evt"), testenv.Name("idem_ver")}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, n := range names {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+n); err != nil {
				tb.Errorf("drop %s: %v", n, err)
			}
		}
	})
	l, err := New(db, append([]Option{WithRecordsTable(names[0]), WithEventsTable(names[1]), WithVersionsTable(names[2])}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.Init(tb.Context()); err != nil {
		tb.Fatalf("Init on %s: %v", s.Kind, err)
	}
	return l
}

// fuzzBackends returns the backends at hand: in-memory SQLite always,
// Postgres and MariaDB when reachable (required under
// IDEM_REQUIRE_SERVICES=1). Postgres batches claims and completions in one
// statement; the others each kind in its own.
func fuzzBackends(tb testing.TB) []*testenv.SQL {
	tb.Helper()
	out := []*testenv.SQL{testenv.SQLiteMemory(tb)}
	for _, s := range []struct {
		kind string
		dsn  func() (string, error)
	}{{"postgres", testenv.PostgresDSN}, {"mysql", testenv.MySQLDSN}} {
		dsn, err := s.dsn()
		switch {
		case err == nil:
			out = append(out, &testenv.SQL{Kind: s.kind, DSN: dsn, Real: true})
		case testenv.Required():
			tb.Fatalf("%s is required but unavailable: %v", s.kind, err)
		}
	}
	return out
}

// fuzzAnswer is what a call answered, as far as both ways must agree: not
// tokens (each claim mints its own), nor times.
type fuzzAnswer struct {
	err      string
	claimed  bool
	state    idem.State
	fp       string
	result   string
	token    bool // the record carries a token (only the claimant's does)
	tookOver bool
}

func answerOf(rec idem.Record, claimed bool, err error) fuzzAnswer {
	return fuzzAnswer{err: errClass(err), claimed: claimed, state: rec.State, fp: rec.Fingerprint,
		result: string(rec.Result), token: rec.Token != "", tookOver: rec.TookOver}
}

// errClass names what err means to a caller; any error a caller cannot
// act on is named with its text, and fails the input.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, idem.ErrLeaseLost):
		return "lease lost"
	case errors.Is(err, idem.ErrNotFound):
		return "not found"
	case errors.Is(err, idem.ErrConfig):
		return "refused" // a completion re-sent with another result
	}
	return "unexpected: " + err.Error()
}

func unexpected(a fuzzAnswer) bool { return strings.HasPrefix(a.err, "unexpected") }

// tokens are the tokens of one Layer's claims, per key: the last
// claimant's and the one before.
type tokens struct {
	last, before [fuzzKeys]string
	nobody       string
}

func (tk *tokens) of(op fuzzOp) string {
	var tok string
	switch op.token {
	case 0:
		tok = tk.last[op.key]
	case 1:
		tok = tk.before[op.key]
	}
	if tok == "" {
		return tk.nobody
	}
	return tok
}

func (tk *tokens) claimed(key int, tok string) { tk.before[key], tk.last[key] = tk.last[key], tok }

// alone runs op one call at a time on l.
func alone(ctx context.Context, l *Layer, keys []idem.Key, tk *tokens, op fuzzOp) fuzzAnswer {
	k := keys[op.key]
	switch op.kind {
	case fuzzReserve:
		rec, claimed, err := l.Reserve(ctx, k, op.fp, op.lease(), fuzzLong)
		if claimed {
			tk.claimed(op.key, rec.Token)
		}
		return answerOf(rec, claimed, err)
	case fuzzComplete:
		return fuzzAnswer{err: errClass(l.Complete(ctx, k, tk.of(op), op.result, op.lease()))}
	case fuzzRelease:
		return fuzzAnswer{err: errClass(l.Release(ctx, k, tk.of(op)))}
	default:
		return fuzzAnswer{err: errClass(l.Renew(ctx, k, tk.of(op), op.lease()))}
	}
}

// batch runs a round's claims and completions on l through its batches,
// as its batchers would send them had they queued together, and each call
// a batch leaves to its caller's own statements as that caller would; a
// round's releases and renewals, which are never batched, go one at a
// time.
func batch(ctx context.Context, l *Layer, keys []idem.Key, tk *tokens, round []fuzzOp) []fuzzAnswer {
	out := make([]fuzzAnswer, len(round))
	var claims, comps []int // indexes in round
	for i, op := range round {
		switch op.kind {
		case fuzzReserve:
			claims = append(claims, i)
		case fuzzComplete:
			comps = append(comps, i)
		default:
			out[i] = alone(ctx, l, keys, tk, op)
		}
	}
	claimOf := func(op fuzzOp) *claim { return l.newClaim(keys[op.key], op.fp, op.lease(), fuzzLong) }
	compOf := func(op fuzzOp) *completion { return newCompletion(keys[op.key], tk.of(op), op.result, op.lease()) }
	claimAnswer := func(i int, c claimOut) {
		if c.again {
			out[i] = alone(ctx, l, keys, tk, round[i])
			return
		}
		if c.claimed {
			tk.claimed(round[i].key, c.rec.Token)
		}
		out[i] = answerOf(c.rec, c.claimed, c.err)
	}
	compAnswer := func(i int, c completeOut) {
		if c.again {
			out[i] = alone(ctx, l, keys, tk, round[i])
			return
		}
		out[i] = fuzzAnswer{err: errClass(c.err)}
	}
	if l.writes != nil { // Postgres: both kinds in one batch
		var ops []*writeOp
		idx := append(append([]int{}, claims...), comps...)
		for _, i := range idx {
			if round[i].kind == fuzzReserve {
				ops = append(ops, &writeOp{claim: claimOf(round[i])})
			} else {
				ops = append(ops, &writeOp{comp: compOf(round[i])})
			}
		}
		if len(ops) == 0 {
			return out
		}
		for j, w := range l.writes.run(ctx, ops) {
			if i := idx[j]; round[i].kind == fuzzReserve {
				claimAnswer(i, w.claim)
			} else {
				compAnswer(i, w.comp)
			}
		}
		return out
	}
	if len(claims) > 0 {
		cs := make([]*claim, len(claims))
		for j, i := range claims {
			cs[j] = claimOf(round[i])
		}
		for j, c := range l.claims.run(ctx, cs) {
			claimAnswer(claims[j], c)
		}
	}
	if len(comps) > 0 {
		ps := make([]*completion, len(comps))
		for j, i := range comps {
			ps[j] = compOf(round[i])
		}
		for j, c := range l.completions.run(ctx, ps) {
			compAnswer(comps[j], c)
		}
	}
	return out
}

// record is what Get says of a key, as both ways must agree.
func record(ctx context.Context, l *Layer, k idem.Key) fuzzAnswer {
	rec, err := l.Get(ctx, k)
	return answerOf(rec, false, err)
}

var fuzzInputs atomic.Int64

// FuzzBatchAgreesWithSingle: for any sequence of rounds of calls, the
// batched statements answer each call as the single statements do, and
// leave every record as they do.
func FuzzBatchAgreesWithSingle(f *testing.F) {
	var pairs []fuzzPair
	for _, s := range fuzzBackends(f) {
		pairs = append(pairs, fuzzPair{name: s.Kind, batched: fuzzLayer(f, s, WithBatchSize(64)), single: fuzzLayer(f, s)})
	}
	// Seeds: each round's last call has the top bit set. Keys are the
	// second to fourth bits of the first byte; the kind its low two.
	f.Add([]byte{0x00, 0x00, 0x04, 0x00, 0x08, 0x01, 0x8c, 0x00}) // four claims, one with another fingerprint
	f.Add([]byte{0x00, 0x00, 0x00, 0x01, 0x84, 0x00,
		0x01, 0x30, 'o', 'k', 'x', 0x05, 0x14, 'n', 0x85, 0x20, 'a', 'b'}) // claims, then completions by the owner and by nobody
	f.Add([]byte{0x00, 0x02, 0x84, 0x02, // short leases
		0x00, 0x00, 0x84, 0x02, // a grace, then a short one again
		0x80, 0x00, // a takeover
		0x01, 0x10, 'r', 0x81, 0x14, 's'}) // the owner's completion, the former owner's
	f.Add([]byte{0x00, 0x00, 0x80, 0x00, // one key twice in a round
		0x01, 0x12, 'e', 0x87, 0x00, // a short retention; a renewal on another key
		0x80, 0x00, 0x02, 0x00, 0x86, 0x04}) // the expired record taken over; releases
	f.Add([]byte{0x00, 0x00, 0x04, 0x00, 0x88, 0x00,
		0x01, 0x10, 'a', 0x05, 0x10, 'b', 0x89, 0x20, 'c', 'd',
		0x00, 0x01, 0x04, 0x00, 0x88, 0x02}) // replays, a mismatch, a repeat of a completed key
	f.Fuzz(func(t *testing.T, data []byte) {
		rounds := decodeRounds(data)
		if len(rounds) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		n := fuzzInputs.Add(1)
		for _, p := range pairs {
			keys := make([]idem.Key, fuzzKeys)
			for i := range keys {
				keys[i] = idem.NewKey("fuzz", testenv.Name(fmt.Sprintf("%d-%d", n, i)))
			}
			tb, ts := &tokens{nobody: idem.NewToken()}, &tokens{nobody: idem.NewToken()}
			for r, round := range rounds {
				got := batch(ctx, p.batched, keys, tb, round)
				for i, op := range round {
					want := alone(ctx, p.single, keys, ts, op)
					if got[i] != want || unexpected(got[i]) || unexpected(want) {
						t.Fatalf("%s, round %d, call %d (%+v): batched %+v, single %+v\nrounds: %+v", p.name, r, i, op, got[i], want, rounds)
					}
				}
				time.Sleep(fuzzPause) // what is short lapses
				for i, k := range keys {
					if got, want := record(ctx, p.batched, k), record(ctx, p.single, k); got != want || unexpected(got) || unexpected(want) {
						t.Fatalf("%s, after round %d, key %d: batched %+v, single %+v\nrounds: %+v", p.name, r, i, got, want, rounds)
					}
				}
			}
		}
	})
}
