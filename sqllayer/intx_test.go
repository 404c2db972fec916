package sqllayer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// businessTable creates a table of the test's own business writes, without
// any unique constraint, so that a second execution would show as a second
// row.
func businessTable(t *testing.T, b *backend, columns string) string {
	t.Helper()
	name := testenv.Name("idem_biz")
	db := b.sql.Open(t)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(c, "DROP TABLE IF EXISTS "+name)
	})
	if _, err := db.ExecContext(ctx(t), "CREATE TABLE "+name+" ("+columns+")"); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestInTxConcurrentDeliveries: 50 deliveries of one event at once, spread
// over 5 instances, write the business row once; the other 49 are told they
// are duplicates.
func TestInTxConcurrentDeliveries(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		biz := businessTable(t, b, "event_id VARCHAR(64) NOT NULL, note VARCHAR(64) NOT NULL")
		ls := make([]*sqllayer.Layer, 5)
		for i := range ls {
			ls[i], _ = b.layer(t)
		}
		event := testenv.Name("evt")
		const deliveries = 50
		var (
			ran, dups, errs atomic.Int32
			start           = make(chan struct{})
			arrived         sync.WaitGroup
			wg              sync.WaitGroup
		)
		arrived.Add(deliveries)
		for i := range deliveries {
			wg.Go(func() {
				<-start
				arrived.Done()
				dup, err := ls[i%len(ls)].InTx(ctx(t), "billing", event, func(ctx context.Context, tx bun.Tx) error {
					if ran.Add(1) == 1 {
						// Keep the first transaction open until every delivery
						// has been sent, so that the others meet its
						// uncommitted row.
						arrived.Wait()
						time.Sleep(50 * time.Millisecond)
					}
					_, err := tx.ExecContext(ctx, "INSERT INTO "+biz+" (event_id, note) VALUES (?, ?)", event, "charged")
					return err
				})
				switch {
				case err != nil:
					if errs.Add(1) < 3 {
						t.Errorf("InTx: %v", err)
					}
				case dup:
					dups.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := count(t, b.sql.Open(t), biz, "event_id = ?", event); n != 1 {
			t.Fatalf("%d business rows, want 1", n)
		}
		if dups.Load() != 49 || errs.Load() != 0 {
			t.Fatalf("%d duplicates and %d errors, want 49 and 0", dups.Load(), errs.Load())
		}
		t.Logf("fn ran %d times for 50 deliveries (reruns only after a rollback)", ran.Load())
	})
}

// TestInTxFailureRollsBack: fn's error rolls back the processed row with
// fn's writes; the redelivery runs again and commits; the next is a
// duplicate.
func TestInTxFailureRollsBack(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		biz := businessTable(t, b, "event_id VARCHAR(64) NOT NULL")
		l, db := b.layer(t)
		event := testenv.Name("evt")
		write := func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO "+biz+" (event_id) VALUES (?)", event)
			return err
		}
		boom := errors.New("downstream refused")
		dup, err := l.InTx(ctx(t), "billing", event, func(ctx context.Context, tx bun.Tx) error {
			if err := write(ctx, tx); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || dup {
			t.Fatalf("failing fn: dup=%v err=%v, want fn's error", dup, err)
		}
		if n := count(t, db, b.events, "event_id = ?", event); n != 0 {
			t.Fatalf("%d processed rows after a failure, want 0", n)
		}
		if n := count(t, db, biz, "event_id = ?", event); n != 0 {
			t.Fatalf("%d business rows after a failure, want 0", n)
		}
		if dup, err := l.InTx(ctx(t), "billing", event, write); dup || err != nil {
			t.Fatalf("redelivery: dup=%v err=%v, want it to run", dup, err)
		}
		if dup, err := l.InTx(ctx(t), "billing", event, write); !dup || err != nil {
			t.Fatalf("second redelivery: dup=%v err=%v, want a duplicate", dup, err)
		}
		if dup, err := l.InTx(ctx(t), "shipping", event, write); dup || err != nil {
			t.Fatalf("another consumer of the event: dup=%v err=%v, want it to run", dup, err)
		}
		if n := count(t, db, biz, "event_id = ?", event); n != 2 {
			t.Fatalf("%d business rows, want 2 (one per consumer)", n)
		}
	})
}

// TestInTxExpiredEventRunsAgain: a processed row past its retention is
// absent, even before the janitor removes it.
func TestInTxExpiredEventRunsAgain(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		// The second delivery must come within the retention even on a slow
		// machine: a second is plenty.
		l, _ := b.layer(t, sqllayer.WithEventRetention(time.Second))
		event := testenv.Name("evt")
		var runs int
		fn := func(context.Context, bun.Tx) error { runs++; return nil }
		for _, want := range []bool{false, true} {
			if dup, err := l.InTx(ctx(t), "c", event, fn); err != nil || dup != want {
				t.Fatalf("InTx: dup=%v err=%v, want dup=%v", dup, err, want)
			}
		}
		time.Sleep(1500 * time.Millisecond)
		if dup, err := l.InTx(ctx(t), "c", event, fn); err != nil || dup {
			t.Fatalf("InTx after the retention: dup=%v err=%v, want a new run", dup, err)
		}
		if runs != 2 {
			t.Fatalf("fn ran %d times, want 2", runs)
		}
	})
}

// TestCompleteTxCommitsWithTheHandler: MarkProcessed and CompleteTx in the
// caller's transaction commit or roll back with its writes.
func TestCompleteTxCommitsWithTheHandler(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		biz := businessTable(t, b, "order_id VARCHAR(64) NOT NULL")
		l, db := b.layer(t)
		k := idem.NewKey("tenant", testenv.Name("order"))
		rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		if err != nil || !claimed {
			t.Fatal(claimed, err)
		}
		handler := func(tx bun.Tx, result string) {
			t.Helper()
			if _, err := tx.ExecContext(ctx(t), "INSERT INTO "+biz+" (order_id) VALUES (?)", k.ClientKey()); err != nil {
				t.Fatal(err)
			}
			if err := l.CompleteTx(ctx(t), tx, k, rec.Token, []byte(result), time.Hour); err != nil {
				t.Fatalf("CompleteTx: %v", err)
			}
		}

		tx, err := db.BeginTx(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		handler(tx, "rolled back")
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Get(ctx(t), k); err != nil || got.State != idem.StateInProgress {
			t.Fatalf("after a rollback: %+v %v, want the claim in progress", got, err)
		}
		if n := count(t, db, biz, "order_id = ?", k.ClientKey()); n != 0 {
			t.Fatalf("%d business rows after a rollback", n)
		}

		err = db.RunInTx(ctx(t), nil, func(ctx context.Context, tx bun.Tx) error {
			handler(tx, "committed")
			dup, err := l.MarkProcessed(ctx, tx, "orders", k.ClientKey())
			if err != nil || dup {
				t.Errorf("MarkProcessed: dup=%v err=%v", dup, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Get(ctx(t), k)
		if err != nil || got.State != idem.StateCompleted || string(got.Result) != "committed" {
			t.Fatalf("after the commit: %+v %v", got, err)
		}
		if n := count(t, db, biz, "order_id = ?", k.ClientKey()); n != 1 {
			t.Fatalf("%d business rows after the commit, want 1", n)
		}
		// Outside any transaction of its own, a re-sent completion is fine
		// and a stale token is not.
		if err := l.Complete(ctx(t), k, rec.Token, []byte("committed"), time.Hour); err != nil {
			t.Fatalf("re-sent Complete: %v", err)
		}
		err = db.RunInTx(ctx(t), nil, func(ctx context.Context, tx bun.Tx) error {
			return l.CompleteTx(ctx, tx, k, "stale", []byte("x"), time.Hour)
		})
		if !errors.Is(err, idem.ErrLeaseLost) {
			t.Fatalf("CompleteTx with another token: %v, want ErrLeaseLost", err)
		}
	})
}

// TestInvalidEventIDs: IDs are text of 1 to 255 bytes; anything else is
// refused before any statement, with idem.ErrInvalidKey.
func TestInvalidEventIDs(t *testing.T) {
	l, _ := setup(t, testenv.SQLiteMemory(t)).layer(t)
	long := string(make([]byte, 256))
	for _, tc := range []struct{ consumer, event string }{
		{"", "e"}, {"c", ""}, {"c", long}, {"c", "bad\xff"}, {"c", "nul\x00"},
	} {
		_, err := l.InTx(ctx(t), tc.consumer, tc.event, func(context.Context, bun.Tx) error { return nil })
		if !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("InTx(%q, %q): %v, want ErrInvalidKey", tc.consumer, tc.event, err)
		}
	}
}
