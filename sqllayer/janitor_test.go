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

// TestDeleteExpiredSparesLeases: the janitor deletes an in-progress record
// only once its lease and the grace after it have ended, whatever its
// expiry says (a record written by a version whose claims expired with
// their lease): one whose lease runs, or whose lease lapsed within its
// grace, stays; one past its grace goes, and so does a completed one.
func TestDeleteExpiredSparesLeases(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, db := b.layer(t)
		scope := testenv.Name("spare")
		// Seconds from the database's now. The lease is not stored; it is
		// at most lease_until - created_at, and its grace a quarter of it.
		rows := []struct {
			name                    string
			created, lease, expires int
			complete, kept          bool
		}{
			{"lease running", -60, 60, -1, false, true},
			{"lapsed within its grace", -90, -10, -10, false, true}, // grace at most 20 s
			{"past its grace", -90, -30, -30, false, false},         // grace ended 15 s ago at most
			{"completed", -90, 0, -1, true, false},
		}
		keys := make([]idem.Key, len(rows))
		for i, r := range rows {
			keys[i] = idem.NewKey(scope, r.name)
			rec, _, err := l.Reserve(ctx(t), keys[i], "fp", time.Hour, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			set := fmt.Sprintf("created_at = %s, lease_until = %s", dbAt(s, r.created), dbAt(s, r.lease))
			if r.complete {
				if err := l.Complete(ctx(t), keys[i], rec.Token, []byte("r"), time.Hour); err != nil {
					t.Fatal(err)
				}
				set = fmt.Sprintf("created_at = %s", dbAt(s, r.created))
			}
			d := keys[i].Digest()
			q := fmt.Sprintf("UPDATE %s SET %s, expires_at = %s WHERE key_digest = ?", b.records, set, dbAt(s, r.expires))
			if _, err := db.ExecContext(ctx(t), q, d[:]); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if _, err := l.DeleteExpired(ctx(t), 10); err != nil {
			t.Fatalf("DeleteExpired: %v", err)
		}
		for i, r := range rows {
			d := keys[i].Digest()
			if kept := count(t, db, b.records, "key_digest = ?", d[:]) == 1; kept != r.kept {
				t.Errorf("%s: kept %v after the sweep, want %v", r.name, kept, r.kept)
			}
		}
	})
}

// dbAt is the SQL for sec seconds from the database's now on s.
func dbAt(s *testenv.SQL, sec int) string {
	switch s.Kind {
	case "postgres":
		return fmt.Sprintf("clock_timestamp() + interval '%d second'", sec)
	case "mysql":
		return fmt.Sprintf("UTC_TIMESTAMP(6) + INTERVAL %d SECOND", sec)
	}
	return fmt.Sprintf("(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000 + %d)", sec*1_000_000)
}
