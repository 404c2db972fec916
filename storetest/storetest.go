package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// DefaultTick is the lease used in expiry tests on a real clock.
const DefaultTick = 250 * time.Millisecond

// Harness describes one backend under test.
type Harness struct {
	// New returns a Layer over the backend. Each call returns another
	// instance (its own client or pool where the backend has them) over the
	// same shared data, as separate service instances would have; the
	// concurrency tests spread goroutines over several. Required. New
	// registers its own cleanup with t.Cleanup.
	New func(t *testing.T) idem.Layer

	// Advance moves the backend's clock forward by d. Nil means the backend
	// runs on a real clock and the suite sleeps instead.
	Advance func(t *testing.T, d time.Duration)

	// Tick is the lease the expiry tests use; they wait 2×Tick for a lease to
	// lapse, and the grace cases grant graces of 2×Tick (10×Tick for the
	// concurrent one) and wait them out; the retention cases hold leases
	// of up to 24×Tick. Default DefaultTick. A backend
	// whose clock has coarse resolution or whose calls are slow asks for
	// more.
	Tick time.Duration

	// Sweep deletes what the backend's own sweep of expired records would
	// delete now (the SQL layer's DeleteExpired, the janitor's work; the
	// memory layer's lazy sweep). The retention cases run it between their
	// calls, to check that it never deletes a claim its owner may still
	// complete. Nil when the backend has no sweep of its own (Redis expires
	// keys itself).
	Sweep func(t *testing.T)

	// Contenders scales the concurrency tests: goroutines on one key (default
	// 64) and keys in the many-keys test (default 500, each with 8
	// contenders).
	Contenders, Keys int
}

// suite is the state shared by the subtests of one Run.
type suite struct {
	h     Harness
	scope string
	// advanced is how far Harness.Advance has moved the backend's clock.
	advanced atomic.Int64
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest: Harness.New is required")
	}
	if h.Tick <= 0 {
		h.Tick = DefaultTick
	}
	if h.Contenders <= 0 {
		h.Contenders = 64
	}
	if h.Keys <= 0 {
		h.Keys = 500
	}
	s := &suite{h: h, scope: "storetest-" + randomHex(8)}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"ClaimEmptyKey", s.claimEmptyKey},
		{"SecondReserveSeesOwner", s.secondReserveSeesOwner},
		{"OtherFingerprintNotClaimed", s.otherFingerprintNotClaimed},
		{"CompleteByOwner", s.completeByOwner},
		{"CompleteResentByOwner", s.completeResent},
		{"WrongTokenChangesNothing", s.wrongToken},
		{"OwnerCannotChangeCompleted", s.ownerCannotChangeCompleted},
		{"ReleaseLetsNextClaim", s.releaseLetsNextClaim},
		{"ReleaseMissingIsNoop", s.releaseMissing},
		{"RenewExtendsLease", s.renewExtends},
		{"ExpiredLeaseTakenOver", s.expiredLeaseTakenOver},
		{"GraceKeepsTheOwner", s.graceKeepsOwner},
		{"GraceOncePerLapse", s.graceOncePerLapse},
		{"GraceConcurrentReserves", s.graceConcurrent},
		{"GraceOutlivesTheExpiry", s.graceOutlivesExpiry},
		{"GraceOutlivesTheRetention", s.renewedPastRetention},
		{"SweepKeepsLapsedClaim", s.sweepKeepsLapsedClaim},
		{"NotLiveAtItsExpiry", s.notLiveAtExpiry},
		{"ExpiredLeaseOtherFingerprintKept", s.expiredLeaseOtherFingerprint},
		{"ExpiresIn", s.expiresIn},
		{"ExpiresInNotPastTheRecord", s.expiresInBound},
		{"ResultsByteForByte", s.resultsByteForByte},
		{"RetentionExpiry", s.retentionExpiry},
		{"GetMissing", s.getMissing},
		{"ZeroKeyRejected", s.zeroKey},
		{"CancelledContext", s.cancelledContext},
		{"KeysAreIndependent", s.keysIndependent},
		{"OneKeyManyContenders", s.oneKeyManyContenders},
		{"ManyKeysEightContenders", s.manyKeys},
	} {
		t.Run(tc.name, tc.fn)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// key returns a fresh key no other test uses.
func (s *suite) key() idem.Key { return idem.NewKey(s.scope, randomHex(12)) }

// wait lets d pass on the backend's clock.
func (s *suite) wait(t *testing.T, d time.Duration) {
	t.Helper()
	if s.h.Advance != nil {
		s.advanced.Add(int64(d))
		s.h.Advance(t, d)
		return
	}
	time.Sleep(d)
}

// stamp is a moment on the backend's clock, as the suite can know it: the
// application's clock, and how far Advance had moved the backend's.
type stamp struct {
	real     time.Time
	advanced time.Duration
}

// now returns the current stamp.
func (s *suite) now() stamp {
	return stamp{real: time.Now(), advanced: time.Duration(s.advanced.Load())}
}

// since returns how much time the backend has at least counted since a
// stamp taken after a call returned, up to now: what Advance added on an
// injected clock, the application's clock otherwise.
func (s *suite) since(st stamp) time.Duration {
	if s.h.Advance != nil {
		return time.Duration(s.advanced.Load()) - st.advanced
	}
	return time.Since(st.real)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
