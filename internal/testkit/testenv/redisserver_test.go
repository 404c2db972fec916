package testenv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

func TestRedisServerLifecycle(t *testing.T) {
	s := testenv.StartRedisServer(t)
	o := s.Options()
	o.MaxRetries = -1
	c := redis.NewClient(o)
	defer c.Close()
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err()
	}
	if err := ping(); err != nil {
		t.Fatalf("PING a fresh server: %v", err)
	}
	if err := c.Set(context.Background(), "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	s.Pause()
	if err := ping(); err == nil {
		t.Fatal("a paused server answered PING")
	}
	s.Resume()
	if err := ping(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}

	s.Kill()
	if err := ping(); err == nil {
		t.Fatal("a killed server answered PING")
	}
	s.Restart()
	if err := ping(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if err := c.Get(context.Background(), "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: %v, want an empty server", err)
	}
}
