package idemwatermill

import (
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
)

// ErrNoIdentity is returned (and the message nacked) for a message that
// lacks what its identity is taken from: an empty UUID, a missing or empty
// metadata field. It is not acknowledged: route such messages away with
// Watermill's poison queue middleware.
var ErrNoIdentity = errors.New("idemwatermill: the message has no identity")

// Identity says what identifies a message: deliveries with the same
// identity, within one consumer, are one message. Build one with UUID,
// Metadata or Payload.
type Identity struct {
	// build returns the function that identifies a message (its key's
	// client part) and fingerprints it (what a delivery under the same
	// identity must agree on), or the Identity's configuration error.
	build func() (identify, error)
}

type identify func(msg *message.Message) (id, fp string, err error)

// UUID identifies a message by its UUID (the default): a broker's
// redelivery keeps it, a publisher that publishes again makes a new one
// unless it reuses the UUID. The payload's digest is the fingerprint: a
// message that comes back under its UUID with another payload is refused
// (idem.ErrMismatch) and nacked.
func UUID() Identity {
	return Identity{build: func() (identify, error) {
		return func(msg *message.Message) (string, string, error) {
			if msg.UUID == "" {
				return "", "", fmt.Errorf("%w: empty UUID", ErrNoIdentity)
			}
			return msg.UUID, payloadDigest(msg.Payload), nil
		}, nil
	}}
}

// Metadata identifies a message by the metadata field name, such as an
// event ID the publisher sets: a publisher's own retry, under a new UUID,
// is then a duplicate too. The payload's digest is the fingerprint, as for
// UUID.
func Metadata(name string) Identity {
	return Identity{build: func() (identify, error) {
		if name == "" {
			return nil, errors.New("Metadata: give a field name (got \"\")")
		}
		return func(msg *message.Message) (string, string, error) {
			id := msg.Metadata.Get(name)
			if id == "" {
				return "", "", fmt.Errorf("%w: metadata field %q is missing or empty", ErrNoIdentity, name)
			}
			return id, payloadDigest(msg.Payload), nil
		}, nil
	}}
}

// Payload identifies a message by the fingerprint of its JSON payload
// (the fingerprint package's Sum, with opts: WithDeny to leave out fields
// that differ between copies of one intent, such as timestamps or trace
// IDs; WithAllow to keep only those that name it). Two messages whose
// payloads agree on the fields kept are one message, whatever their UUIDs.
// A payload that is not JSON is refused with the fingerprint package's
// error, and nacked.
func Payload(opts ...fingerprint.Option) Identity {
	return Identity{build: func() (identify, error) {
		b, err := fingerprint.New(opts...)
		if err != nil {
			return nil, idem.NestedConfigError("Payload", err)
		}
		return func(msg *message.Message) (string, string, error) {
			fp, err := b.Sum(msg.Payload)
			if err != nil {
				return "", "", fmt.Errorf("idemwatermill: the payload's fingerprint: %w", err)
			}
			return fp, fp, nil
		}, nil
	}}
}

// Option configures New. Options apply in order after the defaults; one
// given nonsense makes New fail, with an error that says, under the
// option's name, what to give instead.
type Option func(*config) error

type config struct {
	consumer  string
	identity  Identity
	republish bool
	nackDelay time.Duration
	logger    watermill.LoggerAdapter
}

func defaults() config {
	return config{identity: UUID(), republish: true, logger: watermill.NopLogger{}}
}

// WithConsumer sets the scope of the keys: messages with the same identity
// in two scopes are two messages. Default: the name of the router handler
// the message is delivered to (message.HandlerNameFromCtx), so that two
// handlers subscribed to one topic each process every message once. Set it
// when the middleware runs outside a router, or to keep the keys when a
// handler is renamed.
func WithConsumer(name string) Option {
	return func(c *config) error {
		if name == "" {
			return errors.New("WithConsumer: give a name, or leave the option out to use the router handler's name (got \"\")")
		}
		c.consumer = name
		return nil
	}
}

// WithIdentity sets what identifies a message. Default UUID().
func WithIdentity(id Identity) Option {
	return func(c *config) error {
		if id.build == nil {
			return errors.New("WithIdentity: give UUID(), Metadata(name) or Payload(opts...) (got a zero Identity)")
		}
		c.identity = id
		return nil
	}
}

// WithRepublish sets whether a duplicate of a processed message returns
// the messages its run produced, so that the router publishes them again
// with the UUIDs they were recorded with (consumers downstream that
// deduplicate by UUID, such as another router behind New, see each once).
// Default true: every message whose execution completed has its produced
// messages published at least once, whatever ended a delivery before the
// router published them — a worker that died after the record, a publish
// that failed (the router nacks), a broker that redelivered a message
// whose first delivery another consumer is still finishing, a
// tiered.ErrPending nack.
//
// WithRepublish(false) makes a duplicate produce nothing: each produced
// message is then published at most once, and lost when the delivery that
// ran the handler did not get it published. Give it only for handlers
// whose produced messages are best-effort.
func WithRepublish(on bool) Option {
	return func(c *config) error {
		c.republish = on
		return nil
	}
}

// WithNackDelay sets how long a message whose key another consumer still
// holds, after waiting the Store's wait for it, is held before it is
// nacked, so that a transport that redelivers a nacked message at once
// does not spin. Default 0: the Store's wait (tiered.WithWait, 10 s by
// default) already spaces the redeliveries.
func WithNackDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithNackDelay: give 0 or more (got %v)", d)
		}
		c.nackDelay = d
		return nil
	}
}

// WithLogger sets the logger told of what the middleware cannot return as
// an error: a handler that completed its key in its transaction and then
// returned other messages than it completed with (the completed ones are
// returned). Default none.
func WithLogger(l watermill.LoggerAdapter) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithLogger: give a logger, or leave the option out for none (got nil)")
		}
		c.logger = l
		return nil
	}
}
