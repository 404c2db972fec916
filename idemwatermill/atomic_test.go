package idemwatermill_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// Behind Stores in the atomic mode the handler writes its effect through
// sqllayer.TxFrom(msg.Context()) and returns its messages: the effect, the
// processed mark and the messages commit in one transaction. A handler
// error rolls the effect back and nacks; the redelivery, on another
// instance, runs once and commits; every later delivery is acknowledged
// without running, with the committed messages. Complete is refused there:
// the Store completes.
func TestAtomicStore(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		a := lg.node(t, tiered.WithAtomic(true))
		b := lg.node(t, tiered.WithAtomic(true), tiered.WithLocalCache(0, 0, 0))
		boom := errors.New("the stock check failed")
		shipped := message.NewMessage("out-1", []byte("shipped"))
		runs := 0
		on := func(n node) message.HandlerFunc {
			return wrap(t, n.store, func(msg *message.Message) ([]*message.Message, error) {
				runs++
				tx, ok := sqllayer.TxFrom(msg.Context())
				if !ok {
					return nil, errors.New("no transaction on the message's context")
				}
				if _, err := lg.db.NewRaw("INSERT INTO "+lg.table+" (msg, consumer) VALUES (?, ?)", msg.UUID, "ship").Conn(tx).Exec(msg.Context()); err != nil {
					return nil, err
				}
				if runs == 1 {
					return nil, boom
				}
				return []*message.Message{shipped}, nil
			}, idemwatermill.WithRepublish(true))
		}
		if _, err := on(a)(delivery(t, "m-1", "{}")); !errors.Is(err, boom) {
			t.Fatalf("the failed run: %v, want its error (a nack)", err)
		}
		if n := lg.effects(t, "ship")["m-1"]; n != 0 {
			t.Fatalf("%d effects after the failed run, want 0: it rolled back", n)
		}
		for i, n := range []node{b, a, b} {
			out, err := on(n)(delivery(t, "m-1", "{}"))
			if err != nil || len(out) != 1 || !out[0].Equals(shipped) {
				t.Fatalf("delivery %d: %v, %v; want the committed message", i, out, err)
			}
		}
		if runs != 2 {
			t.Fatalf("the handler ran %d times, want 2 (the failed run, then one)", runs)
		}
		if n := lg.effects(t, "ship")["m-1"]; n != 1 {
			t.Fatalf("%d effects, want 1", n)
		}

		_, err := wrap(t, a.store, func(msg *message.Message) ([]*message.Message, error) {
			tx, _ := sqllayer.TxFrom(msg.Context())
			if _, err := lg.db.NewRaw("INSERT INTO "+lg.table+" (msg, consumer) VALUES (?, ?)", msg.UUID, "ship").Conn(tx).Exec(msg.Context()); err != nil {
				return nil, err
			}
			return nil, idemwatermill.Complete(msg.Context(), tx, a.sql)
		})(delivery(t, "m-2", "{}"))
		if !errors.Is(err, idem.ErrConfig) {
			t.Fatalf("Complete behind an atomic Store: %v, want idem.ErrConfig", err)
		}
		if n := lg.effects(t, "ship")["m-2"]; n != 0 {
			t.Fatalf("%d effects of a refused completion, want 0", n)
		}
	})
}
