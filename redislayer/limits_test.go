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

func TestMaxResult(t *testing.T) {
	l, _ := miniLayer(t, redislayer.WithMaxResult(4))
	k := idem.NewKey("limits", "max")
	rec, _, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(t.Context(), k, rec.Token, []byte("12345"), time.Hour); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete over the limit: %v, want ErrTooLarge", err)
	}
	big := idem.Record{Key: idem.NewKey("limits", "fill"), State: idem.StateCompleted, Result: []byte("12345")}
	if err := l.Fill(t.Context(), big, time.Hour); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Fill over the limit: %v, want ErrTooLarge", err)
	}
	if err := l.Complete(t.Context(), k, rec.Token, []byte("1234"), time.Hour); err != nil {
		t.Fatalf("Complete at the limit: %v", err)
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
		redislayer.WithMaxResult(-1),
		redislayer.WithReserveOrder(idem.OrderOneStatement+1),
	)
	if !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("New with nonsense: %v, want ErrConfig", err)
	}
	for _, name := range []string{"nil client", "WithPrefix", "WithTimeout", "WithMaxResult", "WithReserveOrder"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
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

// WithTimeout(0) is no timeout of the layer's own: a call under a context
// without a deadline gets none; by default it gets the layer's.
func TestTimeoutZeroIsNone(t *testing.T) {
	m := testenv.MiniRedis(t).Mini
	for _, tc := range []struct {
		name string
		opts []redislayer.Option
		want bool
	}{
		{"default", nil, true},
		{"zero", []redislayer.Option{redislayer.WithTimeout(0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			c := &deadlines{Client: rc}
			l := newLayer(t, c, tc.opts...)
			if _, err := l.Get(context.Background(), idem.NewKey("limits", "timeout")); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("Get: %v, want ErrNotFound", err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.seen) == 0 {
				t.Fatal("Get ran no script")
			}
			for _, got := range c.seen {
				if got != tc.want {
					t.Fatalf("a script ran with a deadline: %v, want %v", got, tc.want)
				}
			}
		})
	}
}
