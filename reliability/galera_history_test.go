package reliability_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/reliability/internal/history"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// galeraFinals reads each key's record from SQL (node 1) and Redis, and
// in the atomic mode the executions whose charge committed.
func galeraFinals(t *testing.T, admin *bun.DB, st *stacktest.Stack, ledger string, keys []string, atomicMode bool) []history.Final {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	effects := map[string][]string{}
	if atomicMode {
		rows, err := admin.QueryContext(ctx, "SELECT exec, key_id FROM "+ledger)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var e, k string
			if err := rows.Scan(&e, &k); err != nil {
				t.Fatal(err)
			}
			effects[k] = append(effects[k], e)
		}
		_ = rows.Close()
	}
	reader := must.Get(sqllayer.New(admin, sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events), sqllayer.WithVersionsTable(st.Versions)))(t)
	redis := must.Get(redislayer.New(st.Redis.Client(t), redislayer.WithPrefix(st.Prefix), redislayer.WithTimeout(5*time.Second)))(t)
	defer redis.Close()
	at := time.Now().UnixNano()
	finals := make([]history.Final, 0, len(keys))
	for _, name := range keys {
		key := idem.NewKey("galera-soak", name)
		f := history.Final{Key: name, At: at, SQL: history.Stored{State: history.Absent}, Redis: history.Stored{State: history.Absent}}
		if atomicMode {
			f.Effects = effects[name]
			if f.Effects == nil {
				f.Effects = []string{}
			}
		}
		for _, tier := range []struct {
			l   idem.Layer
			out *history.Stored
		}{{reader, &f.SQL}, {redis, &f.Redis}} {
			rec, err := tier.l.Get(ctx, key)
			switch {
			case errors.Is(err, idem.ErrNotFound):
			case err != nil:
				t.Fatalf("read %s: %v", name, err)
			case rec.Completed():
				*tier.out = history.Stored{State: history.Completed, Fingerprint: rec.Fingerprint, Value: rec.Result}
			case rec.LeaseUntil.After(time.Unix(0, at)):
				*tier.out = history.Stored{State: history.InProgress, Fingerprint: rec.Fingerprint}
			}
		}
		finals = append(finals, f)
	}
	return finals
}

// outcomeOfDo maps Do's answer to the history's outcome, errors first
// (callers that shared a failed execution get Result.Replayed with the
// error); workErr, when not nil, is the error of the load's own failing
// work, which is the function's failure.
func outcomeOfDo(ctx context.Context, res tiered.Result, err, workErr error) history.Outcome {
	var pe *tiered.PanicError
	switch {
	case err == nil && res.Replayed:
		return history.Replayed
	case err == nil:
		return history.Executed
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return history.Canceled
	case errors.As(err, &pe):
		return history.Panicked
	case errors.Is(err, tiered.ErrNotReplayable):
		return history.NotReplayable
	case errors.Is(err, idem.ErrLeaseLost):
		return history.LeaseLost
	case errors.Is(err, idem.ErrMismatch):
		return history.Mismatch
	case errors.Is(err, idem.ErrInFlight):
		return history.InFlight
	case errors.Is(err, idem.ErrUnavailable):
		return history.Unavailable
	case errors.Is(err, idem.ErrClosed):
		return history.Closed
	case workErr != nil && errors.Is(err, workErr):
		return history.FnFailed
	}
	return history.OtherError
}

// errClassOf names a tier error for the soak's counts.
func errClassOf(err error) string {
	if err == nil {
		return "none"
	}
	return errClass(err)
}

// otherClass names an error a caller got that the history calls
// OtherError.
func otherClass(err error) string {
	switch {
	case errors.Is(err, tiered.ErrNotCommitted):
		return "not committed"
	case errors.Is(err, sqllayer.ErrConflict):
		return "conflict"
	}
	return errClassOf(err)
}

// rerunKeys counts the keys whose work ran to success more than once.
func rerunKeys(h *history.History) int {
	ok := map[string]int{}
	for _, e := range h.Execs {
		if !e.Failed {
			ok[e.Key]++
		}
	}
	n := 0
	for _, c := range ok {
		if c > 1 {
			n++
		}
	}
	return n
}

// countFaults counts the history's faults of kind k.
func countFaults(h *history.History, k history.FaultKind) int {
	n := 0
	for _, f := range h.Faults {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// mergeHistory decodes the recorders' files and merges them with the
// finals.
func mergeHistory(t *testing.T, files []string, finals []history.Final) *history.History {
	t.Helper()
	parts := []*history.History{{Finals: finals}}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		h, err := history.Decode(f)
		_ = f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		parts = append(parts, h)
	}
	return history.Merge(parts...)
}
