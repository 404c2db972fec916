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

// shardCount is how many independently locked shards hold a layer's
// records, each chosen by a byte of its key's digest (uniform: a digest is
// a cryptographic hash). With one lock, calls on every core queued behind
// each other; calls on different keys now meet only when their keys share
// a shard.
const shardCount = 16

// sweepEvery is how many Reserve calls on a shard pass between two sweeps
// of its expired records: the whole layer sweeps about once every
// shardCount*sweepEvery (1024) Reserve calls.
const sweepEvery = 64

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

	// shards hold the records, a key's in shards[digest[0]%shardCount].
	// Every call touches one key, so one shard: calls on keys of
	// different shards never wait for each other.
	shards [shardCount]shard
}

// shard is one part of a layer's records. Its entries live in chunks that
// never move and are found through index by their key's digest: a record
// costs no allocation of its own (its token and result aside), and the
// index holds no pointers, so that the garbage collector never reads it.
// Entries that records left are chained from free and taken again first; a
// sweep walks the entries in order from sweepAt.
type shard struct {
	// mu guards everything below. Get, which changes nothing unless it
	// finds its record expired, reads under mu.RLock, so that readers of
	// one shard (replays of one key) do not queue behind each other.
	mu      sync.RWMutex
	index   map[[idem.KeySize]byte]int
	chunks  []*[chunkSize]entry
	used    int // entries handed out at least once; chunks hold them all
	free    int // first unused entry below used, chained through next; -1 for none
	sweepAt int
	ops     int
	tokens  *rand.ChaCha8 // the owner tokens' randomness: see token

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// entry is one stored record, or an unused place for one (inUse false). It
// is only read or written with its shard's mu held. Its times are the
// layer's (see Layer.clock).
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
	l := &Layer{now: time.Now, mono: true}
	if c.now != nil {
		l.now, l.mono = c.now, false
	}
	for i := range l.shards {
		s := &l.shards[i]
		s.index, s.free = make(map[[idem.KeySize]byte]int), -1
		var seed [32]byte
		_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails (Go 1.24+).
		s.tokens = rand.NewChaCha8(seed)
	}
	l.base = l.now()
	return l, nil
}

// shard returns the shard of key.
func (l *Layer) shard(key idem.Key) *shard {
	d := key.Digest()
	return &l.shards[int(d[0])%shardCount]
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
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.RLock()
		n += len(s.index)
		s.mu.RUnlock()
	}
	return n
}

// entry returns entry i. s.mu must be held.
func (s *shard) entry(i int) *entry { return &s.chunks[i>>chunkBits][i&(chunkSize-1)] }

// add stores a new entry for the key whose digest is d and returns it, to
// be filled in. s.mu must be held.
func (s *shard) add(d [idem.KeySize]byte) *entry {
	i := s.free
	if i >= 0 {
		s.free = s.entry(i).next
	} else {
		if s.used == len(s.chunks)*chunkSize {
			s.chunks = append(s.chunks, new([chunkSize]entry))
		}
		i = s.used
		s.used++
	}
	s.index[d] = i
	e := s.entry(i)
	e.digest, e.inUse = d, true
	return e
}

// remove forgets entry i, which is in use. s.mu must be held.
func (s *shard) remove(i int) {
	e := s.entry(i)
	delete(s.index, e.digest)
	*e = entry{next: s.free} // and lets go of its strings and result
	s.free = i
}

func check(ctx context.Context, key idem.Key) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	return ctx.Err()
}

// find returns the entry for key, expired or not; nil when there is none.
// s.mu must be held, for reading at least.
func (s *shard) find(key idem.Key) *entry {
	i, ok := s.index[key.Digest()]
	if !ok {
		return nil
	}
	return s.entry(i)
}

// live returns the unexpired entry for key, deleting an expired one. s.mu
// must be held.
func (s *shard) live(key idem.Key, now int64) *entry {
	i, ok := s.index[key.Digest()]
	if !ok {
		return nil
	}
	if e := s.entry(i); now < e.expiresAt {
		return e
	}
	s.remove(i)
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
func (s *shard) token() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], s.tokens.Uint64())
	binary.LittleEndian.PutUint64(b[8:], s.tokens.Uint64())
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
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := l.clock()
	sh.ops++
	if sh.ops%sweepEvery == 0 {
		sh.sweep(now)
	}
	e := sh.live(key, now)
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
		e = sh.add(key.Digest())
	}
	e.fingerprint, e.state, e.grace, e.result = fingerprint, idem.StateInProgress, false, nil
	e.token = sh.token()
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
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := l.clock()
	e := sh.live(key, now)
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
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.live(key, l.clock())
	if e == nil {
		return nil
	}
	if e.token != token || e.state != idem.StateInProgress {
		return idem.ErrLeaseLost
	}
	sh.remove(sh.index[key.Digest()])
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
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := l.clock()
	e := sh.live(key, now)
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
	sh := l.shard(key)
	sh.mu.RLock()
	now := l.clock()
	e := sh.find(key)
	if e != nil && now < e.expiresAt {
		r := e.record(l, key, now)
		sh.mu.RUnlock()
		return r, nil
	}
	sh.mu.RUnlock()
	if e == nil {
		return idem.Record{}, idem.ErrNotFound
	}
	// Expired: delete it, unless another call replaced it meanwhile.
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = l.clock()
	if e = sh.live(key, now); e == nil {
		return idem.Record{}, idem.ErrNotFound
	}
	return e.record(l, key, now), nil
}

// sweepVisit bounds how many entries one sweep looks at, so that a sweep
// costs the same however many records are stored. Each sweep goes on where
// the last one stopped, so that successive sweeps cover every entry in turn.
const sweepVisit = 4 * sweepEvery

// sweep deletes the expired records among the next sweepVisit entries of
// the shard. s.mu must be held.
func (s *shard) sweep(now int64) {
	for range min(sweepVisit, s.used) {
		if s.sweepAt >= s.used {
			s.sweepAt = 0
		}
		if e := s.entry(s.sweepAt); e.inUse && now >= e.expiresAt {
			s.remove(s.sweepAt)
		}
		s.sweepAt++
	}
}
