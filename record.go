package idem

import (
	"context"
	"time"
)

// State is the state of a Record.
type State uint8

const (
	// StateInProgress marks a record claimed by an owner whose work has not
	// finished. Only the holder of its Token may change it.
	StateInProgress State = 1
	// StateCompleted marks a record whose result is stored and replayed to
	// every duplicate until it expires.
	StateCompleted State = 2
)

// String returns "in_progress", "completed" or "unknown".
func (s State) String() string {
	switch s {
	case StateInProgress:
		return "in_progress"
	case StateCompleted:
		return "completed"
	}
	return "unknown"
}

// Record is what a layer stores under a Key.
type Record struct {
	// Key is the record's key.
	Key Key
	// Fingerprint is the hash of what the first request meant. A later
	// request with the same key and another fingerprint is a mismatch.
	Fingerprint string
	// State is StateInProgress or StateCompleted.
	State State
	// Token is the owner token minted at the claim. Layers return it only to
	// the caller whose Reserve claimed the key; every other read has "".
	Token string
	// TookOver is set on the record a Reserve returns to the caller that
	// claimed the key by taking over the lapsed claim of an earlier owner
	// (whose work may have begun). Layers that cannot tell leave it false.
	TookOver bool
	// Result is the stored result of a completed record, opaque to layers. It
	// is nil for an in-progress record and may be empty for a completed one.
	Result []byte
	// LeaseUntil is when an in-progress claim lapses unless renewed (by the
	// store's clock). Zero for a completed record.
	LeaseUntil time.Time
	// ExpiresAt is when the record is forgotten (by the store's clock).
	ExpiresAt time.Time
	// ExpiresIn is how long the record had left to live when the layer
	// answered, by the store's own clock: the record lives at least until
	// the moment the call that returned it was sent, plus ExpiresIn. Unlike
	// ExpiresAt it needs no agreement between the application's clock and
	// the store's, so a cache of the record (the Store's local cache) uses
	// it to never outlive the record. Zero when the layer cannot tell.
	ExpiresIn time.Duration
}

// The limits of a Record. They are the vocabulary's, not a layer's option:
// every layer applies the same ones, so that what one tier keeps no other
// tier refuses (a result Redis back-fills from SQL, a record that moves
// from a memlayer in tests to SQL in production).
const (
	// MaxResult is the largest Result a layer stores, in bytes: 4 MiB. A
	// layer refuses a larger one with ErrTooLarge before anything is sent,
	// and the Store then keeps the key as a result that cannot be replayed
	// (the work ran once and never runs again). It holds a response body of
	// the HTTP middleware's default limit (1 MiB) with ample room for its
	// encoding, and fits in one MySQL statement under MariaDB's default
	// max_allowed_packet (16 MiB), where a result travels hex-encoded,
	// twice its size.
	MaxResult = 4 << 20
	// MaxFingerprint is the longest Fingerprint a layer stores, in bytes:
	// 1 KiB, the width of the MySQL column. A layer refuses a longer one.
	// A fingerprint is normally a digest, far shorter (package fingerprint's
	// are fingerprint.DigestLen bytes).
	MaxFingerprint = 1024
)

// Completed reports whether r holds a result.
func (r Record) Completed() bool { return r.State == StateCompleted }

// Layer is one storage tier. Every implementation passes the conformance
// suite in package storetest. All times are the store's own clock: a
// database decides leases by its clock, never the application's.
//
// Tokens are random per claim. Every change to an in-progress record is a
// compare-and-set on the token; a token that does not match gets
// [ErrLeaseLost] and changes nothing.
type Layer interface {
	// Reserve claims key for fingerprint, or reports what is there.
	//
	//   - No live record: a new in-progress record is stored with a fresh
	//     token, a lease of lease and an expiry of ttl, or of the lease and
	//     its grace (lease/4, below) if they end later; claimed is true and
	//     the returned record carries the token.
	//   - A live record: it is returned (Token "") and claimed is false. The
	//     caller compares Fingerprint (a different one is a mismatch) and
	//     State (completed: replay; in progress: wait).
	//   - An in-progress record with the same fingerprint whose lease has
	//     lapsed is first given a grace of lease/4 (the lease the caller
	//     passes): the first Reserve that finds it lapsed extends its lease
	//     by that grace, keeps its token, and reports it in progress
	//     (claimed false). A Reserve that finds the grace lapsed too takes
	//     it over: a new token is minted, claimed is true, and the old
	//     owner's token stops working. The old owner's Renew or Complete
	//     during the grace keeps the key, so an owner cut off from the store
	//     for longer than its lease (an outage) that retries its completion
	//     more often than the grace completes before anyone takes over once
	//     the store answers again. A record with another fingerprint is never
	//     taken over.
	//
	// A duplicate must cost a read, not a write.
	Reserve(ctx context.Context, key Key, fingerprint string, lease, ttl time.Duration) (rec Record, claimed bool, err error)

	// Complete stores result for the in-progress record owned by token and
	// keeps it for ttl. Completing again with the same token after success
	// returns nil and changes nothing (safe to re-send). Any other token, a
	// missing record, or a record taken over gives ErrLeaseLost.
	Complete(ctx context.Context, key Key, token string, result []byte, ttl time.Duration) error

	// Release forgets the in-progress record owned by token, so that the next
	// Reserve claims the key (the work failed and may run again). A missing
	// record is not an error (safe to re-send); another token or a completed
	// record gives ErrLeaseLost and changes nothing.
	Release(ctx context.Context, key Key, token string) error

	// Renew extends the lease of the in-progress record owned by token to
	// lease from now, and keeps the record at least until that lease and
	// its grace (lease/4) end, however long the work has outlived the
	// retention. Another token, a missing or completed record gives
	// ErrLeaseLost.
	Renew(ctx context.Context, key Key, token string, lease time.Duration) error

	// Get returns the live record for key (Token ""), or ErrNotFound.
	Get(ctx context.Context, key Key) (Record, error)
}
