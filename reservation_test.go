package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
)

type ctxKey string

// The context carrying a reservation is its parent in everything else: its
// values, its cancellation and cause, and the cancellation of the contexts
// made from it.
func TestReservationContext(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), ctxKey("v"), "parent's"))
	ctx, _ := reservation.NewContext(parent, nil, idem.Record{Key: idem.NewKey("", "k"), Token: "t"}, time.Hour)
	res, ok := idem.ReservationFrom(ctx)
	if !ok || res.Token() != "t" || res.Retention() != time.Hour {
		t.Fatalf("ReservationFrom = %+v, %v", res, ok)
	}
	if v := ctx.Value(ctxKey("v")); v != "parent's" {
		t.Fatalf("parent's value %v", v)
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	if got, ok := idem.ReservationFrom(child); !ok || got != res {
		t.Fatalf("a derived context's reservation = %p, %v; want %p", got, ok, res)
	}
	if ctx.Err() != nil || ctx.Done() != parent.Done() {
		t.Fatal("not the parent's cancellation")
	}
	cause := errors.New("lease lost")
	cancel(cause)
	<-child.Done()
	if !errors.Is(ctx.Err(), context.Canceled) || context.Cause(ctx) != cause || context.Cause(child) != cause {
		t.Fatalf("Err %v, Cause %v, child's Cause %v", ctx.Err(), context.Cause(ctx), context.Cause(child))
	}
	if _, ok := idem.ReservationFrom(context.Background()); ok {
		t.Fatal("a reservation outside an execution")
	}
}

// Behind code that requires the completion, ReservationFrom takes the
// reservation and KeyFrom does not: a function that only read its key has
// nothing left uncompleted; one that took the reservation and never wrote
// a completion has.
func TestReservationTakenOnlyByReservationFrom(t *testing.T) {
	k := idem.NewKey("", "k")
	ctx, owner := reservation.NewContext(context.Background(), nil, idem.Record{Key: k, Token: "t"}, time.Hour)
	res, ok := idem.ReservationFrom(ctx) // before RequireCompletion: the runner's own read
	if !ok {
		t.Fatal("no reservation")
	}
	reservation.Of(res).RequireCompletion()
	if got, ok := idem.KeyFrom(ctx); !ok || got != k {
		t.Fatalf("KeyFrom = %v, %v", got, ok)
	}
	if e := owner.InTx(); e.Uncompleted {
		t.Fatal("reading the key took the reservation")
	}
	if _, ok := idem.ReservationFrom(ctx); !ok {
		t.Fatal("no reservation")
	}
	if e := owner.End(); !e.Uncompleted || e.InTx {
		t.Fatalf("after ReservationFrom and no completion: %+v, want uncompleted", e)
	}
	if _, ok := idem.KeyFrom(context.Background()); ok {
		t.Fatal("a key outside an execution")
	}
}
