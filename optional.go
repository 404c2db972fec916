package idem

import (
	"context"
	"time"
)

// Waiter is an optional interface of layers that can tell a waiting
// duplicate, on any instance, that an in-progress record has finished,
// without polling (the Redis layer does it with a completion signal).
type Waiter interface {
	// Wait blocks until the record for key is completed or gone (released or
	// expired), or until ctx ends. It returns the completed record (Token
	// ""), ErrNotFound when the record is gone (the owner failed: the caller
	// may claim it), or ctx's error. A record taken over by another owner is
	// still in progress: Wait goes on waiting.
	Wait(ctx context.Context, key Key) (Record, error)
}

// Filler is an optional interface of cache layers (Redis) that can store a
// completed record decided by another tier, so that the next duplicate is
// answered without asking that tier again (back-fill from SQL).
type Filler interface {
	// Fill stores rec, which must be completed, for ttl, replacing an
	// in-progress record under the same key whatever its token (the deciding
	// tier said the work is done) and waking that key's waiters. An existing
	// completed record is left as it is.
	Fill(ctx context.Context, rec Record, ttl time.Duration) error
}

// Checker is an optional interface of layers that can say whether they are
// ready to decide, for readiness probes (the Store's Check asks each tier).
type Checker interface {
	// Check costs one cheap round trip. It returns nil when the layer can
	// serve, an error wrapping ErrConfig for a setup mistake (missing
	// tables, refused credentials), and one wrapping ErrUnavailable for an
	// outage.
	Check(ctx context.Context) error
}
