package schedule

import (
	"sync"
	"sync/atomic"
	"time"
)

// Item is one entry of a Queue. Embed it in the caller's own type with
// Value pointing back to that, so that queuing allocates nothing. Due is
// set before Add and not changed while the item is queued; the rest
// belongs to the queue.
type Item[T any] struct {
	// Due is when the item falls due.
	Due time.Time
	// Value is what the queue's start function gets when the item falls
	// due.
	Value T

	prev, next *Item[T] // neighbours in the queue; guarded by its mu
	queued     bool     // in the queue: not started, not removed; guarded by its mu
}

// Queue starts the items added to it when they fall due: it calls its
// start function with each one's Value, on the timer's goroutine, so start
// must not block (it starts a goroutine for work that does). An item is
// started at most once, and never after Remove took it out. It is safe for
// concurrent use.
type Queue[T any] struct {
	start func(T)

	mu         sync.Mutex  // guards the fields below and the links of every queued item
	head, tail *Item[T]    // the queued items, earliest due first
	timer      *time.Timer // made on first use; fires fire
	armed      time.Time   // when timer fires; zero when it is not armed
	stopped    bool        // Stop was called: nothing starts any more
	// self is whom the timer fires for, until Stop: the timer holds only
	// this, so that a stopped timer still in the runtime's heap until its
	// time does not keep the queue, its start function and all they hold
	// alive.
	self *atomic.Pointer[Queue[T]]
}

// New returns an empty queue that calls start with the Value of each item
// as it falls due.
func New[T any](start func(T)) *Queue[T] { return &Queue[T]{start: start} }

// Add queues it, which is not queued, to start at it.Due (at once when
// that has passed). After Stop it is queued, for Remove, but never started.
func (q *Queue[T]) Add(it *Item[T]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	// Items join mostly in the order they are due: look from the tail.
	at := q.tail
	for at != nil && at.Due.After(it.Due) {
		at = at.prev
	}
	it.prev = at
	if at == nil {
		it.next, q.head = q.head, it
	} else {
		it.next, at.next = at.next, it
	}
	if it.next == nil {
		q.tail = it
	} else {
		it.next.prev = it
	}
	it.queued = true
	// A timer armed for no later than it.Due serves it too: it fires, and
	// arms itself again for what is then due first.
	if !q.stopped && (q.armed.IsZero() || it.Due.Before(q.armed)) {
		q.arm(it.Due)
	}
}

// arm makes the timer fire at at. q.mu must be held.
func (q *Queue[T]) arm(at time.Time) {
	d := max(time.Until(at), 0)
	if q.timer == nil {
		ref := new(atomic.Pointer[Queue[T]])
		ref.Store(q)
		q.self = ref
		q.timer = time.AfterFunc(d, func() {
			if q := ref.Load(); q != nil {
				q.fire()
			}
		})
	} else {
		q.timer.Reset(d)
	}
	q.armed = at
}

// Remove takes it out of the queue. It reports false when it was not
// queued: it was started (or never added, or removed already).
func (q *Queue[T]) Remove(it *Item[T]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !it.queued {
		return false
	}
	q.unlink(it)
	return true
}

// unlink takes the queued it out of the queue. q.mu must be held.
func (q *Queue[T]) unlink(it *Item[T]) {
	if it.prev == nil {
		q.head = it.next
	} else {
		it.prev.next = it.next
	}
	if it.next == nil {
		q.tail = it.prev
	} else {
		it.next.prev = it.prev
	}
	it.prev, it.next, it.queued = nil, nil, false
}

// fire starts the items that are due and arms the timer for the next.
// After Stop it starts none and leaves the timer unarmed: the items stay
// queued until their owners remove them.
func (q *Queue[T]) fire() {
	var due []*Item[T]
	q.mu.Lock()
	q.armed = time.Time{}
	if !q.stopped {
		now := time.Now()
		for q.head != nil && !q.head.Due.After(now) {
			it := q.head
			q.unlink(it)
			due = append(due, it)
		}
		if q.head != nil {
			q.arm(q.head.Due)
		}
	}
	q.mu.Unlock()
	for _, it := range due {
		q.start(it.Value)
	}
}

// Stop stops the timer, for good: no item starts once the timer's firing
// under way, if any, has started the items it took out, and the timer no
// longer holds the queue. Its owner removes the items still queued.
func (q *Queue[T]) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	if q.timer != nil {
		q.timer.Stop()
		q.self.Store(nil)
	}
	q.armed = time.Time{}
}
