package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

func TestRedisCluster(t *testing.T) {
	rc := testenv.StartRedisCluster(t)
	c := rc.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Keys spread over every master; a hash tag keeps two keys together.
	masters := map[string]bool{}
	for i := range 30 {
		k := fmt.Sprintf("k%d", i)
		if err := c.Set(ctx, k, "v", time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		m, err := c.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("30 keys landed on %d masters, want 3", len(masters))
	}
	if err := c.MSet(ctx, "{t}a", "1", "{t}b", "2").Err(); err != nil {
		t.Fatalf("MSET of one hash tag: %v", err)
	}
}
