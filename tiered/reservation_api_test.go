package tiered_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// The reservation as a function reads it from its context, and the
// mistakes CompleteReservation refuses.

// The reservation a function reads: its key and token; took over when an
// earlier owner's claim lapsed; none outside an execution or without a
// decision.
func TestReservationFromContext(t *testing.T) {
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	mem := newMem(t, memlayer.WithClock(func() time.Time { return *now.Load() }))
	s := newStore(t, tiered.WithSQL(mem))
	k := newKey(t)
	if _, ok := idem.ReservationFrom(t.Context()); ok {
		t.Fatal("a reservation outside an execution")
	}
	var got *idem.Reservation
	if _, err := s.Do(t.Context(), k, "fp", func(ctx context.Context) ([]byte, error) {
		got, _ = idem.ReservationFrom(ctx)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got == nil || !got.Key().Equal(k) || got.Token() == "" || got.TookOver() || got.Fingerprint() != "fp" ||
		got.Layer() != idem.Layer(mem) || got.Retention() != tiered.DefaultRetention {
		t.Fatalf("reservation %+v", got)
	}

	// An owner that stopped: its lease lapses, then the grace after it.
	k2 := newKey(t)
	if _, claimed, err := mem.Reserve(t.Context(), k2, "fp", time.Second, time.Hour); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	later := start.Add(2 * time.Second)
	now.Store(&later)
	if _, claimed, err := mem.Reserve(t.Context(), k2, "fp", time.Second, time.Hour); err != nil || claimed {
		t.Fatal("the grace:", claimed, err)
	}
	later = later.Add(2 * time.Second)
	now.Store(&later)
	if _, err := s.Do(t.Context(), k2, "fp", func(ctx context.Context) ([]byte, error) {
		got, _ = idem.ReservationFrom(ctx)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got == nil || !got.TookOver() {
		t.Fatalf("after a lapsed owner: %+v, want TookOver", got)
	}

	// Fail open without a decision: no reservation.
	down := faultlayer.New(newMem(t))
	down.Down()
	open := newStore(t, tiered.WithSQL(down), tiered.WithFailOpen(true))
	ran := false
	if _, err := open.Do(t.Context(), newKey(t), "fp", func(ctx context.Context) ([]byte, error) {
		_, ok := idem.ReservationFrom(ctx)
		ran = true
		if ok {
			return nil, errors.New("a reservation without a decision")
		}
		return nil, nil
	}); err != nil || !ran {
		t.Fatal(ran, err)
	}
}

// Completing in a transaction where it cannot work says what to do: a
// Store whose deciding tier is not this SQL layer, a call outside an
// execution, a reservation whose execution ended.
func TestCompleteReservationMisuse(t *testing.T) {
	st := stacktest.Embedded(t)
	lg := newLedger(t, st)
	sqlL := lg.layer(t)
	mem := newStore(t, tiered.WithSQL(newMem(t)))
	redisOnly := newStore(t, tiered.WithRedis(st.RedisLayer(t)))
	var kept *idem.Reservation
	for name, s := range map[string]*tiered.Store{"memlayer": mem, "redis only": redisOnly} {
		t.Run(name, func(t *testing.T) {
			_, err := s.Do(t.Context(), newKey(t), "fp", func(ctx context.Context) ([]byte, error) {
				res, ok := idem.ReservationFrom(ctx)
				if !ok {
					return nil, errors.New("no reservation")
				}
				kept = res
				return nil, lg.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					return sqlL.CompleteReservation(ctx, tx, res, []byte("x"))
				})
			})
			if !errors.Is(err, idem.ErrConfig) {
				t.Fatalf("%v, want ErrConfig", err)
			}
		})
	}
	tx, err := lg.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := sqlL.CompleteReservation(t.Context(), tx, nil, []byte("x")); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("outside an execution: %v, want ErrConfig", err)
	}
	s := lg.store(t, sqlL)
	if _, err := s.Do(t.Context(), newKey(t), "fp", func(ctx context.Context) ([]byte, error) {
		kept, _ = idem.ReservationFrom(ctx)
		return []byte("done"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := sqlL.CompleteReservation(t.Context(), tx, kept, []byte("x")); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("after the execution ended: %v, want ErrConfig", err)
	}
}
