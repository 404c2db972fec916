package tiered_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

func TestLogObserverRedactsKeys(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithObserver(tiered.LogObserver(l)))
	k := idem.NewKey("tenant-secret", "card-4242-secret")
	var c counter
	for range 2 {
		if _, err := s.Do(t.Context(), k, "fp", c.fn("ok")); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if strings.Contains(out, "secret") {
		t.Fatalf("log shows the scope or client key:\n%s", out)
	}
	if !strings.Contains(out, "idem executed") || !strings.Contains(out, "idem replayed") || !strings.Contains(out, "key="+k.String()) {
		t.Fatalf("log lacks the events or the redacted key:\n%s", out)
	}
}
