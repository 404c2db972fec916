package redislayer_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/idemkit/idem/redislayer"
)

// syncBuffer is a bytes.Buffer safe for go-redis's goroutines and the
// test's.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// go-redis's own print of a failed dial, through a ClientLogger, reaches
// the program's logger at Debug, and nothing at Warn: a client that cannot
// dial, asked twice, writes no warning. A message of another kind is a
// warning.
func TestClientLoggerQuietsFailedDials(t *testing.T) {
	var out syncBuffer
	l := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cl := redislayer.NewClientLogger(l)
	// The real print, through the process-wide logger go-redis uses: the
	// test restores go-redis's default (stderr) after.
	redis.SetLogger(cl)
	t.Cleanup(logging.Enable)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	for range 2 {
		if err := rdb.Ping(t.Context()).Err(); err == nil {
			t.Fatal("a ping to a closed port answered")
		}
	}
	got := out.String()
	if n := strings.Count(got, "level=DEBUG msg=\"connection pool: failed to dial"); n != 2 {
		t.Fatalf("%d failed dials at Debug, want 2 (one per ping):\n%s", n, got)
	}
	if strings.Contains(got, "level=WARN") || !strings.Contains(got, "source=go-redis") {
		t.Fatalf("want only Debug records from go-redis:\n%s", got)
	}
	out.mu.Lock()
	out.buf.Reset()
	out.mu.Unlock()
	cl.Printf(context.Background(), "redis: sentinel: new master=%q addr=%q", "m", "127.0.0.1:6380")
	if got := out.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, `sentinel: new master=\"m\"`) {
		t.Fatalf("another message of go-redis's: %q, want a warning", got)
	}
}
