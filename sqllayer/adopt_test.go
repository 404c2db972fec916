package sqllayer_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// adoptBlocks returns the SQL blocks of the guide's section on adopting a
// processed_event table, with the table and trigger names made this
// test's own.
func adoptBlocks(t *testing.T, seed, idemTable string) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/consumers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Adopting the `processed_event` table you have")
	if !ok {
		t.Fatal("docs/consumers.md has no section on adopting a processed_event table")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(section, -1) {
		s := strings.ReplaceAll(m[1], "processed_events", "\x00")
		s = strings.ReplaceAll(s, "processed_event", seed)
		blocks = append(blocks, strings.ReplaceAll(s, "\x00", idemTable))
	}
	if len(blocks) != 3 {
		t.Fatalf("the section has %d SQL blocks, want 3 (the table, the move, the clean-up)", len(blocks))
	}
	return blocks
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// The guide's move from a team's processed_event table to idem's, on
// Postgres: marks made before it keep deduplicating, and while old and new
// consumers run side by side no event is processed twice or lost.
func TestAdoptProcessedEvent(t *testing.T) {
	s := testenv.Postgres(t)
	db := s.Open(t)
	ctx := t.Context()
	seed, events := testenv.Name("processed_event"), testenv.Name("idem_evt")
	records, versions := testenv.Name("idem_rec"), testenv.Name("idem_ver")
	l, err := sqllayer.New(db, sqllayer.WithRecordsTable(records), sqllayer.WithEventsTable(events), sqllayer.WithVersionsTable(versions))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Init(ctx); err != nil {
		t.Fatal(err)
	}
	blocks := adoptBlocks(t, seed, events)
	t.Cleanup(func() {
		bg := context.Background()
		_, _ = db.ExecContext(bg, blocks[2])
		for _, table := range []string{seed, records, events, versions} {
			_, _ = db.ExecContext(bg, "DROP TABLE IF EXISTS "+table)
		}
	})
	if _, err := db.DB.ExecContext(ctx, blocks[0]); err != nil {
		t.Fatalf("the seed's table: %v", err)
	}
	const consumer = "payments"
	// The old consumer's mark: its own INSERT, checked by its row count.
	oldMark := func(ctx context.Context, tx bun.Tx, id string) (first bool, err error) {
		res, err := tx.ExecContext(ctx, "INSERT INTO "+seed+" (event_id, topic, consumer_name, expires_at) VALUES (?, 'payments.v1', ?, now() + interval '1 day') ON CONFLICT (event_id) DO NOTHING", id, consumer)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	}
	newMark := func(ctx context.Context, tx bun.Tx, id string) (bool, error) {
		dup, err := l.MarkProcessed(ctx, tx, consumer, id)
		return !dup, err
	}
	mark := func(m func(context.Context, bun.Tx, string) (bool, error), id string) (first bool) {
		t.Helper()
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) (err error) {
			first, err = m(ctx, tx, id)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return first
	}

	before := newUUID()
	if !mark(oldMark, before) {
		t.Fatal("the old consumer's first mark was not first")
	}
	if _, err := db.DB.ExecContext(ctx, blocks[1]); err != nil {
		t.Fatalf("the move: %v", err)
	}
	if mark(newMark, before) {
		t.Fatal("an event marked before the move ran again under idem")
	}
	after := newUUID()
	if !mark(oldMark, after) || mark(newMark, after) {
		t.Fatal("an event an old consumer marked after the move ran again under idem")
	}
	fresh := newUUID()
	if !mark(newMark, fresh) || mark(oldMark, fresh) {
		t.Fatal("an event idem marked ran again in an old consumer")
	}
	if !mark(newMark, "order-17") || mark(newMark, "order-17") {
		t.Fatal("an event ID that is no uuid: not marked once")
	}

	// Old and new consumers side by side, every event delivered to both
	// kinds several times, concurrently: one effect each.
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = newUUID()
	}
	var mu sync.Mutex
	effects := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := oldMark
			if w%2 == 1 {
				m = newMark
			}
			for _, id := range ids {
				err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					first, err := m(ctx, tx, id)
					if err != nil || !first {
						return err
					}
					mu.Lock()
					effects[id]++
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if effects[id] != 1 {
			t.Errorf("event %s: %d effects, want 1", id, effects[id])
		}
	}
	// Again: the move is safe to run twice; then the clean-up.
	if _, err := db.DB.ExecContext(ctx, blocks[1]); err != nil {
		t.Fatalf("the move again: %v", err)
	}
	if _, err := db.DB.ExecContext(ctx, blocks[2]); err != nil {
		t.Fatalf("the clean-up: %v", err)
	}
	if mark(newMark, before) || mark(newMark, ids[0]) {
		t.Fatal("after the clean-up, an adopted mark no longer deduplicates")
	}
	var n int
	if err := db.NewRaw("SELECT count(*) FROM "+seed).Scan(ctx, &n); err != nil || n < len(ids)+3 {
		t.Fatalf("the old table holds %d rows (%v): a mark was lost", n, err)
	}
}
