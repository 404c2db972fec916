package reliability_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/tiered"
)

// pgRig is the owner node of a Postgres scenario, whose backends carry an
// application name of their own so that the test can find and terminate
// them, and a node for duplicates whose backends are left alone.
type pgRig struct {
	b     *backend
	app   string
	owner *node
	dup   *node
}

func newPGRig(t *testing.T, opts ...nodeOption) *pgRig {
	t.Helper()
	b := sharedBackend(t)
	app := testenv.Name("idemrel")
	r := &pgRig{b: b, app: app}
	r.owner = b.node(t, append([]nodeOption{withApp(app)}, opts...)...)
	r.dup = b.node(t, withStore(tiered.WithLocalCache(0, 0, 0)))
	return r
}

// lockWaiter returns the pid of the owner's backend that waits for a lock.
func (r *pgRig) lockWaiter(t *testing.T) int {
	t.Helper()
	testenv.WaitPostgresLockWait(t, r.b.admin, r.app, 20*time.Second)
	var pid int
	if err := r.b.admin.QueryRowContext(t.Context(), "SELECT pid FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock' LIMIT 1", r.app).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// terminateWaiter ends every backend of the owner while one of them waits
// for a lock, then waits until the layer has retried on a new backend that
// waits again.
func (r *pgRig) terminateWaiter(t *testing.T) {
	t.Helper()
	old := r.lockWaiter(t)
	if n := testenv.TerminatePostgres(t, r.b.admin, r.app); n == 0 {
		t.Fatal("no backend terminated")
	}
	waitFor(t, "a retry on a new backend", func() bool {
		var n int
		err := r.b.admin.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock' AND pid <> ?", r.app, old).Scan(&n)
		return err == nil && n > 0
	})
}

// tx opens an admin transaction, rolled back when the test ends if the test
// did not end it.
func (r *pgRig) tx(t *testing.T) *sql.Tx {
	t.Helper()
	tx, err := r.b.admin.DB.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// lockID returns an advisory lock number of k's own.
func lockID(k idem.Key) int64 {
	d := k.Digest()
	return int64(binary.BigEndian.Uint64(d[:8]) >> 1)
}

// holdCommit installs on the records table a deferred constraint trigger
// that, at the commit of a transaction that inserts (state 1) or completes
// (state 2) k's row, waits for an advisory lock the test holds: the owner's
// statement has run and its commit is in progress when the test acts. The
// returned function lets the commits through.
func (r *pgRig) holdCommit(t *testing.T, k idem.Key, state idem.State) (letGo func()) {
	t.Helper()
	ctx := t.Context()
	fn := testenv.Name("idem_rel_commit")
	event := "INSERT"
	if state == idem.StateCompleted {
		event = "UPDATE"
	}
	id := lockID(k)
	conn, err := r.b.admin.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", id); err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock_shared(` + itoa(id) + `); RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER ` + fn + ` AFTER ` + event + ` ON ` + r.b.st.Records + `
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (NEW.state = ` + itoa(int64(state)) + ` AND NEW.key_digest = decode('` + k.Hex() + `', 'hex'))
EXECUTE FUNCTION ` + fn + `()`,
	}
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var once sync.Once
	letGo = func() {
		once.Do(func() {
			c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = conn.ExecContext(c, "SELECT pg_advisory_unlock($1)", id)
			_, _ = conn.ExecContext(c, "DROP TRIGGER IF EXISTS "+fn+" ON "+r.b.st.Records)
			_, _ = conn.ExecContext(c, "DROP FUNCTION IF EXISTS "+fn+"()")
			_ = conn.Close()
		})
	}
	t.Cleanup(letGo)
	return letGo
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestPostgresBackendTerminated ends the owner's Postgres backends at the
// worst moments: while its claim waits for a concurrent insert of the same
// key, while its claim commits, while its completion waits for a row lock,
// and while its completion commits. The layer retries on a new connection
// after each; duplicates on another instance wait on Redis meanwhile. The
// function runs at most once, the retry either claims and runs it or
// replays, and the result is in SQL.
func TestPostgresBackendTerminated(t *testing.T) {
	t.Run("ReserveWaitingForConcurrentClaim", func(t *testing.T) {
		for _, outcome := range []string{"OtherRolledBack", "OtherCompleted"} {
			t.Run(outcome, func(t *testing.T) {
				t.Parallel()
				r := newPGRig(t)
				k := newKey(t)
				d := k.Digest()
				tx := r.tx(t)
				state, result, lease := 1, []byte(nil), "now() + interval '1 hour'"
				if outcome == "OtherCompleted" {
					state, result, lease = 2, []byte("decided by another"), "NULL"
				}
				if _, err := tx.ExecContext(t.Context(), `INSERT INTO `+r.b.st.Records+` (key_digest, scope, client_key, fingerprint, state, token, result, lease_until, created_at, expires_at)
					VALUES ($1, '', '', $2, $3, $4, $5, `+lease+`, now(), now() + interval '1 hour')`, d[:], []byte("fp"), state, []byte("another-owner"), result); err != nil {
					t.Fatal(err)
				}
				w := heldWork("ran here")
				w.Release()
				owner := goDo(t.Context(), r.owner, k, "fp", w.fn)
				r.terminateWaiter(t)
				dup := goDo(t.Context(), r.dup, k, "fp", w.fn) // waits on the owner's Redis claim
				if outcome == "OtherRolledBack" {
					_ = tx.Rollback()
				} else if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				want, runs := "ran here", int64(1)
				if outcome == "OtherCompleted" {
					want, runs = "decided by another", 0
				}
				checkAnswers(t, want, receive(t, owner), receive(t, dup))
				if n := w.runs.Load(); n != runs {
					t.Fatalf("fn ran %d times, want %d", n, runs)
				}
				r.b.requireCompleted(t, k, want)
			})
		}
	})

	t.Run("CompleteWaitingForRowLock", func(t *testing.T) {
		t.Parallel()
		r := newPGRig(t)
		k := newKey(t)
		w := heldWork("completed after a termination")
		owner := goDo(t.Context(), r.owner, k, "fp", w.fn)
		<-w.entered
		tx := r.tx(t)
		d := k.Digest()
		var one int
		if err := tx.QueryRowContext(t.Context(), "SELECT 1 FROM "+r.b.st.Records+" WHERE key_digest = $1 FOR UPDATE", d[:]).Scan(&one); err != nil {
			t.Fatal(err)
		}
		dup := goDo(t.Context(), r.dup, k, "fp", w.fn)
		w.Release()
		r.terminateWaiter(t)
		_ = tx.Rollback()
		checkAnswers(t, "completed after a termination", receive(t, owner), receive(t, dup))
		if n := w.runs.Load(); n != 1 {
			t.Fatalf("fn ran %d times", n)
		}
		r.b.requireCompleted(t, k, "completed after a termination")
	})

	for _, stmt := range []struct {
		name  string
		state idem.State
	}{{"ReserveCommit", idem.StateInProgress}, {"CompleteCommit", idem.StateCompleted}} {
		t.Run(stmt.name, func(t *testing.T) {
			t.Parallel()
			r := newPGRig(t)
			k := newKey(t)
			letGo := r.holdCommit(t, k, stmt.state)
			w := newWork("committed on the retry")
			owner := goDo(t.Context(), r.owner, k, "fp", w.fn)
			r.terminateWaiter(t)
			// The terminated commit rolled back; the retry's commit waits.
			if row := r.b.sqlRow(t, k); stmt.state == idem.StateInProgress && row.found || stmt.state == idem.StateCompleted && row.state != idem.StateInProgress {
				t.Fatalf("row while the retried commit waits: %+v; the terminated commit must have rolled back", row)
			}
			dup := goDo(t.Context(), r.dup, k, "fp", w.fn)
			letGo()
			checkAnswers(t, "committed on the retry", receive(t, owner), receive(t, dup))
			if n := w.runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times", n)
			}
			r.b.requireCompleted(t, k, "committed on the retry")
		})
	}
}

// checkAnswers fails unless the owner and every duplicate got want.
func checkAnswers(t *testing.T, want string, owner answer, dups ...answer) {
	t.Helper()
	if owner.err != nil || string(owner.res.Value) != want {
		t.Fatalf("owner: %v, want %q", owner, want)
	}
	for i, d := range dups {
		if d.err != nil || string(d.res.Value) != want || !d.res.Replayed {
			t.Fatalf("duplicate %d: %v, want a replay of %q", i, d, want)
		}
	}
}

// TestPostgresReplyLostAfterCommit lets the owner's completion commit and
// then resets its connection before the reply arrives (a proxy in front of
// Postgres). The layer's retry recognises the completion its own token made:
// the owner succeeds, nothing runs again.
func TestPostgresReplyLostAfterCommit(t *testing.T) {
	via, p := testenv.PostgresViaProxy(t)
	r := newPGRig(t, withSQLVia(via), withMaxConns(1))
	// One connection that has run every statement once: the next completion
	// is a single round trip whose reply is the one dropped.
	if _, err := r.owner.Do(t.Context(), newKey(t), "fp", newWork("warm").fn); err != nil {
		t.Fatal(err)
	}
	k := newKey(t)
	d := k.Digest()
	var once sync.Once
	var stateAtDrop atomic.Int64 // the row's state once the reply was dropped, before any retry got through
	stop := make(chan struct{})
	watcher := make(chan struct{})
	defer func() { close(stop); <-watcher }()
	r.owner.sql.Hook(faultlayer.Complete, func(context.Context) error {
		once.Do(func() {
			before := p.DroppedReplies()
			p.DropReplies(true)
			go func() { // lets the retry's connection through
				defer close(watcher)
				for p.DroppedReplies() == before {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
				// Every reply is still dropped: no retry can have got
				// through, so what the row holds is the first statement's.
				var st int64
				if err := r.b.admin.DB.QueryRowContext(context.Background(), "SELECT state FROM "+r.b.st.Records+" WHERE key_digest = $1", d[:]).Scan(&st); err == nil {
					stateAtDrop.Store(st)
				}
				p.DropReplies(false)
			}()
		})
		return nil
	})
	w := heldWork("paid exactly once")
	owner := goDo(t.Context(), r.owner, k, "fp", w.fn)
	<-w.entered
	dup := goDo(t.Context(), r.dup, k, "fp", w.fn)
	w.Release()
	checkAnswers(t, "paid exactly once", receive(t, owner), receive(t, dup))
	if p.DroppedReplies() == 0 || idem.State(stateAtDrop.Load()) != idem.StateCompleted {
		t.Fatalf("dropped replies %d, row state when dropped %d: want the completion committed before its reply was lost", p.DroppedReplies(), stateAtDrop.Load())
	}
	if n := w.runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times", n)
	}
	r.b.requireCompleted(t, k, "paid exactly once")
	t.Logf("%d Postgres replies dropped after the commit; the retry recognised its own completion", p.DroppedReplies())
}

// TestSQLClaimCommittedUnseen: the owner's claim committed but the layer
// never learnt it (a reply lost after the commit, then the layer's retry on
// a new connection). The retry finds a claim in progress under a token no
// one holds. The same call waits for that lease to lapse by the database's
// clock, takes it over and runs fn once. (The fault is injected above the
// layer: the claim is made twice, the first answer dropped.)
func TestSQLClaimCommittedUnseen(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		const lease = 500 * time.Millisecond
		a := b.node(t, withStore(tiered.WithLease(lease)))
		k := newKey(t)
		var once sync.Once
		a.sql.Hook(faultlayer.Reserve, func(ctx context.Context) error {
			var err error
			once.Do(func() { _, _, err = a.sql.Inner.Reserve(ctx, k, "fp", lease, time.Hour) })
			return err
		})
		w := newWork("ran after the orphan lapsed")
		start := time.Now()
		got, err := a.Do(t.Context(), k, "fp", w.fn)
		if err != nil || got.Replayed || string(got.Value) != "ran after the orphan lapsed" {
			t.Fatalf("Do: %+v, %v", got, err)
		}
		if n := w.runs.Load(); n != 1 {
			t.Fatalf("fn ran %d times", n)
		}
		if a.sql.Calls(faultlayer.Reserve) < 2 {
			t.Fatal("the unseen claim was not polled and taken over")
		}
		b.requireCompleted(t, k, "ran after the orphan lapsed")
		t.Logf("%s: %d SQL reserves; ran once after %v (lease %v)", b.name, a.sql.Calls(faultlayer.Reserve), time.Since(start).Round(10*time.Millisecond), lease)
	})
}
