package behaviour

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/sqllayer"
)

// The charge handler of the reservation rows: what it does with each
// request, and what it counts.

// mode is what the charge handler does with one request.
type mode int

const (
	commit        mode = iota // write the response, charge and complete in one transaction
	dieAfter                  // commit, then the instance dies before answering
	cutAfter                  // commit, then the client's connection is cut
	rollback                  // complete, then roll back
	writeLater                // complete before writing anything
	failBefore                // the transaction fails before writing and completing; log and return
	writeThenFail             // write, then the transaction fails before completing; log and return
	commitFails               // write and complete; COMMIT fails (a deferred constraint)
	completeTwice             // write, complete twice (the same response), commit
	completeOther             // write, complete, complete again with other bytes (refused), commit
	changeAfter               // write, complete, then change headers and write more, commit
	neverComplete             // take the reservation, write, never complete
	atomicCommit              // atomic mode: write the response and charge in the Store's transaction, complete nothing
)

// charger is one test's business: a charges table beside idem's, and the
// handler that writes to it.
type charger struct {
	st     *stacktest.Stack
	db     *bun.DB
	table  string
	kids   string // rows whose parent must exist at COMMIT: commitFails inserts an orphan
	sqlite bool
	mysql  bool
	atomic bool // the Stores are atomic (tiered.WithAtomic): the handler writes in their transaction
	kind   TxKind

	mu    sync.Mutex
	modes map[string]mode
	hooks map[string]func() // run after the commit, by id
	errs  map[string]error  // what CompleteReservation or a later write said, by id
	runs  atomic.Int64
}

func (c *charger) set(id string, m mode, hook func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.modes[id], c.hooks[id] = m, hook
}

func (c *charger) note(id string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs[id] = errors.Join(c.errs[id], err)
}

func (c *charger) err(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errs[id]
}

// serve is the handler of an instance whose deciding tier is sql.
func (c *charger) serve(sql *sqllayer.Layer) Serve {
	return func(ctx context.Context, w http.ResponseWriter, id string) {
		c.runs.Add(1)
		c.mu.Lock()
		m, hook := c.modes[id], c.hooks[id]
		c.mu.Unlock()
		res, ok := idem.ReservationFrom(ctx)
		if !ok {
			http.Error(w, "no reservation", http.StatusInternalServerError)
			return
		}
		if m == neverComplete {
			// It took its reservation, so it answers only through a
			// completion: this response commits nothing.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"charge":%q,"token_seen":%v}`, id, res.Token() != "")
			return
		}
		h := w.Header() // taken before the status is written
		write := func() {
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"charge":%q,"token_seen":%v}`, id, res.Token() != "")
		}
		charge := func(ctx context.Context, ct ChargeTx) error {
			if err := ct.Exec(ctx, "INSERT INTO "+c.table+" (id) VALUES (?)", id); err != nil {
				return err
			}
			tx := ct.Idem()
			switch m {
			case failBefore:
				return ct.Exec(ctx, "INSERT INTO "+c.table+" (id) VALUES (?)", id) // a constraint fails
			case writeThenFail:
				write()
				return ct.Exec(ctx, "INSERT INTO "+c.table+" (id) VALUES (?)", id)
			case commitFails:
				if err := ct.Exec(ctx, "INSERT INTO "+c.kids+" (id, parent) VALUES (?, ?)", id, "missing"); err != nil {
					return err
				}
			}
			if m == atomicCommit || (c.atomic && (m == dieAfter || m == cutAfter)) {
				write() // the Store completes with it, in this transaction
				return nil
			}
			if m != writeLater {
				write()
			}
			if err := sql.CompleteReservation(ctx, tx, res, nil); err != nil {
				return err
			}
			switch m {
			case rollback:
				return errors.New("the ledger refused after the completion")
			case completeTwice:
				return sql.CompleteReservation(ctx, tx, res, nil)
			case completeOther:
				// A mistake of the handler's, said at the call; it commits
				// anyway, and the first completion stands.
				c.note(id, sql.CompleteReservation(ctx, tx, res, []byte("other bytes")))
			case changeAfter:
				h.Set("Location", "/charges/changed")
				h.Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusAccepted)
				if _, err := io.WriteString(w, "more"); err != nil {
					c.note(id, err)
				}
			}
			return nil
		}
		var err error
		if c.atomic {
			// The rows, the claim and the completion are one transaction:
			// the Store's. A completion by hand is refused.
			tx, ok := c.kind.From(ctx, c.db)
			if !ok {
				http.Error(w, "no transaction", http.StatusInternalServerError)
				return
			}
			err = charge(ctx, tx)
		} else {
			err = c.kind.Run(ctx, c.db, charge)
		}
		if err != nil {
			c.note(id, err)
			if m == failBefore || m == writeThenFail {
				return // the README's shape: log it and return
			}
			// The handler answers its failure; once the response is frozen
			// the write must fail loudly.
			w.WriteHeader(http.StatusInternalServerError)
			if _, werr := io.WriteString(w, "failed"); werr != nil {
				c.note(id, werr)
			}
			return
		}
		if hook != nil {
			hook()
			if m == dieAfter {
				<-ctx.Done() // the Store is going away
			}
		}
	}
}

// wantOnce fails t unless the handler ran once since runs was read and the
// charge id exists once.
func (c *charger) wantOnce(t *testing.T, id string, runs int64) {
	t.Helper()
	if n := c.runs.Load() - runs; n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
	if n := c.count(t, id); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}

func (c *charger) count(t *testing.T, id string) int64 {
	t.Helper()
	n, err := c.db.NewSelect().Table(c.table).Where("id = ?", id).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int64(n) // int before bun 1.3, int64 since
}

// needsFailingCommit skips the row of mode m where no COMMIT can fail by a
// deferred constraint (MariaDB checks foreign keys at each statement); the
// rows of every other ending run there.
func (c *charger) needsFailingCommit(t *testing.T, m mode) {
	t.Helper()
	if m == commitFails && c.mysql {
		t.Skip("MariaDB has no deferred constraint: no COMMIT fails by one")
	}
}
