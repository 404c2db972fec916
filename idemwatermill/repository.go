package idemwatermill

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// Repository is Watermill's middleware.ExpiringKeyRepository over a Store,
// for a middleware.Deduplicator shared by every instance: a key is seen
// once across all of them, and (with a SQL tier) across restarts, for the
// Store's retention (tiered.WithRetention), which is the window.
//
// It keeps the Deduplicator's own semantics: the key is marked seen before
// the handler runs, so a handler that fails, or a worker that dies, loses
// the message (its redelivery is dropped as a duplicate). The middleware
// (New) marks a message processed only when its handler succeeded; prefer
// it. Use the Deduplicator with a KeyFactory that reads the message's
// identity (its UUID or an ID in its metadata), not the default checksum
// of the payload, whose collisions drop distinct messages.
type Repository struct {
	store *tiered.Store
	scope string
}

// NewRepository returns a Repository whose keys live in scope (name the
// consumer: two Deduplicators with one scope share their seen keys).
func NewRepository(store *tiered.Store, scope string) (*Repository, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: idemwatermill: NewRepository: nil store", idem.ErrConfig)
	}
	return &Repository{store: store, scope: scope}, nil
}

// IsDuplicate reports whether key was seen before within the window, and
// marks it seen. An empty key is refused (the Deduplicator then nacks the
// message); so is a key whose decision cannot be made (the deciding tier is
// down: idem.ErrUnavailable).
func (r *Repository) IsDuplicate(ctx context.Context, key string) (bool, error) {
	if key == "" {
		return false, fmt.Errorf("%w: empty key", ErrNoIdentity)
	}
	dup, err := r.store.Once(ctx, idem.NewKey(r.scope, key), seen)
	if err != nil {
		return false, fmt.Errorf("idemwatermill: IsDuplicate: %w", err)
	}
	return dup, nil
}

func seen(context.Context) error { return nil }
