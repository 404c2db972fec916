package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

const (
	fpA = "f1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	fpB = "f1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	// long is a lease or retention no test outlives.
	long = time.Hour
)

// claim reserves a fresh key and fails the test unless it was claimed.
func (s *suite) claim(t *testing.T, l idem.Layer, lease time.Duration) (idem.Key, idem.Record) {
	t.Helper()
	k := s.key()
	rec, claimed, err := l.Reserve(ctx(t), k, fpA, lease, long)
	if err != nil || !claimed {
		t.Fatalf("Reserve on a new key: claimed=%v err=%v, want a claim", claimed, err)
	}
	return k, rec
}

func mustGet(t *testing.T, l idem.Layer, k idem.Key) idem.Record {
	t.Helper()
	rec, err := l.Get(ctx(t), k)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return rec
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func wantNoErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func (s *suite) claimEmptyKey(t *testing.T) {
	l := s.h.New(t)
	k, rec := s.claim(t, l, long)
	if rec.Token == "" {
		t.Fatal("claim returned no token")
	}
	if rec.State != idem.StateInProgress || rec.Fingerprint != fpA || !rec.Key.Equal(k) {
		t.Fatalf("claimed record = %+v, want in progress with fingerprint %q and the key", rec, fpA)
	}
	if rec.LeaseUntil.IsZero() || rec.ExpiresAt.Before(rec.LeaseUntil) {
		t.Fatalf("claimed record lease %v expiry %v: want a lease that ends no later than the record", rec.LeaseUntil, rec.ExpiresAt)
	}
	if rec.Result != nil {
		t.Fatalf("in-progress record has result %q", rec.Result)
	}
}

func (s *suite) secondReserveSeesOwner(t *testing.T) {
	l := s.h.New(t)
	k, first := s.claim(t, l, long)
	for i, other := range []idem.Layer{l, s.h.New(t)} {
		rec, claimed, err := other.Reserve(ctx(t), k, fpA, long, long)
		wantNoErr(t, "second Reserve", err)
		if claimed {
			t.Fatalf("instance %d: second Reserve claimed a key that is held", i)
		}
		if rec.State != idem.StateInProgress || rec.Fingerprint != fpA {
			t.Fatalf("instance %d: second Reserve saw %+v, want the owner's in-progress record", i, rec)
		}
		if rec.Token != "" {
			t.Fatalf("instance %d: a non-owner was shown the owner's token", i)
		}
	}
	got := mustGet(t, l, k)
	if got.Token != "" || got.State != idem.StateInProgress {
		t.Fatalf("Get = %+v, want in progress without token", got)
	}
	_ = first
}

func (s *suite) otherFingerprintNotClaimed(t *testing.T) {
	l := s.h.New(t)
	k, _ := s.claim(t, l, long)
	rec, claimed, err := l.Reserve(ctx(t), k, fpB, long, long)
	wantNoErr(t, "Reserve with another fingerprint", err)
	if claimed || rec.Fingerprint != fpA {
		t.Fatalf("Reserve with another fingerprint: claimed=%v fingerprint=%q, want no claim and the first fingerprint", claimed, rec.Fingerprint)
	}
	// Completed records keep their fingerprint too.
	k2, r2 := s.claim(t, l, long)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k2, r2.Token, []byte("ok"), long))
	rec, claimed, err = l.Reserve(ctx(t), k2, fpB, long, long)
	wantNoErr(t, "Reserve completed key with another fingerprint", err)
	if claimed || rec.Fingerprint != fpA || rec.State != idem.StateCompleted {
		t.Fatalf("Reserve completed key with another fingerprint: claimed=%v rec=%+v", claimed, rec)
	}
}

func (s *suite) completeByOwner(t *testing.T) {
	l := s.h.New(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, []byte("charged 42"), long))
	for i, other := range []idem.Layer{l, s.h.New(t)} {
		got, claimed, err := other.Reserve(ctx(t), k, fpA, long, long)
		wantNoErr(t, "Reserve after Complete", err)
		if claimed || got.State != idem.StateCompleted || string(got.Result) != "charged 42" || got.Token != "" {
			t.Fatalf("instance %d: Reserve after Complete: claimed=%v rec=%+v, want the completed result", i, claimed, got)
		}
		g := mustGet(t, other, k)
		if g.State != idem.StateCompleted || string(g.Result) != "charged 42" || g.Fingerprint != fpA {
			t.Fatalf("instance %d: Get after Complete = %+v", i, g)
		}
	}
}

func (s *suite) completeResent(t *testing.T) {
	l := s.h.New(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, []byte("first"), long))
	wantNoErr(t, "Complete re-sent by the owner", l.Complete(ctx(t), k, rec.Token, []byte("first"), long))
	if g := mustGet(t, l, k); string(g.Result) != "first" {
		t.Fatalf("after a re-sent Complete the result is %q, want %q", g.Result, "first")
	}
}

func (s *suite) wrongToken(t *testing.T) {
	l := s.h.New(t)
	k, rec := s.claim(t, l, long)
	before := mustGet(t, l, k)
	for _, tok := range []string{"", "not-the-token", rec.Token + "x"} {
		wantErr(t, "Complete with token "+tok, l.Complete(ctx(t), k, tok, []byte("evil"), long), idem.ErrLeaseLost)
		wantErr(t, "Release with token "+tok, l.Release(ctx(t), k, tok), idem.ErrLeaseLost)
		wantErr(t, "Renew with token "+tok, l.Renew(ctx(t), k, tok, 2*long), idem.ErrLeaseLost)
	}
	after := mustGet(t, l, k)
	if after.State != idem.StateInProgress || after.Result != nil || !after.LeaseUntil.Equal(before.LeaseUntil) || !after.ExpiresAt.Equal(before.ExpiresAt) {
		t.Fatalf("record changed by wrong tokens: before %+v, after %+v", before, after)
	}
	// The owner still owns it.
	wantNoErr(t, "owner Complete", l.Complete(ctx(t), k, rec.Token, []byte("mine"), long))
	// Complete on a missing key is a lost lease, not success.
	wantErr(t, "Complete on a missing key", l.Complete(ctx(t), s.key(), rec.Token, []byte("x"), long), idem.ErrLeaseLost)
	wantErr(t, "Renew on a missing key", l.Renew(ctx(t), s.key(), rec.Token, long), idem.ErrLeaseLost)
}

func (s *suite) ownerCannotChangeCompleted(t *testing.T) {
	l := s.h.New(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, []byte("done"), long))
	wantErr(t, "Release of a completed record", l.Release(ctx(t), k, rec.Token), idem.ErrLeaseLost)
	wantErr(t, "Renew of a completed record", l.Renew(ctx(t), k, rec.Token, long), idem.ErrLeaseLost)
	wantErr(t, "Complete by another token", l.Complete(ctx(t), k, "other", []byte("evil"), long), idem.ErrLeaseLost)
	if g := mustGet(t, l, k); g.State != idem.StateCompleted || string(g.Result) != "done" {
		t.Fatalf("completed record changed: %+v", g)
	}
}

func (s *suite) releaseLetsNextClaim(t *testing.T) {
	l := s.h.New(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Release", l.Release(ctx(t), k, rec.Token))
	_, err := l.Get(ctx(t), k)
	wantErr(t, "Get after Release", err, idem.ErrNotFound)
	next, claimed, err := s.h.New(t).Reserve(ctx(t), k, fpB, long, long)
	wantNoErr(t, "Reserve after Release", err)
	if !claimed || next.Token == "" || next.Token == rec.Token || next.Fingerprint != fpB {
		t.Fatalf("Reserve after Release: claimed=%v rec=%+v, want a new claim with a new token", claimed, next)
	}
	wantErr(t, "old owner Complete", l.Complete(ctx(t), k, rec.Token, []byte("late"), long), idem.ErrLeaseLost)
	wantNoErr(t, "Release re-sent", l.Release(ctx(t), k, next.Token))
	wantNoErr(t, "Release re-sent twice", l.Release(ctx(t), k, next.Token))
}

func (s *suite) releaseMissing(t *testing.T) {
	l := s.h.New(t)
	wantNoErr(t, "Release of a key never claimed", l.Release(ctx(t), s.key(), "any"))
}

func (s *suite) renewExtends(t *testing.T) {
	tick := s.h.Tick
	l := s.h.New(t)
	k, rec := s.claim(t, l, tick)
	before := mustGet(t, l, k)
	wantNoErr(t, "Renew", l.Renew(ctx(t), k, rec.Token, 6*tick))
	after := mustGet(t, l, k)
	if !after.LeaseUntil.After(before.LeaseUntil) {
		t.Fatalf("Renew did not move the lease: before %v after %v", before.LeaseUntil, after.LeaseUntil)
	}
	s.wait(t, 2*tick) // past the first lease, well inside the renewed one
	got, claimed, err := s.h.New(t).Reserve(ctx(t), k, fpA, tick, long)
	wantNoErr(t, "Reserve during renewed lease", err)
	if claimed || got.State != idem.StateInProgress {
		t.Fatalf("a renewed lease was taken over: claimed=%v rec=%+v", claimed, got)
	}
	wantNoErr(t, "owner Complete after Renew", l.Complete(ctx(t), k, rec.Token, []byte("ok"), long))
}

func (s *suite) resultsByteForByte(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	for _, tc := range []struct {
		name   string
		result []byte
	}{
		{"binary", all},
		{"empty", []byte{}},
		{"utf8", []byte(`{"status":201,"body":"€ ok \u0000"}`)},
		{"1MiB", big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := s.h.New(t)
			k, rec := s.claim(t, l, long)
			wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, tc.result, long))
			got, claimed, err := s.h.New(t).Reserve(ctx(t), k, fpA, long, long)
			wantNoErr(t, "Reserve", err)
			if claimed || got.State != idem.StateCompleted || !bytes.Equal(got.Result, tc.result) {
				t.Fatalf("Reserve returned %d bytes (claimed=%v, state %v), want the %d stored bytes exactly", len(got.Result), claimed, got.State, len(tc.result))
			}
			g := mustGet(t, l, k)
			if !bytes.Equal(g.Result, tc.result) {
				t.Fatalf("Get returned %d bytes, want the %d stored bytes exactly", len(g.Result), len(tc.result))
			}
		})
	}
}

func (s *suite) retentionExpiry(t *testing.T) {
	tick := s.h.Tick
	l := s.h.New(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, []byte("kept briefly"), tick))
	s.wait(t, 2*tick)
	_, err := l.Get(ctx(t), k)
	wantErr(t, "Get after retention", err, idem.ErrNotFound)
	next, claimed, err := l.Reserve(ctx(t), k, fpB, long, long)
	wantNoErr(t, "Reserve after retention", err)
	if !claimed || next.Fingerprint != fpB {
		t.Fatalf("Reserve after retention: claimed=%v rec=%+v, want a fresh claim", claimed, next)
	}
}

func (s *suite) getMissing(t *testing.T) {
	_, err := s.h.New(t).Get(ctx(t), s.key())
	wantErr(t, "Get of a key never claimed", err, idem.ErrNotFound)
}

func (s *suite) zeroKey(t *testing.T) {
	l := s.h.New(t)
	var zero idem.Key
	_, _, err := l.Reserve(ctx(t), zero, fpA, long, long)
	wantErr(t, "Reserve with the zero key", err, idem.ErrInvalidKey)
	wantErr(t, "Complete with the zero key", l.Complete(ctx(t), zero, "t", nil, long), idem.ErrInvalidKey)
	wantErr(t, "Release with the zero key", l.Release(ctx(t), zero, "t"), idem.ErrInvalidKey)
	wantErr(t, "Renew with the zero key", l.Renew(ctx(t), zero, "t", long), idem.ErrInvalidKey)
	_, err = l.Get(ctx(t), zero)
	wantErr(t, "Get with the zero key", err, idem.ErrInvalidKey)
}

func (s *suite) cancelledContext(t *testing.T) {
	l := s.h.New(t)
	c, cancel := context.WithCancel(t.Context())
	cancel()
	k := s.key()
	if _, claimed, err := l.Reserve(c, k, fpA, long, long); err == nil || claimed {
		t.Fatalf("Reserve with a cancelled context: claimed=%v err=%v, want an error", claimed, err)
	}
	// Whatever the store did, the key is not held by a claim nobody owns
	// beyond its lease: a live caller can still get an answer.
	if _, _, err := l.Reserve(ctx(t), k, fpA, long, long); err != nil {
		t.Fatalf("Reserve after a cancelled call: %v", err)
	}
}

func (s *suite) keysIndependent(t *testing.T) {
	l := s.h.New(t)
	k1, r1 := s.claim(t, l, long)
	k2, r2 := s.claim(t, l, long)
	wantNoErr(t, "Complete k1", l.Complete(ctx(t), k1, r1.Token, []byte("one"), long))
	wantErr(t, "k1's token on k2", l.Complete(ctx(t), k2, r1.Token, []byte("x"), long), idem.ErrLeaseLost)
	if g := mustGet(t, l, k2); g.State != idem.StateInProgress {
		t.Fatalf("k2 changed with k1: %+v", g)
	}
	wantNoErr(t, "Release k2", l.Release(ctx(t), k2, r2.Token))
	if g := mustGet(t, l, k1); string(g.Result) != "one" {
		t.Fatalf("k1 changed with k2: %+v", g)
	}
	// Same client key under two scopes: two keys.
	a, b := idem.NewKey("tenant-a", "same"), idem.NewKey("tenant-b", "same")
	if a.Equal(b) {
		t.Fatal("two scopes gave one key")
	}
}
