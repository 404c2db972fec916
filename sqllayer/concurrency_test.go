package sqllayer_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// servers runs fn on the real Postgres and MariaDB/MySQL.
func servers(t *testing.T, fn func(t *testing.T, s *testenv.SQL)) {
	t.Run("postgres", func(t *testing.T) { fn(t, testenv.Postgres(t)) })
	t.Run("mysql", func(t *testing.T) { fn(t, testenv.MySQL(t)) })
}

const (
	instances  = 8 // Layers, each over a pool of its own
	perLayer   = 8 // goroutines per Layer
	poolConns  = 4 // connections per pool: 32 in all, well inside shared servers' limits
	contenders = instances * perLayer
)

// fleet returns n Layers over pools of their own, as n service instances.
func (b *backend) fleet(t *testing.T, n int, opts ...sqllayer.Option) []*sqllayer.Layer {
	ls := make([]*sqllayer.Layer, n)
	for i := range ls {
		l, db := b.layer(t, opts...)
		db.SetMaxOpenConns(poolConns)
		ls[i] = l
	}
	return ls
}

// race starts fn on contenders goroutines at once, goroutine g using
// Layer g%instances, and waits for all.
func race(ls []*sqllayer.Layer, fn func(g int, l *sqllayer.Layer)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range contenders {
		wg.Go(func() {
			<-start
			fn(g, ls[g%len(ls)])
		})
	}
	close(start)
	wg.Wait()
}

// TestEightInstancesOneKey: 8 Layers × 8 goroutines reserve one key; exactly
// one claims it and every other sees the claim. Repeated on fresh keys, in
// turn with each order of Reserve's statements.
func TestEightInstancesOneKey(t *testing.T) {
	orders := []idem.ReserveOrder{idem.OrderAdaptive, idem.OrderReadFirst, idem.OrderClaimFirst, sqllayer.OrderOneRoundTrip}
	servers(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		var fleets [][]*sqllayer.Layer
		for _, o := range orders {
			fleets = append(fleets, b.fleet(t, instances, sqllayer.WithReserveOrder(o)))
		}
		for round := range 12 {
			ls := fleets[round%len(fleets)]
			k := idem.NewKey("one-key", testenv.Name(fmt.Sprint(round)))
			var claims, errs atomic.Int32
			race(ls, func(_ int, l *sqllayer.Layer) {
				rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Hour, time.Hour)
				switch {
				case err != nil:
					if errs.Add(1) < 3 {
						t.Errorf("Reserve: %v", err)
					}
				case claimed:
					claims.Add(1)
				case rec.State != idem.StateInProgress || rec.Token != "":
					t.Errorf("a loser saw %+v", rec)
				}
			})
			if n := claims.Load(); n != 1 || errs.Load() != 0 {
				t.Fatalf("round %d: %d claims and %d errors, want exactly 1 claim", round, n, errs.Load())
			}
		}
	})
}

// TestEightInstancesThousandKeys: the same fleet on 1,000 keys. The keys
// fall in perLayer groups; the goroutines with the same index in each of the
// 8 Layers walk one group, each from its own offset, so that 8 instances meet
// on every key, in a different order each time. Each key has exactly one
// claim.
func TestEightInstancesThousandKeys(t *testing.T) {
	const keys = 1000
	servers(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		ls := b.fleet(t, instances)
		ks := make([]idem.Key, keys)
		scope := testenv.Name("keys")
		for i := range ks {
			ks[i] = idem.NewKey(scope, fmt.Sprint(i))
		}
		claims := make([]atomic.Int32, keys)
		var errs atomic.Int32
		const group = keys / perLayer
		race(ls, func(g int, l *sqllayer.Layer) {
			first, offset := (g/instances)*group, (g%instances)*group/instances
			for j := range group {
				i := first + (j+offset)%group
				_, claimed, err := l.Reserve(ctx(t), ks[i], "fp", time.Hour, time.Hour)
				if err != nil {
					if errs.Add(1) < 3 {
						t.Errorf("Reserve: %v", err)
					}
					continue
				}
				if claimed {
					claims[i].Add(1)
				}
			}
		})
		bad := 0
		for i := range claims {
			if n := claims[i].Load(); n != 1 {
				if bad++; bad < 5 {
					t.Errorf("key %d: %d claims, want 1", i, n)
				}
			}
		}
		if bad > 0 || errs.Load() > 0 {
			t.Fatalf("%d of %d keys without exactly one claim, %d errors", bad, keys, errs.Load())
		}
		if n := count(t, b.sql.Open(t), b.records, "scope = ?", scope); n != keys {
			t.Fatalf("%d rows, want %d", n, keys)
		}
	})
}

// TestStaleOwnerAfterTakeover: an owner whose lease and grace lapsed races
// its own Complete against 64 contenders taking over. Either its Complete got in
// first (and no one took over) or exactly one contender took over, and then
// the stale owner got ErrLeaseLost; whichever won, its result is the one
// stored.
func TestStaleOwnerAfterTakeover(t *testing.T) {
	servers(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		ls := b.fleet(t, instances)
		const lease = 300 * time.Millisecond
		// Claim every round's key first, then wait out the leases once.
		ks := make([]idem.Key, 8)
		stale := make([]idem.Record, len(ks))
		for i := range ks {
			ks[i] = idem.NewKey("stale", testenv.Name(fmt.Sprint(i)))
			rec, claimed, err := ls[0].Reserve(ctx(t), ks[i], "fp", lease, time.Hour)
			if err != nil || !claimed {
				t.Fatalf("first claim: %v %v", claimed, err)
			}
			stale[i] = rec
		}
		time.Sleep(2 * lease)
		// The first Reserve on each lapsed lease grants a grace; the race
		// below is for the takeover after it.
		for _, k := range ks {
			if _, claimed, err := ls[1].Reserve(ctx(t), k, "fp", lease, time.Hour); err != nil || claimed {
				t.Fatalf("Reserve after the lease: claimed=%v err=%v, want the owner's grace", claimed, err)
			}
		}
		time.Sleep(lease) // past every grace, a quarter of the lease
		takeovers := 0
		for i, k := range ks {
			var (
				claims     atomic.Int32
				winner     atomic.Value
				staleErr   error
				staleDone  = make(chan struct{})
				staleStart = make(chan struct{})
			)
			go func() {
				defer close(staleDone)
				<-staleStart
				staleErr = ls[0].Complete(ctx(t), k, stale[i].Token, []byte("stale"), time.Hour)
			}()
			race(ls, func(g int, l *sqllayer.Layer) {
				if g == 0 {
					close(staleStart)
				}
				rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
				if err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				if claimed {
					claims.Add(1)
					winner.Store(rec)
				}
			})
			<-staleDone
			want := "stale"
			switch n := claims.Load(); {
			case n > 1:
				t.Fatalf("key %d: %d takeovers, want at most 1", i, n)
			case n == 1:
				takeovers++
				rec := winner.Load().(idem.Record)
				if rec.Token == stale[i].Token {
					t.Fatal("the takeover kept the old token")
				}
				if !errors.Is(staleErr, idem.ErrLeaseLost) {
					t.Fatalf("key %d: stale Complete after a takeover: %v, want ErrLeaseLost", i, staleErr)
				}
				if err := ls[1].Complete(ctx(t), k, rec.Token, []byte("winner"), time.Hour); err != nil {
					t.Fatalf("winner Complete: %v", err)
				}
				// The stale owner tries again after the winner: still lost.
				if err := ls[0].Complete(ctx(t), k, stale[i].Token, []byte("stale"), time.Hour); !errors.Is(err, idem.ErrLeaseLost) {
					t.Fatalf("stale Complete after the winner's: %v", err)
				}
				want = "winner"
			case staleErr != nil:
				t.Fatalf("key %d: no takeover, yet the stale owner's Complete failed: %v", i, staleErr)
			}
			got, err := ls[2].Get(ctx(t), k)
			if err != nil || got.State != idem.StateCompleted || string(got.Result) != want {
				t.Fatalf("key %d: stored %+v (%v), want %q", i, got, err, want)
			}
		}
		t.Logf("%d of %d rounds were won by a takeover", takeovers, len(ks))
	})
}
