package idemwatermill_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// A publisher that sends the same message again after a lost ack is
// recognised downstream: one effect. One that makes a new message per
// attempt is not.
func TestNewMessageOneIdentityPerOperation(t *testing.T) {
	store := must.Get(tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t))))(t)
	t.Cleanup(func() { _ = store.Close() })
	var runs atomic.Int64
	h := wrap(t, store, func(*message.Message) ([]*message.Message, error) { runs.Add(1); return nil, nil })
	msg, err := idemwatermill.NewMessage("order-1042", message.Payload(`{"amount":100}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first publish's ack was lost: the same message again
		if _, err := h(msg.Copy()); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 1 || msg.UUID != "order-1042" {
		t.Fatalf("%d runs of %s, want 1", runs.Load(), msg.UUID)
	}
	for range 2 { // a new message per attempt: two operations to every guard
		if _, err := h(message.NewMessage(watermill.NewUUID(), msg.Payload)); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 3 {
		t.Fatalf("%d runs, want 3", runs.Load())
	}
	for _, id := range []string{"", strings.Repeat("x", idemwatermill.MaxMessageID+1), "é", "a\nb"} {
		if _, err := idemwatermill.NewMessage(id, nil); !errors.Is(err, idemwatermill.ErrNoIdentity) {
			t.Errorf("NewMessage(%q): %v, want ErrNoIdentity", id, err)
		}
	}
}
