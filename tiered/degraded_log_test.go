package tiered_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

// logRecords is a slog.Handler that keeps every record, for a test to
// count.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// count returns how many records at level have a message containing msg.
func (h *logRecords) count(level slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			n++
		}
	}
	return n
}

// all returns every record's level and message, for a failure's message.
func (h *logRecords) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, r := range h.recs {
		b.WriteString(r.Level.String() + " " + r.Message + "\n")
	}
	return b.String()
}

// A Redis that stays down is logged once when it is switched off, not
// again for each probe that finds it still down; its return once; a second
// outage once more. Every call is still answered, by SQL.
func TestDegradedRedisLoggedOncePerChange(t *testing.T) {
	const cooldown = 20 * time.Millisecond
	redis := faultlayer.New(newMem(t))
	logs := &logRecords{}
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithRedis(redis),
		tiered.WithLocalCache(0, 0, 0), tiered.WithRedisFallback(1, cooldown),
		tiered.WithLogger(slog.New(logs)))
	var c counter
	call := func(what string) {
		t.Helper()
		if _, err := s.Do(t.Context(), newKey(t), "fp", c.fn("ok")); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	const off, on = "redis is switched off", "redis answers again"
	redis.Down()
	call("the call that switches Redis off")
	if n := logs.count(slog.LevelWarn, off); n != 1 {
		t.Fatalf("switched off: %d warnings, want 1:\n%s", n, logs.all())
	}
	// Probes that find Redis still down: each one reaches Redis and
	// fails, and none of them logs again.
	for i := range 3 {
		reserves := redis.Calls(faultlayer.Reserve)
		time.Sleep(2 * cooldown)
		call("a probe")
		if redis.Calls(faultlayer.Reserve) == reserves {
			t.Fatalf("probe %d did not reach Redis", i)
		}
	}
	if n := logs.count(slog.LevelWarn, off); n != 1 {
		t.Fatalf("after three failed probes: %d warnings, want still 1:\n%s", n, logs.all())
	}
	if n := len(strings.Split(strings.TrimSpace(logs.all()), "\n")); n != 1 {
		t.Fatalf("%d records, want the one warning:\n%s", n, logs.all())
	}
	redis.Up()
	time.Sleep(2 * cooldown)
	call("the probe that finds Redis back")
	call("a call with Redis back")
	if n := logs.count(slog.LevelInfo, on); n != 1 {
		t.Fatalf("back: %d records, want 1:\n%s", n, logs.all())
	}
	redis.Down()
	call("the call that switches Redis off again")
	time.Sleep(2 * cooldown)
	call("a probe of the second outage")
	if n := logs.count(slog.LevelWarn, off); n != 2 {
		t.Fatalf("two outages: %d warnings, want 2:\n%s", n, logs.all())
	}
}

// Without WithLogger, the Store logs through slog.Default as it is when
// the change happens.
func TestDegradedRedisLogsToDefault(t *testing.T) {
	logs := &logRecords{}
	prev := slog.Default()
	slog.SetDefault(slog.New(logs))
	t.Cleanup(func() { slog.SetDefault(prev) })
	redis := faultlayer.New(newMem(t))
	s := newStore(t, tiered.WithRedis(redis), tiered.WithLocalCache(0, 0, 0), tiered.WithRedisFallback(1, time.Minute))
	redis.Down()
	if _, err := s.Do(t.Context(), newKey(t), "fp", func(context.Context) ([]byte, error) { return []byte("x"), nil }); err == nil {
		t.Fatal("Redis-only with Redis down: the call was answered")
	}
	if n := logs.count(slog.LevelWarn, "calls fail until a probe answers"); n != 1 {
		t.Fatalf("%d warnings through slog.Default, want 1:\n%s", n, logs.all())
	}
}
