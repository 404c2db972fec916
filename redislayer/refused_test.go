package redislayer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redislayer"
)

// With the client options the README recommends (one dial attempt, no
// command retries: the Store has its own fallback), a Redis that refuses
// connections is an outage named as such — idem.ErrUnavailable with the
// refusal — not a deadline that ran out while go-redis retried.
func TestRefusedConnectionIsNamed(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
	defer rdb.Close()
	l, err := redislayer.New(rdb, redislayer.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, _, err = l.Reserve(t.Context(), idem.NewKey("", "k"), "fp", time.Second, time.Minute)
	if !errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reserve: %v; want ErrUnavailable naming the refusal", err)
	}
}
