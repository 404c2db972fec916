package idemwatermill

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// Repository is Watermill's middleware.ExpiringKeyRepository over a Store,
// for a middleware.Deduplicator shared by every instance: a key is seen
// once across all of them, and (with a SQL tier) across restarts, for the
// Store's retention (tiered.WithRetention), which is the window.
//
// A key is marked seen only when a caller of IsDuplicate was told it is
// not a duplicate: a call whose context ends first (the Deduplicator's
// Timeout passed while the deciding tier was slow) returns an error, the
// message is nacked, and its redelivery is not taken for a duplicate.
//
// It cannot change the Deduplicator's own semantics: the Deduplicator
// asks before the handler runs and never tells the Repository how the
// handler ended, so a handler that fails, or a worker that dies
// mid-handler, loses the message (its redelivery is dropped as a
// duplicate). The middleware (New) marks a message processed only when
// its handler succeeded; prefer it for every message that must not be
// lost. Use the Deduplicator with a KeyFactory that reads the message's
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

// errAbandoned is what marking a key returns when its caller gave up
// before the mark: the key is released, so that the redelivery is new.
var errAbandoned = errors.New("idemwatermill: the caller gave up before its key was marked")

// The states of one IsDuplicate call's ask.
const (
	asking    int32 = iota
	told            // the mark was made for the caller, who is told "first"
	abandoned       // the caller's context ended before the mark
)

// IsDuplicate reports whether key was seen before within the window, and
// marks it seen when it was not. An empty key is refused (the
// Deduplicator then nacks the message); so is a key whose decision cannot
// be made (the deciding tier is down: idem.ErrUnavailable), and a call
// whose ctx ends before the key is marked (its cause): the key is then
// not marked, and a later call decides again.
//
// Once the key is marked for this call, IsDuplicate waits for the Store
// to record the mark (bounded by the Store's timeouts, not by ctx) and
// reports false: the caller is the one told "first". When the deciding
// tier has not yet confirmed the mark (tiered.ErrPending) it also
// reports false, with no error: the Store goes on recording it.
func (r *Repository) IsDuplicate(ctx context.Context, key string) (bool, error) {
	if key == "" {
		return false, fmt.Errorf("%w: empty key", ErrNoIdentity)
	}
	var state atomic.Int32
	// The Store's call does not end with ctx: once the key is marked for
	// this caller, the caller waits for the mark's outcome. Until then,
	// ctx's end abandons the ask, and the mark, when it comes, releases
	// the key instead.
	wait, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		if state.CompareAndSwap(asking, abandoned) {
			cancel(context.Cause(ctx))
		}
	})
	defer stop()
	dup, err := r.store.Once(wait, idem.NewKey(r.scope, key), func(context.Context) error {
		if !state.CompareAndSwap(asking, told) {
			return errAbandoned
		}
		return nil
	})
	switch {
	case err == nil:
		return dup, nil
	case errors.Is(err, tiered.ErrPending) && state.Load() == told:
		return false, nil
	}
	return false, fmt.Errorf("idemwatermill: IsDuplicate: %w", err)
}
