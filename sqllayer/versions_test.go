package sqllayer_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// appliedTable creates the test's log of applied changes, whose id grows in
// the order the changes committed (each change commits under the lock of its
// record's version row).
func appliedTable(t *testing.T, b *backend) string {
	id := map[string]string{
		"postgres":      "id BIGSERIAL PRIMARY KEY",
		"mysql":         "id BIGINT AUTO_INCREMENT PRIMARY KEY",
		"sqlite-file":   "id INTEGER PRIMARY KEY AUTOINCREMENT",
		"sqlite-memory": "id INTEGER PRIMARY KEY AUTOINCREMENT",
	}[b.sql.Kind]
	return businessTable(t, b, id+", external_id VARCHAR(64) NOT NULL, version BIGINT NOT NULL")
}

// TestAdvanceVersionConcurrentDeliveries: in each of 5 rounds, 20 deliveries
// of versions 16, 17, 17, 18 (five of each pair) arrive at once in random
// order. Version 18 ends stored and applied, each version is applied at most
// once, and the applied versions only ever grow: 16 is never applied after
// 17.
func TestAdvanceVersionConcurrentDeliveries(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		applied := appliedTable(t, b)
		ls := make([]*sqllayer.Layer, 4)
		for i := range ls {
			ls[i], _ = b.layer(t)
		}
		db := b.sql.Open(t)
		for round := range 5 {
			ext := testenv.Name("contact")
			var versions []int64
			for range 5 {
				versions = append(versions, 16, 17, 17, 18)
			}
			rand.Shuffle(len(versions), func(i, j int) { versions[i], versions[j] = versions[j], versions[i] })
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, v := range versions {
				wg.Go(func() {
					<-start
					if err := deliver(t, ls[i%len(ls)], ext, v, applied); err != nil {
						t.Errorf("round %d: delivery of version %d: %v", round, v, err)
					}
				})
			}
			close(start)
			wg.Wait()

			got, err := ls[0].Version(ctx(t), db, "crm", ext)
			if err != nil || got != 18 {
				t.Fatalf("round %d: stored version %d (%v), want 18", round, got, err)
			}
			var log []int64
			if err := db.NewRaw("SELECT version FROM "+applied+" WHERE external_id = ? ORDER BY id", ext).Scan(ctx(t), &log); err != nil {
				t.Fatal(err)
			}
			if len(log) == 0 || log[len(log)-1] != 18 {
				t.Fatalf("round %d: applied %v, want 18 last", round, log)
			}
			for i := 1; i < len(log); i++ {
				if log[i] <= log[i-1] {
					t.Fatalf("round %d: applied %v: a version applied twice or after a newer one", round, log)
				}
			}
		}
	})
}

// deliver applies version v of ext the way a sync job does: the version gate
// and the change in one transaction. The broker redelivers a delivery that
// failed on a transaction conflict (MySQL deadlocks when first deliveries
// race), which RunInTx already retried a few times.
func deliver(t *testing.T, l *sqllayer.Layer, ext string, v int64, applied string) error {
	var err error
	for range 20 {
		err = l.RunInTx(ctx(t), func(ctx context.Context, tx bun.Tx) error {
			newer, err := l.AdvanceVersion(ctx, tx, "crm", ext, v)
			if err != nil || !newer {
				return err
			}
			_, err = tx.ExecContext(ctx, "INSERT INTO "+applied+" (external_id, version) VALUES (?, ?)", ext, v)
			return err
		})
		if !errors.Is(err, sqllayer.ErrConflict) {
			return err
		}
	}
	return err
}

// TestAdvanceVersionSequence: the gate's answers one delivery at a time,
// outside and inside a transaction.
func TestAdvanceVersionSequence(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, db := b.layer(t)
		ext := testenv.Name("contact")
		if _, err := l.Version(ctx(t), db, "crm", ext); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Version before any delivery: %v, want ErrNotFound", err)
		}
		for _, step := range []struct {
			v     int64
			newer bool
		}{{5, true}, {5, false}, {4, false}, {6, true}, {-1, false}, {1 << 62, true}, {6, false}} {
			newer, err := l.AdvanceVersion(ctx(t), db, "crm", ext, step.v)
			if err != nil || newer != step.newer {
				t.Fatalf("AdvanceVersion(%d) = %v, %v; want %v", step.v, newer, err, step.newer)
			}
		}
		// Another source with the same external ID is another record.
		if newer, err := l.AdvanceVersion(ctx(t), db, "erp", ext, 1); err != nil || !newer {
			t.Fatalf("another source: %v %v", newer, err)
		}
		if v, err := l.Version(ctx(t), db, "crm", ext); err != nil || v != 1<<62 {
			t.Fatalf("Version = %d, %v", v, err)
		}
	})
}
