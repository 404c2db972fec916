package flight

import (
	"context"
	"sync"
	"unsafe"
)

// Shards is how many independently locked shards a Table has: keys spread
// over them by their hash, so that unrelated keys do not queue on one lock.
const Shards = 16

// Call is one execution in flight, as a Table keeps it. Embed it in the
// execution's own type with Value pointing back to that, so that joining
// costs no allocation of its own. Key and Hash are set before Join and not
// changed while the call is in flight; the rest belongs to the table.
type Call[K comparable, V any] struct {
	// Key names the execution: calls with equal keys share one.
	Key K
	// Hash is Key's hash, which must be uniform (a digest's bytes serve):
	// it chooses the call's shard and its slot there as it is.
	Hash uint64
	// Value is the caller's: the execution the call stands for.
	Value V

	next   *Call[K, V]             // the next call in the same slot; guarded by the shard's mu
	done   chan struct{}           // closed by Leave; made by Watch, or under the shard's mu for the first caller that joins
	joined bool                    // a caller joined; guarded by the shard's mu
	cancel context.CancelCauseFunc // cancels the call's work (SetCancel); guarded by the shard's mu
}

// Watch makes c's Done channel before c joins the table, for a leader that
// waits for its own execution to end on another goroutine. Call it before
// Join, never after.
func (c *Call[K, V]) Watch() {
	if c.done == nil {
		c.done = make(chan struct{})
	}
}

// Done returns the channel Leave closes when c ends, for a caller that
// joined c (it always has one) or for a leader that called Watch. A leader
// that did not must not call it: a caller that joins makes the channel,
// under the table's lock.
func (c *Call[K, V]) Done() <-chan struct{} { return c.done }

// Table is the set of calls in flight, keyed by K. Its zero value is an
// empty table. It is safe for concurrent use; it must not be copied.
type Table[K comparable, V any] struct {
	shards [Shards]shard[K, V]
}

// lineSize is the span of memory two cores must not both write to for
// their writes to stay independent: 128 bytes. A cache line is 64 bytes on
// most x86 and many ARM processors and 128 bytes on Apple's and some
// others, and Intel's adjacent-line prefetcher fetches lines in 128-byte
// aligned pairs, so that two locks 64 bytes apart still pass one pair of
// lines between cores. sync.Pool pads its per-processor parts to 128 bytes
// for the same reason.
const lineSize = 128

// shardHead is the size of a shard's fields without its padding (a mutex,
// then a map, which needs no alignment padding after the mutex): it
// decides the padding.
const shardHead = unsafe.Sizeof(sync.Mutex{}) + unsafe.Sizeof(map[uint64]unsafe.Pointer(nil))

// shard is one independently locked part of a Table. calls is indexed by
// the calls' hashes; the calls whose hashes are equal (the same key, or
// another key that shares them) are chained through next.
//
// A shard's size is a multiple of lineSize, so that in the Table's array
// the fields of neighbouring shards, which are written under their locks,
// are lineSize bytes apart: never on one cache line nor on one pair of
// lines. (Go aligns a shard to 8 bytes only, so a shard may begin inside a
// line and share that line with its neighbour's padding, which nobody
// writes.)
type shard[K comparable, V any] struct {
	mu    sync.Mutex // guards calls, and the next, done, joined and cancel fields of every call in it
	calls map[uint64]*Call[K, V]

	_ [lineSize - shardHead%lineSize]byte // pad to whole lines
}

func (t *Table[K, V]) shard(hash uint64) *shard[K, V] { return &t.shards[hash%Shards] }

// find returns the first call in hash's slot, and the call in flight for
// key, or nil. s.mu must be held.
func (s *shard[K, V]) find(hash uint64, key K) (head, c *Call[K, V]) {
	head = s.calls[hash]
	for c = head; c != nil; c = c.next {
		if c.Key == key {
			return head, c
		}
	}
	return head, nil
}

// Join returns the call in flight for c.Key and false, or registers c and
// returns it and true: the caller then leads c and must end it with Leave.
// A caller that joins waits for the call it got on its Done channel.
func (t *Table[K, V]) Join(c *Call[K, V]) (*Call[K, V], bool) {
	s := t.shard(c.Hash)
	s.mu.Lock()
	defer s.mu.Unlock()
	head, cur := s.find(c.Hash, c.Key)
	if cur != nil {
		cur.joined = true
		if cur.done == nil {
			cur.done = make(chan struct{})
		}
		return cur, false
	}
	if s.calls == nil {
		s.calls = make(map[uint64]*Call[K, V])
	}
	c.next = head
	s.calls[c.Hash] = c
	return c, true
}

// SetCancel records the cancel of the work of c, which the caller leads,
// for CancelAll.
func (t *Table[K, V]) SetCancel(c *Call[K, V], cancel context.CancelCauseFunc) {
	s := t.shard(c.Hash)
	s.mu.Lock()
	c.cancel = cancel
	s.mu.Unlock()
}

// CancelAll cancels with cause the work of every call in flight whose
// cancel was set. A call that sets its cancel after CancelAll passed its
// shard is not cancelled: its leader checks for itself.
func (t *Table[K, V]) CancelAll(cause error) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, head := range s.calls {
			for c := head; c != nil; c = c.next {
				if c.cancel != nil {
					c.cancel(cause)
				}
			}
		}
		s.mu.Unlock()
	}
}

// Leave ends c, which the caller leads and whose outcome is set: later
// callers start a new execution, and those waiting on c.Done see it
// closed (the outcome written before Leave is theirs to read).
func (t *Table[K, V]) Leave(c *Call[K, V]) {
	s := t.shard(c.Hash)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch head := s.calls[c.Hash]; {
	case head == c && c.next == nil:
		delete(s.calls, c.Hash)
	case head == c:
		s.calls[c.Hash] = c.next
	default:
		prev := head
		for prev.next != c {
			prev = prev.next
		}
		prev.next = c.next
	}
	c.next = nil
	if c.done != nil {
		close(c.done)
	}
}

// Find returns the call in flight for key, whose hash is hash, or nil, and
// whether a caller joined it. It is for tests that must know when a caller
// has joined.
func (t *Table[K, V]) Find(hash uint64, key K) (c *Call[K, V], joined bool) {
	s := t.shard(hash)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c = s.find(hash, key)
	return c, c != nil && c.joined
}
