package redislayer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
)

// waitIdle is how long the waiters below stay blocked before the owner
// finishes: long enough that polling, at any useful rate, would show up in
// the command count.
const waitIdle = time.Second

// countedLayer returns a layer over r on its own client, whose commands c
// counts.
func countedLayer(t *testing.T, r *testenv.Redis, prefix string) (*redislayer.Layer, *counter) {
	t.Helper()
	o := *r.Options
	o.ContextTimeoutEnabled = true
	cl := redis.NewClient(&o)
	t.Cleanup(func() { _ = cl.Close() })
	n := newCounter()
	cl.AddHook(n)
	return newLayer(t, cl, redislayer.WithPrefix(prefix)), n
}

// TestWaitCostsConstantCommands: waiters on another instance learn of the
// owner's Complete, and of a Release (as ErrNotFound), through the
// completion signal. Each waiter costs a constant number of commands
// whatever the wait lasts: no polling.
func TestWaitCostsConstantCommands(t *testing.T) {
	r := testenv.AnyRedis(t)
	prefix := testenv.Prefix()
	if r.Real() {
		cleanPrefix(t, r.Options, prefix)
	}
	owner, _ := countedLayer(t, r, prefix)
	for _, tc := range []struct {
		name    string
		finish  func(k idem.Key, token string) error
		wantErr error
	}{
		{"Complete", func(k idem.Key, token string) error {
			return owner.Complete(t.Context(), k, token, []byte("result"), time.Minute)
		}, nil},
		{"Release", func(k idem.Key, token string) error { return owner.Release(t.Context(), k, token) }, idem.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const waiters = 4
			waiter, count := countedLayer(t, r, prefix)
			k := idem.NewKey("wait", testenv.Name(tc.name))
			rec, claimed, err := owner.Reserve(t.Context(), k, "fp", time.Minute, time.Minute)
			if err != nil || !claimed {
				t.Fatalf("Reserve: %v %v", claimed, err)
			}
			// Load get.lua into the server's script cache, so that only the
			// waiters' reads are counted, not a first EVALSHA answered
			// NOSCRIPT.
			if _, err := waiter.Get(t.Context(), k); err != nil {
				t.Fatal(err)
			}
			base := count.scripts()
			got := make(chan error, waiters)
			for range waiters {
				go func() {
					ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
					defer cancel()
					r, err := waiter.Wait(ctx, k)
					if err == nil && string(r.Result) != "result" {
						err = errors.New("wrong result " + string(r.Result))
					}
					got <- err
				}()
			}
			time.Sleep(waitIdle / 2) // the waiters block
			settled := count.scripts() - base
			time.Sleep(waitIdle / 2) // a poller would be busy now
			idle := count.scripts() - base
			if err := tc.finish(k, rec.Token); err != nil {
				t.Fatal(err)
			}
			for range waiters {
				if err := <-got; !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Fatalf("Wait: %v, want %v", err, tc.wantErr)
				}
			}
			total := count.scripts() - base
			t.Logf("%d waiters: %d round trips to block, %d more over %v blocked, %d in all", waiters, settled, idle-settled, waitIdle/2, total)
			// Per waiter: a read at once and a read at the subscription's
			// confirmation, then one read after the message; none while
			// blocked.
			if idle != settled || total > 3*waiters {
				t.Fatalf("%d waiters: %d round trips while blocked and %d in all, want 0 and at most %d", waiters, idle-settled, total, 3*waiters)
			}
		})
	}
}

// TestPublishOnlyWhenWaited: a completion no one waits for sends no
// message; once a Wait has read the record, Complete publishes.
func TestPublishOnlyWhenWaited(t *testing.T) {
	l, m := miniLayer(t, redislayer.WithPrefix("pub:"))
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	ps := c.PSubscribe(t.Context(), "pub:*")
	defer ps.Close()
	if _, err := ps.Receive(t.Context()); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	lone := idem.NewKey("pub", "lone")
	rec, _, err := l.Reserve(t.Context(), lone, "fp", time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(t.Context(), lone, rec.Token, []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	waited := idem.NewKey("pub", "waited")
	rec, _, err = l.Reserve(t.Context(), waited, "fp", time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The Wait must read the record before its deadline for Complete to
	// publish: at load 14, 50 ms was not enough, no message came, and the
	// receive below, unbounded then, hung the package for 14 minutes.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := l.Wait(ctx, waited); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v", err)
	}
	if err := l.Complete(t.Context(), waited, rec.Token, []byte("y"), time.Minute); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	msg, err := ps.ReceiveMessage(rctx)
	if err != nil {
		t.Fatalf("no message after the waited completion: %v", err)
	}
	if want := "pub:{" + waited.Hex() + "}:done"; msg.Channel != want {
		t.Fatalf("first message on %s, want %s (the unwaited completion published)", msg.Channel, want)
	}
}
