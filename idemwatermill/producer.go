package idemwatermill

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// MaxMessageID is the longest identity NewMessage accepts, in bytes: the
// longest idempotency key of the HTTP side, and well inside what a NATS
// header value may hold.
const MaxMessageID = 255

// NewMessage returns a message whose identity is id: its UUID. It is the
// producer's half of the rule "one identity per operation": make id once
// per business operation (an order's ID, or client.NewKey() kept with the
// operation), and when a Publish fails or its acknowledgement is lost,
// publish the same message again rather than a new one.
//
// Two guards then recognise the copy. With watermill-nats in JetStream mode
// and JetStreamConfig{TrackMsgId: true}, the UUID is sent as Nats-Msg-Id,
// and JetStream's duplicate window (the stream's Duplicates, 2 min by
// default) drops a copy published within it. Downstream, this package's
// middleware with UUID(), the default identity, runs the message once per
// consumer for the Store's retention, whatever the broker redelivers. A
// message made anew on each attempt (watermill.NewUUID() inside the retry
// loop) defeats both. A publisher on nats.go directly sets the same
// header itself: jetstream.WithMsgID(id).
//
// An id that is empty, longer than MaxMessageID or not printable ASCII is
// refused with an error wrapping ErrNoIdentity.
func NewMessage(id string, payload message.Payload) (*message.Message, error) {
	switch {
	case id == "":
		return nil, fmt.Errorf("%w: NewMessage: empty id", ErrNoIdentity)
	case len(id) > MaxMessageID:
		return nil, fmt.Errorf("%w: NewMessage: id of %d bytes, at most %d", ErrNoIdentity, len(id), MaxMessageID)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return nil, fmt.Errorf("%w: NewMessage: byte %#02x at %d of the id is not printable ASCII", ErrNoIdentity, c, i)
		}
	}
	return message.NewMessage(id, payload), nil
}
