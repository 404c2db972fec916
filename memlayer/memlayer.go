package memlayer

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/option"
)

var _ idem.Layer = (*Layer)(nil)

// sweepEvery is how many Reserve calls pass between two sweeps of expired
// records.
const sweepEvery = 1024

// A chunk of the layer's storage holds chunkSize entries.
const (
	chunkBits = 8
	chunkSize = 1 << chunkBits
)

// Option configures a Layer. An option given nonsense makes New fail.
//
// The layer refuses a result over idem.MaxResult and a fingerprint over
// idem.MaxFingerprint, as every layer does: they are no option of its own.
type Option func(*config) error

type config struct {
	now func() time.Time // nil: time.Now, read on the monotonic clock alone
}

// WithClock sets the layer's own clock, which decides its leases and
// expiries as a database's clock decides them in sqllayer and Redis's in
// redislayer. Default: time.Now, of which the layer reads the monotonic
// clock alone, so that no step of the wall clock moves a lease or an
// expiry. A test passes a fake clock and advances it instead of sleeping.
// now must be safe for concurrent use; nil is an error.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("WithClock: give a clock function, time.Now for the real one (got nil)")
		}
		c.now = now
		return nil
	}
}

// Layer is an in-memory idem.Layer, safe for concurrent use. The zero value
// is not usable; call New.
type Layer struct {
	now  func() time.Time
	mono bool      // now is time.Now: read its monotonic clock alone
	base time.Time // now's reading when the layer was made

	// The records. Their entries live in chunks that never move and are
	// found through index by their key's digest: a record costs no
	// allocation of its own (its token and result aside), and the index
	// holds no pointers, so that the garbage collector never reads it.
	// Entries that records left are chained from free and taken again
	// first; a sweep walks the entries in order from sweepAt.
	mu      sync.Mutex // guards everything below
	index   map[[idem.KeySize]byte]int
	chunks  []*[chunkSize]entry
	used    int // entries handed out at least once; chunks hold them all
	free    int // first unused entry below used, chained through next; -1 for none
	sweepAt int
	ops     int
	tokens  *rand.ChaCha8 // the owner tokens' randomness: see token
}

// entry is one stored record, or an unused place for one (inUse false). It
// is only read or written with Layer.mu held. Its times are the layer's
// (see Layer.clock).
type entry struct {
	digest      [idem.KeySize]byte // its key's
	inUse       bool
	next        int // unused: the next unused entry, or -1
	fingerprint string
	token       string
	result      []byte
	leaseUntil  int64 // in progress: when the lease lapses
	expiresAt   int64
	state       idem.State
	// grace is set when a Reserve found the lease lapsed and extended it by
	// a grace instead of taking it over; the next lapse is a takeover. A
	// renewal clears it.
	grace bool
}

// New returns an empty Layer configured by opts over the defaults. Options
// given nonsense make it fail with an error that names each of them and
// wraps idem.ErrConfig.
func New(opts ...Option) (*Layer, error) {
	var c config
	if err := option.Refuse("memlayer", option.Apply(&c, opts)...); err != nil {
		return nil, err
	}
	l := &Layer{now: time.Now, mono: true, index: make(map[[idem.KeySize]byte]int), free: -1}
	if c.now != nil {
		l.now, l.mono = c.now, false
	}
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails (Go 1.24+).
	l.tokens = rand.NewChaCha8(seed)
	l.base = l.now()
	return l, nil
}

// clock reads the layer's clock: nanoseconds since base. With the default
// clock that is one reading of the monotonic clock, where time.Now takes
// two (wall and monotonic).
func (l *Layer) clock() int64 {
	if l.mono {
		return int64(time.Since(l.base))
	}
	return int64(l.now().Sub(l.base))
}

// at returns the layer's time t as a time.Time.
func (l *Layer) at(t int64) time.Time { return l.base.Add(time.Duration(t)) }

// later returns t + d (d >= 0) on the layer's clock, at most the clock's
// end: a time past it never comes.
func later(t int64, d time.Duration) int64 {
	if t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}

// grace is the grace a lapsed lease of lease gets from the first Reserve
// that finds it lapsed (one passing the same lease): a quarter of it.
func grace(lease time.Duration) time.Duration { return lease / 4 }

// claimLife returns how long a claim with lease and ttl is kept from now:
// the ttl, or the lease and its grace if they end later, so that the grace
// is there to grant however the retention compares with the lease.
func claimLife(lease, ttl time.Duration) time.Duration {
	if lease > math.MaxInt64-grace(lease) {
		return math.MaxInt64
	}
	return max(ttl, lease+grace(lease))
}

// Len returns how many records are stored, expired ones not yet swept
// included.
func (l *Layer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.index)
}

// entry returns entry i. l.mu must be held.
func (l *Layer) entry(i int) *entry { return &l.chunks[i>>chunkBits][i&(chunkSize-1)] }

// add stores a new entry for the key whose digest is d and returns it, to
// be filled in. l.mu must be held.
func (l *Layer) add(d [idem.KeySize]byte) *entry {
	i := l.free
	if i >= 0 {
		l.free = l.entry(i).next
	} else {
		if l.used == len(l.chunks)*chunkSize {
			l.chunks = append(l.chunks, new([chunkSize]entry))
		}
		i = l.used
		l.used++
	}
	l.index[d] = i
	e := l.entry(i)
	e.digest, e.inUse = d, true
	return e
}

// remove forgets entry i, which is in use. l.mu must be held.
func (l *Layer) remove(i int) {
	e := l.entry(i)
	delete(l.index, e.digest)
	*e = entry{next: l.free} // and lets go of its strings and result
	l.free = i
}

func check(ctx context.Context, key idem.Key) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	return ctx.Err()
}

// live returns the unexpired entry for key, deleting an expired one. l.mu
// must be held.
func (l *Layer) live(key idem.Key, now int64) *entry {
	i, ok := l.index[key.Digest()]
	if !ok {
		return nil
	}
	if e := l.entry(i); now < e.expiresAt {
		return e
	}
	l.remove(i)
	return nil
}

// record returns what a reader of l sees at now: no token.
func (e *entry) record(l *Layer, key idem.Key, now int64) idem.Record {
	r := idem.Record{
		Key:         key,
		Fingerprint: e.fingerprint,
		State:       e.state,
		ExpiresAt:   l.at(e.expiresAt),
		ExpiresIn:   time.Duration(e.expiresAt - now),
	}
	if r.ExpiresIn < 0 { // past the clock's range: e is live, so now < expiresAt
		r.ExpiresIn = math.MaxInt64
	}
	if e.state == idem.StateInProgress {
		r.LeaseUntil = l.at(e.leaseUntil)
	}
	if e.result != nil {
		r.Result = append([]byte{}, e.result...)
	}
	return r
}

// token returns a fresh random owner token, of idem.NewToken's form: 128
// bits, base64url without padding. The bits come from a ChaCha8 stream
// seeded from crypto/rand when the layer is made: a cryptographic generator,
// as crypto/rand is, without a call into the kernel for every token. l.mu
// must be held.
func (l *Layer) token() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], l.tokens.Uint64())
	binary.LittleEndian.PutUint64(b[8:], l.tokens.Uint64())
	var t [idem.TokenSize]byte
	base64.RawURLEncoding.Encode(t[:], b[:])
	return string(t[:])
}

// Reserve implements idem.Layer. A claim's record is kept for ttl, or
// until its lease and the grace after it (lease/4) end if that is later.
func (l *Layer) Reserve(ctx context.Context, key idem.Key, fingerprint string, lease, ttl time.Duration) (idem.Record, bool, error) {
	if err := check(ctx, key); err != nil {
		return idem.Record{}, false, err
	}
	if lease <= 0 || ttl <= 0 {
		return idem.Record{}, false, fmt.Errorf("memlayer: lease and ttl must be positive (lease %v, ttl %v)", lease, ttl)
	}
	if len(fingerprint) > idem.MaxFingerprint {
		return idem.Record{}, false, fmt.Errorf("memlayer: fingerprint of %d bytes, limit idem.MaxFingerprint (%d)", len(fingerprint), idem.MaxFingerprint)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	l.ops++
	if l.ops%sweepEvery == 0 {
		l.sweep(now)
	}
	e := l.live(key, now)
	if e != nil {
		if e.state != idem.StateInProgress || e.fingerprint != fingerprint || now < e.leaseUntil {
			return e.record(l, key, now), false, nil
		}
		if !e.grace {
			// The lease lapsed: the owner gets a grace of lease/4 before
			// anyone takes over, so that a completion it is still retrying
			// lands first.
			e.grace = true
			e.leaseUntil = later(now, grace(lease))
			e.expiresAt = max(e.expiresAt, e.leaseUntil)
			return e.record(l, key, now), false, nil
		}
	}
	// New claim, or takeover of a lease whose grace lapsed too.
	tookOver := e != nil
	if !tookOver {
		e = l.add(key.Digest())
	}
	e.fingerprint, e.state, e.grace, e.result = fingerprint, idem.StateInProgress, false, nil
	e.token = l.token()
	e.leaseUntil = later(now, lease)
	e.expiresAt = later(now, claimLife(lease, ttl))
	r := e.record(l, key, now)
	r.Token, r.TookOver = e.token, tookOver
	return r, true, nil
}

// Complete implements idem.Layer.
func (l *Layer) Complete(ctx context.Context, key idem.Key, token string, result []byte, ttl time.Duration) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	if len(result) > idem.MaxResult {
		return fmt.Errorf("%w: %d bytes, limit idem.MaxResult (%d)", idem.ErrTooLarge, len(result), idem.MaxResult)
	}
	if ttl <= 0 {
		return fmt.Errorf("memlayer: ttl must be positive (%v)", ttl)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	e := l.live(key, now)
	if e == nil || e.token != token || token == "" {
		return idem.ErrLeaseLost
	}
	if e.state == idem.StateCompleted {
		return nil // a re-sent Complete by the same owner
	}
	e.state = idem.StateCompleted
	e.result = append(make([]byte, 0, len(result)), result...)
	e.leaseUntil = 0
	e.expiresAt = later(now, ttl)
	return nil
}

// Release implements idem.Layer.
func (l *Layer) Release(ctx context.Context, key idem.Key, token string) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.live(key, l.clock())
	if e == nil {
		return nil
	}
	if e.token != token || e.state != idem.StateInProgress {
		return idem.ErrLeaseLost
	}
	l.remove(l.index[key.Digest()])
	return nil
}

// Renew implements idem.Layer. The record is kept at least until the new
// lease and its grace (lease/4) end.
func (l *Layer) Renew(ctx context.Context, key idem.Key, token string, lease time.Duration) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("memlayer: lease must be positive (%v)", lease)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	e := l.live(key, now)
	if e == nil || e.token != token || e.state != idem.StateInProgress {
		return idem.ErrLeaseLost
	}
	e.leaseUntil = later(now, lease)
	e.grace = false
	// The record outlives the renewed lease and its grace, however long
	// the work has run past the retention.
	e.expiresAt = max(e.expiresAt, later(e.leaseUntil, grace(lease)))
	return nil
}

// Get implements idem.Layer.
func (l *Layer) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if err := check(ctx, key); err != nil {
		return idem.Record{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	e := l.live(key, now)
	if e == nil {
		return idem.Record{}, idem.ErrNotFound
	}
	return e.record(l, key, now), nil
}

// sweepVisit bounds how many entries one sweep looks at, so that a sweep
// costs the same however many records are stored. Each sweep goes on where
// the last one stopped, so that successive sweeps cover every entry in turn.
const sweepVisit = 4 * sweepEvery

// sweep deletes the expired records among the next sweepVisit entries. l.mu
// must be held.
func (l *Layer) sweep(now int64) {
	for range min(sweepVisit, l.used) {
		if l.sweepAt >= l.used {
			l.sweepAt = 0
		}
		if e := l.entry(l.sweepAt); e.inUse && now >= e.expiresAt {
			l.remove(l.sweepAt)
		}
		l.sweepAt++
	}
}
