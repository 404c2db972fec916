package redislayer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
)

// miniLayer returns a layer with opts over a miniredis of its own.
func miniLayer(t *testing.T, opts ...redislayer.Option) (*redislayer.Layer, *miniredis.Miniredis) {
	t.Helper()
	m := testenv.MiniRedis(t).Mini
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return newLayer(t, c, opts...), m
}

// A result over idem.MaxResult is refused by Complete and Fill; one of
// idem.MaxResult bytes is kept. So is a fingerprint over
// idem.MaxFingerprint.
func TestMaxResult(t *testing.T) {
	l, _ := miniLayer(t)
	k := idem.NewKey("limits", "max")
	rec, _, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	over := make([]byte, idem.MaxResult+1)
	if err := l.Complete(t.Context(), k, rec.Token, over, time.Hour); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete over the limit: %v, want ErrTooLarge", err)
	}
	big := idem.Record{Key: idem.NewKey("limits", "fill"), State: idem.StateCompleted, Result: over}
	if err := l.Fill(t.Context(), big, time.Hour); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Fill over the limit: %v, want ErrTooLarge", err)
	}
	if err := l.Complete(t.Context(), k, rec.Token, over[:idem.MaxResult], time.Hour); err != nil {
		t.Fatalf("Complete at the limit: %v", err)
	}
	long := strings.Repeat("f", idem.MaxFingerprint+1)
	if _, _, err := l.Reserve(t.Context(), idem.NewKey("limits", "fp"), long, time.Minute, time.Hour); err == nil {
		t.Fatal("Reserve with a fingerprint over idem.MaxFingerprint: no error")
	}
	if _, _, err := l.Reserve(t.Context(), idem.NewKey("limits", "fp"), long[1:], time.Minute, time.Hour); err != nil {
		t.Fatalf("Reserve with a fingerprint of idem.MaxFingerprint bytes: %v", err)
	}
}

// TestSubMillisecondDurations: a lease or ttl under a millisecond is rounded
// up to one, never down to PEXPIRE 0, which would delete the key at once.
func TestSubMillisecondDurations(t *testing.T) {
	l, m := miniLayer(t, redislayer.WithPrefix("sub:"))
	k := idem.NewKey("limits", "sub-ms")
	rec, claimed, err := l.Reserve(t.Context(), k, "fp", 500*time.Microsecond, 500*time.Microsecond)
	if err != nil || !claimed {
		t.Fatalf("Reserve: %v %v", claimed, err)
	}
	if _, claimed, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Minute); err != nil || claimed {
		t.Fatalf("a sub-millisecond lease vanished at once: claimed=%v err=%v", claimed, err)
	}
	if err := l.Renew(t.Context(), k, rec.Token, time.Microsecond); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	for _, key := range m.Keys() {
		if ttl := m.TTL(key); ttl <= 0 {
			t.Fatalf("key %s has TTL %v, want a positive TTL on every key", key, ttl)
		}
	}
	// The lease and its grace are a millisecond each.
	m.FastForward(2 * time.Millisecond)
	if _, claimed, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Minute); err != nil || !claimed {
		t.Fatalf("after the lease and its grace: claimed=%v err=%v, want a new claim", claimed, err)
	}
}

func TestInvalidDurations(t *testing.T) {
	l, _ := miniLayer(t)
	k := idem.NewKey("limits", "durations")
	for _, d := range [][2]time.Duration{{0, time.Minute}, {time.Minute, 0}, {-time.Second, time.Minute}} {
		if _, _, err := l.Reserve(t.Context(), k, "fp", d[0], d[1]); err == nil {
			t.Errorf("Reserve with lease %v ttl %v succeeded", d[0], d[1])
		}
	}
	if err := l.Renew(t.Context(), k, "t", 0); err == nil {
		t.Error("Renew with lease 0 succeeded")
	}
	if err := l.Complete(t.Context(), k, "t", nil, 0); err == nil {
		t.Error("Complete with ttl 0 succeeded")
	}
}

// TestKeyShape pins the storage shape: one string under prefix{hex}, with
// a TTL, holding the state, the token and the fingerprint; once completed,
// the retention in place of the lease mark.
func TestKeyShape(t *testing.T) {
	l, m := miniLayer(t, redislayer.WithPrefix("shape:"))
	k := idem.NewKey("limits", "shape")
	rec, _, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	name := "shape:{" + k.Hex() + "}"
	if got := m.Keys(); len(got) != 1 || got[0] != name {
		t.Fatalf("keys = %q, want %q", got, name)
	}
	if m.TTL(name) != time.Hour {
		t.Fatalf("TTL %v, want 1h", m.TTL(name))
	}
	v, _ := m.Get(name)
	if v[0] != '1' || v[1] != '0' || v[2:24] != rec.Token || v[24:39] != "000000003540000" || v[69:] != "00002fp" {
		t.Fatalf("stored %q", v)
	}
	if err := l.Complete(t.Context(), k, rec.Token, []byte("ok"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Get(name); v[0] != '2' || v[24:39] != "000000000060000" || v[39:54] != strings.Repeat("0", 15) || v[69:] != "00002fpok" || m.TTL(name) != time.Minute {
		t.Fatalf("completed: stored %q, TTL %v", v, m.TTL(name))
	}
}

// Options given nonsense, and a nil client, are one error from New that
// names each of them and wraps idem.ErrConfig.
func TestNewValidates(t *testing.T) {
	_, err := redislayer.New(nil,
		redislayer.WithPrefix("a{b}:"),
		redislayer.WithTimeout(-time.Second),
		redislayer.WithReserveOrder(idem.OrderClaimFirst+1),
	)
	if !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("New with nonsense: %v, want ErrConfig", err)
	}
	want := []string{"idem: configuration error: redislayer: WithPrefix: give ", "WithTimeout: give ", "WithReserveOrder: give ", "New: give a client"}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("the error has %d lines, want %d: %v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d of the error is %q, want it to start %q", i, lines[i], w)
		}
	}
}

// deadlines is a client that records whether the scripts it runs carry a
// deadline.
type deadlines struct {
	redislayer.Client
	mu   sync.Mutex
	seen []bool
}

func (c *deadlines) saw(ctx context.Context) {
	_, ok := ctx.Deadline()
	c.mu.Lock()
	c.seen = append(c.seen, ok)
	c.mu.Unlock()
}

func (c *deadlines) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	c.saw(ctx)
	return c.Client.EvalSha(ctx, sha1, keys, args...)
}

func (c *deadlines) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c.saw(ctx)
	return c.Client.Eval(ctx, script, keys, args...)
}

// A call made for a caller is bounded by the caller's context alone: under
// a context without a deadline it gets none, whatever WithTimeout says. The
// reads inside a Wait are the layer's own round trips: they get the
// layer's timeout, unless it is 0.
func TestTimeoutIsTheLayersOwnCalls(t *testing.T) {
	m := testenv.MiniRedis(t).Mini
	k := idem.NewKey("limits", "timeout")
	for _, tc := range []struct {
		name string
		opts []redislayer.Option
		call func(l *redislayer.Layer) error
		want bool
	}{
		{"Get", nil, func(l *redislayer.Layer) error { _, err := l.Get(context.Background(), k); return err }, false},
		{"Wait", nil, func(l *redislayer.Layer) error { _, err := l.Wait(context.Background(), k); return err }, true},
		{"Wait, WithTimeout(0)", []redislayer.Option{redislayer.WithTimeout(0)},
			func(l *redislayer.Layer) error { _, err := l.Wait(context.Background(), k); return err }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			c := &deadlines{Client: rc}
			l := newLayer(t, c, tc.opts...)
			if err := tc.call(l); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("%s: %v, want ErrNotFound", tc.name, err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.seen) == 0 {
				t.Fatalf("%s ran no script", tc.name)
			}
			for _, got := range c.seen {
				if got != tc.want {
					t.Fatalf("a script ran with a deadline: %v, want %v", got, tc.want)
				}
			}
		})
	}
}
