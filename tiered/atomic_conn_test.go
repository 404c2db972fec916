package tiered_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// poolOf returns a SQL layer of st's tables over a pool of at most n
// connections, and the pool.
func poolOf(t *testing.T, st *stacktest.Stack, n int) (*sqllayer.Layer, *bun.DB) {
	t.Helper()
	db := st.DB(t)
	db.SetMaxOpenConns(n)
	l := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events),
		sqllayer.WithVersionsTable(st.Versions)))(t)
	return l, db
}

// A pool whose connections all hold open transactions answers a new key
// with idem.ErrInFlight once the wait is over; a connection that comes
// free serves it.
func TestAtomicPoolFull(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, sq *testenv.SQL) {
		if !sq.Real {
			t.Skip("an embedded database's pool is not shared with a server's limit") // SQLite serializes writers anyway
		}
		st := stacktest.On(t, sq.Kind, testenv.MiniRedis(t), sq)
		l, _ := poolOf(t, st, 2)
		opts := []tiered.Option{tiered.WithSQL(l), tiered.WithAtomic(true), tiered.WithWait(500 * time.Millisecond),
			tiered.WithTimeouts(time.Second, time.Second)}
		s := newStore(t, opts...)
		release := make(chan struct{})
		var owners []<-chan answered
		held := newKey(t)
		for _, k := range []idem.Key{held, newKey(t)} {
			started := make(chan struct{})
			owners = append(owners, doOn(t.Context(), s, k, func(context.Context) ([]byte, error) {
				close(started)
				<-release
				return []byte("held"), nil
			}))
			<-started
		}
		// A key no one holds is not in flight: the pool is too small for
		// the executions it serves, and the database cannot decide now.
		key := newKey(t)
		_, err := s.Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { return []byte("third"), nil })
		if !errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("a new key with every connection held: %v, want ErrUnavailable", err)
		}
		// A duplicate (through another Store on the same layer, which
		// shares no flight with the first) of a key an execution holds is.
		other := newStore(t, opts...)
		_, err = other.Do(t.Context(), held, "fp", func(context.Context) ([]byte, error) { return []byte("again"), nil })
		if !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("a held key with every connection held: %v, want ErrInFlight", err)
		}
		close(release)
		for _, o := range owners {
			if got := within(t, o, "an owner"); got.err != nil {
				t.Fatalf("owner: %v", got)
			}
		}
		res, err := s.Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { return []byte("third"), nil })
		if err != nil || string(res.Value) != "third" {
			t.Fatalf("the key once a connection came free: %+v, %v", res, err)
		}
	})
}
