package sqllayer_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// Batches across a fleet of Layers on one database, and the batched
// processed events against the single ones.

// TestBatchedFleet: 8 Layers × 8 goroutines with batching on reserve and
// complete 40 keys each, every key asked for by two goroutines of different
// Layers; each key is claimed once and completed by its claimant, and the
// other sees the claim or the result.
func TestBatchedFleet(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		var ls []*sqllayer.Layer
		if b.sql.Real {
			ls = b.fleet(t, instances, sqllayer.WithBatchSize(16))
		} else {
			for range 2 {
				l, _ := b.layer(t, sqllayer.WithBatchSize(16))
				ls = append(ls, l)
			}
		}
		perG := 40
		if !b.sql.Real {
			perG = 8 // SQLite is Go code, which the race detector slows tenfold
		}
		prefix := testenv.Name("fleet")
		claims := make([]int, contenders/2*perG)
		var mu sync.Mutex
		race(ls, func(g int, l *sqllayer.Layer) { claimShared(t, l, prefix, g, perG, claims, &mu) })
		for n, c := range claims {
			if c != 1 {
				t.Fatalf("key %d claimed %d times", n, c)
			}
		}
		var batched int64
		for _, l := range ls {
			_, _, n := sqllayer.BatchState(l)
			batched += n[0] + n[1]
		}
		t.Logf("%d of %d calls went out in batches", batched, 2*len(claims)+len(claims))
	})
}

// claimShared reserves the perG keys goroutine g shares with its neighbour
// (goroutines 2j and 2j+1 share keys, on different Layers), counts each
// claim it wins in claims, and completes it with the key's number; a claim
// it loses must show the claim or the result, without a token.
func claimShared(t *testing.T, l *sqllayer.Layer, prefix string, g, perG int, claims []int, mu *sync.Mutex) {
	for i := range perG {
		n := (g/2)*perG + i
		k := idem.NewKey(prefix, fmt.Sprint(n))
		r, claimed, err := l.Reserve(ctx(t), k, "fp", time.Hour, time.Hour)
		if err != nil {
			t.Errorf("Reserve: %v", err)
			return
		}
		if !claimed {
			if r.Token != "" || (r.State != idem.StateInProgress && !r.Completed()) {
				t.Errorf("a duplicate saw %+v", r)
			}
			continue
		}
		mu.Lock()
		claims[n]++
		mu.Unlock()
		if err := l.Complete(ctx(t), k, r.Token, []byte(fmt.Sprint(n)), time.Hour); err != nil {
			t.Errorf("Complete: %v", err)
		}
	}
}

// TestMarkProcessedBatchAgreesWithSingle: IDs that any encoding of a
// batch must carry byte for byte (quotes, backslashes, JSON's HTML and
// line-separator escapes, control characters, four-byte runes, spaces at
// the end, the longest ID) are the same events to MarkProcessedBatch and to
// MarkProcessed, whichever marks them first.
func TestMarkProcessedBatchAgreesWithSingle(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, db := b.layer(t)
		c := ctx(t)
		odd := []string{`a"b`, `c\d`, `<&>`, "x\u2028y", "tab\tand\x01", "😀 ü", "trailing  ", "[1]", "NULL",
			strings.Repeat("é", 127) + "z"}
		inTx := func(fn func(tx bun.Tx)) {
			t.Helper()
			tx := must.Get(db.BeginTx(c, nil))(t)
			fn(tx)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		for round, batchFirst := range []bool{true, false} {
			consumer := testenv.Name("consumer")
			ids := odd // a consumer of the round's own: new events again
			single := func(want bool) {
				inTx(func(tx bun.Tx) {
					for _, id := range ids {
						if dup, err := l.MarkProcessed(c, tx, consumer, id); err != nil || dup != want {
							t.Errorf("round %d: MarkProcessed(%q): %v %v, want %v", round, id, dup, err, want)
						}
					}
				})
			}
			batch := func(want bool) {
				inTx(func(tx bun.Tx) {
					dups, err := l.MarkProcessedBatch(c, tx, consumer, ids)
					if err != nil {
						t.Fatalf("round %d: MarkProcessedBatch: %v", round, err)
					}
					for i, dup := range dups {
						if dup != want {
							t.Errorf("round %d: MarkProcessedBatch(%q): %v, want %v", round, ids[i], dup, want)
						}
					}
				})
			}
			if batchFirst {
				batch(false)
				single(true)
			} else {
				single(false)
				batch(true)
			}
		}
	})
}

// TestMarkProcessedBatch: one call marks new events, reports those
// processed before and repeats within the batch as duplicates, revives an
// expired row, validates every ID, and rolls back with the transaction.
func TestMarkProcessedBatch(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, db := b.layer(t)
		short, _ := b.layer(t, sqllayer.WithEventRetention(time.Microsecond))
		c := ctx(t)
		consumer := testenv.Name("consumer")
		mark := func(l *sqllayer.Layer, ids []string, commit bool) []bool {
			t.Helper()
			tx := must.Get(db.BeginTx(c, nil))(t)
			dups, err := l.MarkProcessedBatch(c, tx, consumer, ids)
			if err != nil {
				_ = tx.Rollback()
				t.Fatalf("MarkProcessedBatch: %v", err)
			}
			if commit {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			} else {
				_ = tx.Rollback()
			}
			return dups
		}
		if got := mark(l, []string{"seen"}, true); fmt.Sprint(got) != "[false]" {
			t.Fatalf("first mark: %v", got)
		}
		if got := mark(short, []string{"expired"}, true); fmt.Sprint(got) != "[false]" {
			t.Fatalf("short mark: %v", got)
		}
		if got := mark(l, []string{"rolled-back"}, false); fmt.Sprint(got) != "[false]" {
			t.Fatalf("mark rolled back: %v", got)
		}
		time.Sleep(20 * time.Millisecond) // the microsecond retention lapses (SQLite counts milliseconds)
		ids := []string{"a", "seen", "b", "a", "expired", "rolled-back"}
		want := "[false true false true false false]"
		if got := mark(l, ids, true); fmt.Sprint(got) != want {
			t.Errorf("mixed batch: %v, want %v", got, want)
		}
		all := make([]string, 1200) // more than one statement's worth
		for i := range all {
			all[i] = fmt.Sprint("many-", i%1100)
		}
		got := mark(l, all, true)
		for i, dup := range got {
			if dup != (i >= 1100) {
				t.Fatalf("event %d (%s): duplicate=%v", i, all[i], dup)
			}
		}
		if got := mark(l, []string{"many-3", "many-1099", "new"}, true); fmt.Sprint(got) != "[true true false]" {
			t.Errorf("after chunks: %v", got)
		}
		tx := must.Get(db.BeginTx(c, nil))(t)
		defer func() { _ = tx.Rollback() }()
		if _, err := l.MarkProcessedBatch(c, tx, consumer, []string{"ok", ""}); !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("an empty ID: %v, want ErrInvalidKey", err)
		}
		if got, err := l.MarkProcessedBatch(c, tx, consumer, nil); err != nil || len(got) != 0 {
			t.Errorf("no IDs: %v %v", got, err)
		}
	})
}
