package reliability_test

import (
	"context"
	"errors"
	"testing"
)

// pending fails the test if ch already holds an answer: the caller must
// still be waiting (the work it waits for is held, so this is no race).
func pending(t *testing.T, what string, ch <-chan answer) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s returned while the work was held: %v", what, a)
	default:
	}
}

// TestCallerCancelledMidWork cancels one caller while the work runs: the
// leader that started it, or a duplicate waiting on another instance. The
// cancelled caller returns its context's error at once; the work is not
// cancelled; every other caller — in the same process, on other instances,
// and newcomers — gets the one result; nothing runs twice; no claim is left
// behind. When the work then fails, the key is released, and the next
// attempt runs and completes.
func TestCallerCancelledMidWork(t *testing.T) {
	cases := []struct {
		name     string
		cancel   string // "leader" or "waiter"
		workFail bool
	}{
		{"LeaderCancelled", "leader", false},
		{"WaiterCancelled", "waiter", false},
		{"LeaderCancelledThenWorkFails", "leader", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
				a, bb, c := b.node(t), b.node(t), b.node(t)
				k := newKey(t)
				boom := errors.New("downstream failed")
				w := heldWork("ok")
				fn := func(ctx context.Context) ([]byte, error) {
					v, _ := w.fn(ctx)
					if tc.workFail {
						return nil, boom
					}
					return v, nil
				}
				leaderCtx, cancelLeader := context.WithCancel(t.Context())
				defer cancelLeader()
				waiterCtx, cancelWaiter := context.WithCancel(t.Context())
				defer cancelWaiter()

				leader := goDo(leaderCtx, a, k, "fp", fn)
				<-w.entered
				sameProcess := goDo(t.Context(), a, k, "fp", fn)
				waiter := goDo(waiterCtx, bb, k, "fp", fn)
				other := goDo(t.Context(), c, k, "fp", fn)
				waitSubscribers(t, b, k, 2)

				var cancelled <-chan answer
				if tc.cancel == "leader" {
					cancelLeader()
					cancelled = leader
				} else {
					cancelWaiter()
					cancelled = waiter
				}
				if got := receive(t, cancelled); !errors.Is(got.err, context.Canceled) {
					t.Fatalf("cancelled caller: %v, want context.Canceled", got)
				}
				for name, ch := range map[string]<-chan answer{"same-process caller": sameProcess, "other instance": other} {
					pending(t, name, ch)
				}
				// Newcomers after the cancellation join the running work.
				newcomers := []<-chan answer{goDo(t.Context(), a, k, "fp", fn), goDo(t.Context(), bb, k, "fp", fn)}
				w.Release()

				rest := append([]<-chan answer{sameProcess, other}, newcomers...)
				if tc.cancel == "leader" {
					rest = append(rest, waiter)
				} else {
					rest = append(rest, leader)
				}
				for i, ch := range rest {
					got := receive(t, ch)
					if tc.workFail {
						// Callers that shared the failed execution get its error;
						// a waiter on another instance may run the work again
						// after the release, and must then succeed or fail the
						// same way.
						if got.err != nil && !errors.Is(got.err, boom) {
							t.Fatalf("caller %d after the failed work: %v", i, got)
						}
						continue
					}
					if got.err != nil || string(got.res.Value) != "ok" {
						t.Fatalf("caller %d: %v, want the one result", i, got)
					}
				}
				if w.sawCancel.Load() {
					t.Fatal("the work's context was cancelled by a caller's cancellation")
				}
				if n := b.sqlCount(t, "state IN (1, 3)"); n != 0 {
					t.Fatalf("%d claims left in progress after every call ended", n)
				}
				if !tc.workFail {
					if n := w.runs.Load(); n != 1 {
						t.Fatalf("fn ran %d times, want 1", n)
					}
					b.requireCompleted(t, k, "ok")
					return
				}
				// The failed key is not stuck: the next attempt runs and completes.
				runs := w.runs.Load()
				r, err := c.Do(t.Context(), k, "fp", newWork("ok on retry").fn)
				if err != nil || string(r.Value) != "ok on retry" || r.Replayed {
					t.Fatalf("retry after the failed work: %+v, %v", r, err)
				}
				b.requireCompleted(t, k, "ok on retry")
				t.Logf("%s: failing work ran %d times (each after a release), then the retry completed", b.name, runs)
			})
		})
	}
}

// TestCallerGoneBeforeCall: a caller whose context is already cancelled
// gets its error; whatever work it started completes for the next caller,
// so the key is neither stuck nor run twice.
func TestCallerGoneBeforeCall(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		n := b.node(t)
		k := newKey(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		w := newWork("ok")
		if _, err := n.Do(ctx, k, "fp", w.fn); !errors.Is(err, context.Canceled) {
			t.Fatalf("Do with a cancelled context: %v", err)
		}
		// Whether or not the work started, it is not stuck and runs at most once.
		r, err := n.Do(t.Context(), k, "fp", w.fn)
		if err != nil || string(r.Value) != "ok" || w.runs.Load() != 1 {
			t.Fatalf("next call: %+v, %v, runs %d", r, err, w.runs.Load())
		}
		if n := b.sqlCount(t, "state IN (1, 3)"); n != 0 {
			t.Fatalf("%d claims left in progress", n)
		}
	})
}
