package redislayer_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
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
	// A port nobody listens on, and only this test dials: other tests'
	// clients write through the same process-wide logger meanwhile.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	for range 2 {
		if err := rdb.Ping(t.Context()).Err(); err == nil {
			t.Fatal("a ping to a closed port answered")
		}
	}
	var mine []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, addr) {
			mine = append(mine, line)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("%d records name %s, want 2 (a failed dial per ping):\n%s", len(mine), addr, strings.Join(mine, "\n"))
	}
	for _, line := range mine {
		if !strings.Contains(line, "level=DEBUG") || !strings.Contains(line, "failed to dial") || !strings.Contains(line, "source=go-redis") {
			t.Fatalf("a failed dial reads %q, want it at Debug, from go-redis", line)
		}
	}
	out.mu.Lock()
	out.buf.Reset()
	out.mu.Unlock()
	cl.Printf(context.Background(), "redis: sentinel: new master=%q addr=%q", "m", "127.0.0.1:6380")
	if got := out.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, `sentinel: new master=\"m\"`) {
		t.Fatalf("another message of go-redis's: %q, want a warning", got)
	}
}
