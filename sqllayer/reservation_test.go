package sqllayer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// TestTookOver: the claim that takes over a lapsed owner's (after its
// grace) says so; a fresh claim does not.
func TestTookOver(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		l, _ := setup(t, s).layer(t)
		k := idem.NewKey("tenant", testenv.Name("took"))
		const lease = 60 * time.Millisecond
		rec, claimed, err := l.Reserve(ctx(t), k, "fp", lease, time.Hour)
		if err != nil || !claimed || rec.TookOver {
			t.Fatalf("fresh claim: %+v %v %v", rec, claimed, err)
		}
		time.Sleep(lease + 20*time.Millisecond) // the owner stopped renewing
		if _, claimed, err := l.Reserve(ctx(t), k, "fp", lease, time.Hour); err != nil || claimed {
			t.Fatalf("the grace: %v %v", claimed, err)
		}
		time.Sleep(lease/4 + 20*time.Millisecond)
		rec, claimed, err = l.Reserve(ctx(t), k, "fp", lease, time.Hour)
		if err != nil || !claimed || !rec.TookOver {
			t.Fatalf("after the grace: %+v %v %v, want a takeover", rec, claimed, err)
		}
	})
}

// TestCompleteReservation: the completion commits or rolls back with the
// caller's transaction; a reservation of another layer is refused.
func TestCompleteReservation(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, db := b.layer(t)
		other, _ := b.layer(t)
		k := idem.NewKey("tenant", testenv.Name("res"))
		rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		if err != nil || !claimed {
			t.Fatal(claimed, err)
		}
		resCtx, owner := reservation.NewContext(ctx(t), l, rec, time.Hour)
		res, _ := idem.ReservationFrom(resCtx)
		err = db.RunInTx(ctx(t), nil, func(ctx context.Context, tx bun.Tx) error {
			return other.CompleteReservation(ctx, tx, res, []byte("x"))
		})
		if !errors.Is(err, idem.ErrConfig) {
			t.Fatalf("another layer: %v, want ErrConfig", err)
		}
		rollback := errors.New("rolled back")
		err = db.RunInTx(ctx(t), nil, func(ctx context.Context, tx bun.Tx) error {
			if err := l.CompleteReservation(ctx, tx, res, []byte("first")); err != nil {
				return err
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatal(err)
		}
		if got, err := l.Get(ctx(t), k); err != nil || got.State != idem.StateInProgress {
			t.Fatalf("after the rollback: %+v %v", got, err)
		}
		err = db.RunInTx(ctx(t), nil, func(ctx context.Context, tx bun.Tx) error {
			return l.CompleteReservation(ctx, tx, res, []byte("second"))
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := l.Get(ctx(t), k); err != nil || !got.Completed() || string(got.Result) != "second" {
			t.Fatalf("after the commit: %+v %v", got, err)
		}
		// A completion again once one committed: the same bytes are a
		// re-send, other bytes the caller's mistake, said at the call; the
		// committed result stands either way.
		err = db.RunInTx(ctx(t), nil, func(ctx context.Context, tx bun.Tx) error {
			return l.CompleteReservation(ctx, tx, res, []byte("second"))
		})
		if err != nil {
			t.Fatalf("the same result again: %v", err)
		}
		err = db.RunInTx(ctx(t), nil, func(ctx context.Context, tx bun.Tx) error {
			return l.CompleteReservation(ctx, tx, res, []byte("other"))
		})
		if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "another result") {
			t.Fatalf("another result after the commit: %v, want ErrConfig", err)
		}
		if got, err := l.Get(ctx(t), k); err != nil || string(got.Result) != "second" {
			t.Fatalf("after the refused completion: %+v %v", got, err)
		}
		end := owner.End()
		if !end.InTx || !end.Wrote([]byte("second")) || end.Refused == nil {
			t.Fatalf("the Store's view: %+v; want the results written and the refusal", end)
		}
		err = db.RunInTx(ctx(t), nil, func(ctx context.Context, tx bun.Tx) error {
			return l.CompleteReservation(ctx, tx, res, []byte("third"))
		})
		if !errors.Is(err, idem.ErrConfig) {
			t.Fatalf("after the execution ended: %v, want ErrConfig", err)
		}
	})
}
