package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/tiered"
)

// The connection of an atomic execution is cut while its COMMIT is under
// way on the server: the caller cannot know whether it committed. The
// COMMIT is held on the server by a deferred trigger on the business table
// that waits for an advisory lock the test holds; the test cuts every
// connection of the owner's pool (a proxy between the pool and Postgres),
// and starts retries on three other Stores while the outcome is still
// open. Then:
//
//   - cut: the owner's side goes on reaching the server (its driver may
//     cancel the held COMMIT over a new connection), and the test lets the
//     COMMIT go on;
//   - partitioned: the proxy also refuses new connections (no cancel and
//     no read-back reaches the server), and the test lets the COMMIT
//     finish, or terminates its backend so that it rolls back, before the
//     partition heals.
//
// In every round: no caller is answered with a result that did not
// commit, the owner's Store reads the record back before it answers, the
// work runs once for what committed (twice in all only when the first run
// rolled back), the business table holds one row, and every retry gets the
// result that committed.
func TestAtomicConnectionCutDuringCommit(t *testing.T) {
	direct := testenv.Postgres(t)
	proxied, proxy := testenv.PostgresViaProxy(t)
	st := stacktest.On(t, "postgres", testenv.AnyRedis(t), direct)
	r := &atomicRig{st: st, ledger: newLedger(t, st)}
	admin := st.DB(t)

	// The business table's inserts wait at COMMIT for the advisory lock.
	lock := time.Now().UnixNano() & (1<<62 - 1)
	hold := testenv.Name("hold_commit")
	for _, ddl := range []string{
		"CREATE FUNCTION " + hold + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock(" +
			strconv.FormatInt(lock, 10) + "); RETURN NULL; END $$",
		"CREATE CONSTRAINT TRIGGER " + hold + " AFTER INSERT ON " + r.ledger.table +
			" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + hold + "()",
	} {
		if _, err := admin.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP FUNCTION IF EXISTS "+hold+"() CASCADE"); err != nil {
			t.Errorf("drop %s: %v", hold, err)
		}
	})

	// The owner's Store reaches Postgres through the proxy; the retries'
	// Stores directly, under an application name of their own.
	app, retryApp := testenv.Name("atomic_cut"), testenv.Name("atomic_retry")
	stackOn := func(s *testenv.SQL) *stacktest.Stack {
		return &stacktest.Stack{Name: st.Name, Redis: st.Redis, SQL: s, Prefix: st.Prefix,
			Records: st.Records, Events: st.Events, Versions: st.Versions}
	}
	ownerLayer := faultlayer.New(stackOn(testenv.WithApplicationName(t, proxied, app)).SQLLayer(t))
	ownerAtomic, _ := ownerLayer.Atomic()
	// A short lease: a read-back that cannot reach the database gives up
	// answering after half of it (ErrPending), and goes on in the
	// background.
	a := newStore(t, tiered.WithSQL(ownerAtomic), tiered.WithAtomic(true), tiered.WithTimeouts(2*time.Second, 2*time.Second),
		tiered.WithLease(2*time.Second))
	retryStack := stackOn(testenv.WithApplicationName(t, direct, retryApp))
	var retries []*tiered.Store
	for range 3 {
		retries = append(retries, newStore(t, tiered.WithSQL(retryStack.SQLLayer(t)), tiered.WithAtomic(true),
			tiered.WithTimeouts(2*time.Second, 10*time.Second), tiered.WithWait(20*time.Second), tiered.WithLocalCache(0, 0, 0)))
	}
	// The lock is a session's: one connection takes and gives it back.
	lockConn, err := admin.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lockConn.Close() })
	waiting := func(app, query string) func() error {
		return func() error {
			var n int
			err := admin.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock' AND query ILIKE ?",
				app, query).Scan(&n)
			if err == nil && n == 0 {
				err = fmt.Errorf("no backend of %s waits on a lock in %q", app, query)
			}
			return err
		}
	}

	type round struct{ partitioned, commits bool }
	for i, rd := range []round{{false, true}, {true, true}, {true, false}, {false, true}, {true, true}, {true, false}} {
		commits := rd.commits
		t.Run(fmt.Sprintf("round %d partitioned=%v commits=%v", i, rd.partitioned, commits), func(t *testing.T) {
			if _, err := lockConn.ExecContext(t.Context(), "SELECT pg_advisory_lock(?)", lock); err != nil {
				t.Fatal(err)
			}
			unlocked := false
			unlock := func() {
				if !unlocked {
					unlocked = true
					if _, err := lockConn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(?)", lock); err != nil {
						t.Fatal(err)
					}
				}
			}
			defer unlock()
			key := newKey(t)
			id := key.String()
			var runs atomic.Int64
			work := func(ctx context.Context) ([]byte, error) {
				n := runs.Add(1)
				if err := r.charge(ctx, id); err != nil {
					return nil, err
				}
				return []byte("paid by run " + strconv.FormatInt(n, 10)), nil
			}
			gets := ownerLayer.Calls(faultlayer.Get)
			first := doOn(t.Context(), a, key, work)
			// The owner's COMMIT is on the server, held by the trigger.
			eventually(t, waiting(app, "COMMIT%"))
			if rd.partitioned {
				proxy.RefuseNew(true)
			}
			proxy.ResetAll()
			healed := false
			heal := func() {
				if !healed {
					healed = true
					proxy.RefuseNew(false)
				}
			}
			defer heal()
			// Retries while the outcome is open: their claims wait on the
			// unique index for the transaction.
			var wg sync.WaitGroup
			answers := make([]answered, len(retries))
			for i, s := range retries {
				wg.Go(func() {
					answers[i].res, answers[i].err = s.Do(t.Context(), key, "fp", work)
					answers[i].returned = true
				})
			}
			eventually(t, func() error {
				var n int
				err := admin.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock'",
					retryApp).Scan(&n)
				if err == nil && n < len(retries) {
					err = fmt.Errorf("%d of %d retries wait on the owner's transaction", n, len(retries))
				}
				return err
			})
			if commits {
				unlock()
			} else {
				if n := testenv.TerminatePostgres(t, admin, app); n == 0 {
					t.Fatal("no backend of the owner to terminate")
				}
				unlock()
			}
			if rd.partitioned {
				// The outcome settles on the server before the partition
				// heals: the owner's backend ends once its COMMIT has.
				eventually(t, func() error {
					var n int
					err := admin.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND query ILIKE 'COMMIT%' AND state = 'active'",
						app).Scan(&n)
					if err == nil && n > 0 {
						err = errors.New("the owner's COMMIT is still under way")
					}
					return err
				})
			}
			heal()
			got := within(t, first, "the owner")
			wg.Wait()

			rec, err := r.st.SQLLayer(t).Get(t.Context(), key)
			if err != nil || !rec.Completed() {
				t.Fatalf("the record: %+v, %v; want it completed", rec, err)
			}
			// What committed: the owner's run, or (it rolled back) a
			// retry's. Partitioned, the test decided which.
			want := string(rec.Result)
			firstCommitted := want == "paid by run 1"
			if rd.partitioned && firstCommitted != commits {
				t.Fatalf("the record holds %q; the owner's COMMIT was let to commit: %v", want, commits)
			}
			committed := firstCommitted
			t.Logf("the owner's run committed: %v; the owner was answered %v", firstCommitted, got)
			if n := r.rows(t, id); n != 1 {
				t.Fatalf("%d ledger rows, want 1", n)
			}
			if n, want := runs.Load(), int64(map[bool]int{true: 1, false: 2}[committed]); n != want {
				t.Fatalf("the work ran %d times, want %d", n, want)
			}
			if ownerLayer.Calls(faultlayer.Get) == gets {
				t.Fatal("the owner's Store answered without reading the record back")
			}
			switch {
			case !got.returned:
				t.Fatalf("the owner: %v", got)
			case got.err == nil && (!committed || string(got.res.Value) != want):
				t.Fatalf("the owner was answered %q, which did not commit (%q did)", got.res.Value, want)
			case got.err != nil && !errors.Is(got.err, tiered.ErrNotCommitted) && !errors.Is(got.err, tiered.ErrPending):
				t.Fatalf("the owner: %v, want the result, ErrNotCommitted or ErrPending", got.err)
			case errors.Is(got.err, tiered.ErrNotCommitted) && committed && rd.partitioned:
				t.Fatalf("the owner was told %v; its COMMIT committed before any read-back could reach the database", got.err)
			case errors.Is(got.err, tiered.ErrNotCommitted) && committed:
				// Only cut, the read-back may reach the database while the
				// COMMIT is still held there: it sees nothing yet.
				t.Logf("the owner, whose COMMIT went on to commit: %v", got.err)
			}
			for i, ans := range answers {
				if ans.err != nil || string(ans.res.Value) != want {
					t.Fatalf("retry %d: %v; want %q", i, ans, want)
				}
				if committed && !ans.res.Replayed {
					t.Fatalf("retry %d ran the work again: %v", i, ans)
				}
			}
		})
	}
}
