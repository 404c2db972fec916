package flight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// key names an execution in the tests: a key and a fingerprint, as a
// store names one.
type key struct{ k, fp string }

// job is an execution as the tests embed it.
type job struct {
	fl  Call[key, *job]
	out string
}

func newJob(k key, hash uint64) *job {
	j := &job{}
	j.fl = Call[key, *job]{Key: k, Hash: hash, Value: j}
	return j
}

// Each shard fills whole lines, so that the locks and maps of neighbouring
// shards in a Table are a line apart. (A shard of 56 bytes put two locks
// on one 64-byte line.)
func TestShardsFillWholeLines(t *testing.T) {
	for name, size := range map[string]uintptr{
		"shard[key, *job]":       unsafe.Sizeof(shard[key, *job]{}),
		"shard[int, [64]byte]":   unsafe.Sizeof(shard[int, [64]byte]{}),
		"shard[string, float64]": unsafe.Sizeof(shard[string, float64]{}),
	} {
		if size == 0 || size%lineSize != 0 {
			t.Errorf("%s is %d bytes, not a multiple of %d", name, size, lineSize)
		}
	}
	var tab Table[key, *job]
	if d := uintptr(unsafe.Pointer(&tab.shards[1].mu)) - uintptr(unsafe.Pointer(&tab.shards[0].mu)); d%lineSize != 0 {
		t.Errorf("neighbouring locks %d bytes apart, want a multiple of %d", d, lineSize)
	}
	if end := unsafe.Offsetof(tab.shards[0].calls) + unsafe.Sizeof(tab.shards[0].calls); end > 64 {
		t.Errorf("a shard's written fields span %d bytes: they do not fit one line", end)
	}
	if lineSize < 64 || lineSize&(lineSize-1) != 0 {
		t.Errorf("lineSize %d is not a power of two of at least a 64-byte line", lineSize)
	}
}

// Calls whose keys share a slot of the table — the same key with other
// fingerprints, or other keys whose hashes are equal — are each their own
// execution, found and left in any order.
func TestSharedSlot(t *testing.T) {
	const hash = 7 // one slot for all
	var tab Table[key, *job]
	jobs := []*job{
		newJob(key{"a", "x"}, hash),
		newJob(key{"a", "y"}, hash),
		newJob(key{"b", "x"}, hash),
	}
	for _, j := range jobs {
		if cur, lead := tab.Join(&j.fl); !lead || cur != &j.fl {
			t.Fatalf("%v joined %p, want a new execution", j.fl.Key, cur)
		}
	}
	if cur, lead := tab.Join(&newJob(key{"a", "x"}, hash).fl); lead || cur != &jobs[0].fl {
		t.Fatalf("a duplicate got %p, lead %v; want to join %p", cur, lead, &jobs[0].fl)
	}
	inFlight := map[*job]bool{jobs[0]: true, jobs[1]: true, jobs[2]: true}
	for _, j := range []*job{jobs[1], jobs[2], jobs[0]} { // the middle, the head, the last
		tab.Leave(&j.fl)
		delete(inFlight, j)
		for _, other := range jobs {
			cur, _ := tab.Find(hash, other.fl.Key)
			if inFlight[other] && cur != &other.fl || !inFlight[other] && cur != nil {
				t.Fatalf("after %v left: %v finds %p", j.fl.Key, other.fl.Key, cur)
			}
		}
	}
	if n := len(tab.shard(hash).calls); n != 0 {
		t.Fatalf("%d slots left", n)
	}
}

// Of many callers of one key at once, one leads; the others join its call,
// are told they joined, and see its outcome once it leaves. A leader that
// watches its call has a Done channel before anyone joins.
func TestOneLeadsTheOthersJoin(t *testing.T) {
	var tab Table[key, *job]
	k := key{"k", "fp"}
	leader := newJob(k, 42)
	leader.fl.Watch()
	if _, lead := tab.Join(&leader.fl); !lead {
		t.Fatal("the first caller did not lead")
	}
	if c, joined := tab.Find(42, k); c != &leader.fl || joined {
		t.Fatalf("Find: %p joined %v; want the leader's call, joined by none", c, joined)
	}
	const callers = 8
	var wg sync.WaitGroup
	var led atomic.Int32
	got := make(chan string, callers)
	ready := make(chan struct{}, callers)
	for range callers {
		wg.Go(func() {
			cur, lead := tab.Join(&newJob(k, 42).fl)
			if lead {
				led.Add(1)
				return
			}
			ready <- struct{}{}
			<-cur.Done()
			got <- cur.Value.out
		})
	}
	for range callers {
		<-ready
	}
	if _, joined := tab.Find(42, k); !joined {
		t.Fatal("Find does not report the callers that joined")
	}
	leader.out = "paid"
	tab.Leave(&leader.fl)
	<-leader.fl.Done() // the leader's own channel, closed too
	wg.Wait()
	close(got)
	for out := range got {
		if out != "paid" {
			t.Fatalf("a caller that joined saw %q", out)
		}
	}
	if led.Load() != 0 {
		t.Fatalf("%d callers led while the first was in flight", led.Load())
	}
	if cur, lead := tab.Join(&newJob(k, 42).fl); !lead || cur.Value.out != "" {
		t.Fatal("a caller after Leave did not start a new execution")
	}
}

// CancelAll cancels the work of every call in flight that set its cancel,
// in every shard, and no other.
func TestCancelAll(t *testing.T) {
	var tab Table[key, *job]
	cause := errors.New("closing")
	var ctxs []context.Context
	for i := range 2 * Shards {
		j := newJob(key{string(rune('a' + i)), "fp"}, uint64(i))
		if _, lead := tab.Join(&j.fl); !lead {
			t.Fatal("a new key did not lead")
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		tab.SetCancel(&j.fl, cancel)
		ctxs = append(ctxs, ctx)
	}
	idle := newJob(key{"idle", "fp"}, 3)
	tab.Join(&idle.fl) // no work begun: nothing to cancel
	tab.CancelAll(cause)
	for i, ctx := range ctxs {
		if !errors.Is(context.Cause(ctx), cause) {
			t.Fatalf("call %d: cause %v, want %v", i, context.Cause(ctx), cause)
		}
	}
}
