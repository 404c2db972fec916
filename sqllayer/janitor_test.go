package sqllayer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// expiring fills the backend with n records and n processed events that
// expire after ttl, and 3 of each that live an hour.
func expiring(t *testing.T, b *backend, n int, ttl time.Duration) {
	t.Helper()
	short, _ := b.layer(t, sqllayer.WithEventRetention(ttl))
	long, _ := b.layer(t)
	scope := testenv.Name("sweep")
	noop := func(context.Context, bun.Tx) error { return nil }
	for i := range n + 3 {
		l, d := short, ttl
		if i >= n {
			l, d = long, time.Hour
		}
		k := idem.NewKey(scope, fmt.Sprint(i))
		if i%2 == 0 {
			// Completed: claimed for long enough to complete on a slow
			// machine, then kept for d.
			rec, _, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Complete(ctx(t), k, rec.Token, []byte("r"), d); err != nil {
				t.Fatal(err)
			}
		} else if _, _, err := l.Reserve(ctx(t), k, "fp", d, d); err != nil {
			t.Fatal(err)
		}
		if _, err := l.InTx(ctx(t), "sweep", fmt.Sprint(scope, i), noop); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeleteExpired removes exactly the expired rows of both tables, in
// batches, and leaves the live ones.
func TestDeleteExpired(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		const n = 25
		expiring(t, b, n, 200*time.Millisecond)
		l, db := b.layer(t)
		time.Sleep(500 * time.Millisecond)
		got, err := l.DeleteExpired(ctx(t), 10)
		if err != nil || got != 2*n {
			t.Fatalf("DeleteExpired: %d, %v; want %d", got, err, 2*n)
		}
		if r, e := count(t, db, b.records, "1 = 1"), count(t, db, b.events, "1 = 1"); r != 3 || e != 3 {
			t.Fatalf("left %d records and %d events, want the 3 live ones of each", r, e)
		}
		if got, err := l.DeleteExpired(ctx(t), 500); err != nil || got != 0 {
			t.Fatalf("DeleteExpired again: %d, %v", got, err)
		}
		for _, batch := range []int{0, -1} {
			if _, err := l.DeleteExpired(ctx(t), batch); err == nil {
				t.Fatalf("DeleteExpired with a batch of %d succeeded", batch)
			}
		}
	})
}
