package history

import (
	"context"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Recorder writes one process's events as JSON lines. It is safe for
// concurrent use. Each event is one Write of one whole line, made before
// the method returns: give it an *os.File or a pipe, not a buffered writer,
// so that a process killed at any moment loses at most the line being
// written (Decode drops it). Give every process its own stream and a node
// name no other process uses: the IDs it mints start with that name.
type Recorder struct {
	node  string
	clock func() int64

	calls, execs, faults atomic.Uint64

	mu  sync.Mutex // guards w, buf and err
	w   io.Writer
	buf []byte
	err error
}

// NewRecorder returns a Recorder for the process node that writes to w.
// clock gives the time in Unix nanoseconds; nil means the machine's real
// clock (time.Now), which every process of a run shares. Never pass a clock
// a fault skews.
func NewRecorder(w io.Writer, node string, clock func() int64) *Recorder {
	if clock == nil {
		clock = func() int64 { return time.Now().UnixNano() }
	}
	return &Recorder{node: node, clock: clock, w: w}
}

// Now returns the recorder's clock, for a nemesis that times its faults
// with the same clock as the calls.
func (r *Recorder) Now() int64 { return r.clock() }

// Err returns the first write error. After one, the recorder writes
// nothing more: a history with a hole in the middle would mislead.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Recorder) write(ev *event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	r.buf, r.err = appendLine(r.buf[:0], ev)
	if r.err == nil {
		_, r.err = r.w.Write(r.buf)
	}
}

func (r *Recorder) mint(kind string, n *atomic.Uint64) string {
	return r.node + "/" + kind + strconv.FormatUint(n.Add(1), 10)
}

// Invoke records that a call of Do for key and fingerprint begins. Call it
// just before Do, and Return on the result just after.
func (r *Recorder) Invoke(key, fingerprint string) *Pending {
	p := &Pending{r: r, id: r.mint("c", &r.calls), key: key, fp: fingerprint}
	r.write(&event{Ev: evInvoke, ID: p.id, Node: r.node, Key: key, FP: fingerprint, At: r.clock()})
	return p
}

// InvokeOn is Invoke for a call that another process serves: a client
// that records its requests to a service, whose process (node) runs the
// work and records the executions with ExecFor. The call's ID is this
// recorder's, its Node is node: the process whose pauses and kills
// concern it.
func (r *Recorder) InvokeOn(node, key, fingerprint string) *Pending {
	p := &Pending{r: r, id: r.mint("c", &r.calls), key: key, fp: fingerprint}
	r.write(&event{Ev: evInvoke, ID: p.id, Node: node, Key: key, FP: fingerprint, At: r.clock()})
	return p
}

// ExecFor records that fn began to run for a call another process
// recorded (see InvokeOn): call is that call's ID, as the request carried
// it, and key and fingerprint are the call's as this process reads them.
// token is the owner token if fn can know it, else "". The call's own
// record cannot name the execution: the workload links the two once the
// histories are merged (an Executed call needs its Exec).
func (r *Recorder) ExecFor(call, key, fingerprint, token string) *Running {
	x := &Running{r: r, id: r.mint("e", &r.execs)}
	r.write(&event{Ev: evExecStart, ID: x.id, Node: r.node, Call: call, Key: key, FP: fingerprint, Token: token, At: r.clock()})
	return x
}

// Pending is a call between Invoke and Return.
type Pending struct {
	r           *Recorder
	id, key, fp string

	mu       sync.Mutex // guards exec and returned
	exec     string
	returned bool
}

// ID returns the call's ID.
func (p *Pending) ID() string { return p.id }

// ExecStart records that this call's fn began to run: call it first thing
// in the fn handed to Do. token is the owner token if fn can know it, else
// "". The execution is recorded whether or not the caller is still there.
func (p *Pending) ExecStart(token string) *Running {
	x := &Running{r: p.r, id: p.r.mint("e", &p.r.execs)}
	p.mu.Lock()
	if !p.returned {
		p.exec = x.id
	}
	p.mu.Unlock()
	p.r.write(&event{Ev: evExecStart, ID: x.id, Node: p.r.node, Call: p.id, Key: p.key, FP: p.fp, Token: token, At: p.r.clock()})
	return x
}

// Return records how the call ended: its outcome (the caller maps Do's
// error to one), Result.Value as returned, and the error (nil on success).
// Only the first Return counts.
func (p *Pending) Return(out Outcome, value []byte, err error) {
	at := p.r.clock()
	p.mu.Lock()
	if p.returned {
		p.mu.Unlock()
		return
	}
	p.returned = true
	exec := p.exec
	p.mu.Unlock()
	ev := event{Ev: evReturn, ID: p.id, At: at, Out: &out, Exec: exec}
	if err != nil {
		ev.Err = err.Error()
	}
	putValue(value, &ev.Value, &ev.Value64)
	p.r.write(&ev)
}

// Running is an execution between ExecStart and End.
type Running struct {
	r  *Recorder
	id string

	mu       sync.Mutex // guards the fields below, and orders the cancellation's line before End's
	canceled bool
	ended    bool
	ctx      context.Context // watched by Watch
	classify func(cause error) bool
	unwatch  func() bool
}

// ID returns the execution's ID.
func (x *Running) ID() string { return x.id }

// Watch records the cancellation of the work's context ctx, should it come
// before End, with its cause; leaseLost classifies the cause (the caller
// knows idem.ErrLeaseLost, this package does not); it may be called more
// than once, on another goroutine. End stops the watch, so a context
// cancelled once fn returned is not recorded, and one cancelled before is
// written by the time End returns.
func (x *Running) Watch(ctx context.Context, leaseLost func(cause error) bool) {
	stop := context.AfterFunc(ctx, func() { x.cancel(x.r.clock(), ctx, leaseLost) })
	x.mu.Lock()
	x.ctx, x.classify, x.unwatch = ctx, leaseLost, stop
	x.mu.Unlock()
}

// cancel records the watched context's cancellation at at, once. The line
// is written under x.mu, so that once End has returned it is written.
func (x *Running) cancel(at int64, ctx context.Context, leaseLost func(error) bool) {
	cause := context.Cause(ctx)
	ev := event{Ev: evExecCancel, ID: x.id, At: at, Cause: cause.Error(), LeaseLost: leaseLost(cause)}
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.canceled {
		x.canceled = true
		x.r.write(&ev)
	}
}

// Canceled records that the work's context was cancelled, with the cause's
// text and whether it was a lost lease, for a caller that watches the
// context itself. Only the first cancellation before End counts.
func (x *Running) Canceled(cause string, leaseLost bool) {
	ev := event{Ev: evExecCancel, ID: x.id, At: x.r.clock(), Cause: cause, LeaseLost: leaseLost}
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.canceled && !x.ended {
		x.canceled = true
		x.r.write(&ev)
	}
}

// End records that fn returned value and err; a panic is an error here
// (record it, then re-panic). Call it before fn returns to the Store: the
// line must be written before the Store can hand the value to anyone.
func (x *Running) End(value []byte, err error) {
	x.end("", false, value, err)
}

// EndAs is End with the name of the way fn ended (see Execution.Ending),
// for a workload whose work ends in several ways.
func (x *Running) EndAs(ending string, value []byte, err error) {
	x.end(ending, false, value, err)
}

// EndTombstone is EndAs for work whose result is its own caller's only
// (see Execution.Tombstone): a streamed response, say.
func (x *Running) EndTombstone(ending string, value []byte) {
	x.end(ending, true, value, nil)
}

func (x *Running) end(ending string, tombstone bool, value []byte, err error) {
	at := x.r.clock()
	x.mu.Lock()
	if x.ended {
		x.mu.Unlock()
		return
	}
	x.ended = true
	ctx, classify, unwatch := x.ctx, x.classify, x.unwatch
	x.mu.Unlock()
	if unwatch != nil && !unwatch() {
		// The watch had fired: the context ended before fn returned (fn
		// may have returned because of it). Record it now should the
		// watcher not have yet; this time is an upper bound.
		x.cancel(at, ctx, classify)
	}
	ev := event{Ev: evExecEnd, ID: x.id, At: at, Failed: err != nil, Ending: ending, Tombstone: tombstone}
	if err != nil {
		ev.Err = err.Error()
	}
	putValue(value, &ev.Value, &ev.Value64)
	x.r.write(&ev)
}

// Completion records how the execution's completion ended, when the caller
// can tell (an observer of the Store's events).
func (x *Running) Completion(c Completion) {
	x.r.write(&event{Ev: evExecDone, ID: x.id, At: x.r.clock(), Completion: &c})
}

// Fault records that a fault of kind begins, on node ("" for a shared
// service). End the span when the fault clears; a ProcessKill needs no end.
func (r *Recorder) Fault(kind FaultKind, node, detail string) *FaultSpan {
	f := &FaultSpan{r: r, id: r.mint("f", &r.faults)}
	r.write(&event{Ev: evFault, ID: f.id, Kind: kind, Node: node, Detail: detail, At: r.clock()})
	return f
}

// FaultSpan is a fault that has begun.
type FaultSpan struct {
	r     *Recorder
	id    string
	ended atomic.Bool
}

// End records that the fault cleared. Only the first End counts.
func (f *FaultSpan) End() {
	if f.ended.Swap(true) {
		return
	}
	f.r.write(&event{Ev: evFaultEnd, ID: f.id, At: f.r.clock()})
}

// Final records a key's final state. Its At is set to now when zero.
func (r *Recorder) Final(f Final) {
	if f.At == 0 {
		f.At = r.clock()
	}
	r.write(&event{Ev: evFinal, Key: f.Key, At: f.At, SQL: storedWire(f.SQL), Redis: storedWire(f.Redis), Expired: f.Expired, Effects: f.Effects})
}
