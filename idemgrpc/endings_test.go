package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/sqllayer"
)

// The ways a unary handler can end, each run over the memory layer and
// over Redis with a SQL deciding tier (real Redis and Postgres, and the
// embedded stack), and each checked end to end: what the first caller
// gets (code, message, response, metadata), what the deciding tier
// stores, what a retry gets, and how many times the handler ran. The rows
// are in endings_rows_test.go.
func TestHandlerEndings(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		mem, err := memlayer.New()
		if err != nil {
			t.Fatal(err)
		}
		runEndings(t, &endingStack{decider: func(testing.TB) idem.Layer { return mem }})
	})
	for _, atomic := range []bool{false, true} {
		name := "reservation"
		if atomic {
			// The Stores made WithAtomic: the handler's transaction is the
			// Store's (sqllayer.TxFrom), and each row ends as its atomic
			// outcome says.
			name = "atomic"
		}
		t.Run(name, func(t *testing.T) {
			stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
				db := businessDB(t, st)
				runEndings(t, &endingStack{
					st:      st,
					db:      db,
					atomic:  atomic,
					charges: testenv.Name("grpc_end_charges"),
					links:   testenv.Name("grpc_end_links"),
					parents: testenv.Name("grpc_end_parents"),
				})
			})
		})
	}
}

// endingStack is what the rows of one stack share.
type endingStack struct {
	st      *stacktest.Stack            // nil over the memory layer
	decider func(testing.TB) idem.Layer // the memory layer's deciding tier
	db      *bun.DB                     // the business database, with the SQL stacks
	atomic  bool                        // the Stores are made WithAtomic, deciding through db
	// The business tables: a charge per committed run; a link whose
	// parent is checked at COMMIT (a deferred foreign key).
	charges, links, parents string
}

// businessDB returns a pool over the stack's database that checks foreign
// keys (SQLite checks them only when asked), with the business tables.
func businessDB(t *testing.T, st *stacktest.Stack) *bun.DB {
	t.Helper()
	db := st.DB(t)
	if strings.HasPrefix(st.SQL.Kind, "sqlite") {
		db = (&testenv.SQL{Kind: st.SQL.Kind, DSN: st.SQL.DSN + "&_pragma=foreign_keys(1)"}).Open(t)
	}
	return db
}

func (s *endingStack) createTables(t *testing.T) {
	t.Helper()
	for _, ddl := range []string{
		"CREATE TABLE " + s.charges + " (id VARCHAR(64) PRIMARY KEY, amount INTEGER NOT NULL)",
		"CREATE TABLE " + s.parents + " (id INTEGER PRIMARY KEY)",
		"CREATE TABLE " + s.links + " (id VARCHAR(64) PRIMARY KEY, parent INTEGER REFERENCES " + s.parents + " (id) DEFERRABLE INITIALLY DEFERRED)",
	} {
		if _, err := s.db.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, table := range []string{s.links, s.parents, s.charges} {
			_, _ = s.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
		}
	})
}

// ending is one way a handler ends: its first run, and what every side
// should see. A run after the first answers {v: "again"} with the header
// location "/again".
type ending struct {
	name string
	// inTx rows complete the reservation in the SQL deciding tier's
	// transaction: they run on the SQL stacks only.
	inTx bool
	// lease, when set, is the Store's lease.
	lease time.Duration
	// renewLost makes the deciding tier refuse every renewal: the lease
	// is lost while the handler runs.
	renewLost bool
	// givesUp makes the first caller's deadline pass once the handler has
	// closed started; the handler goes on once the caller has its answer.
	givesUp bool
	first   func(r *endingRun) (*structpb.Struct, error)

	firstCode    codes.Code
	firstMsg     string // a part of the status message, when not OK
	firstV       string // the response's v, when OK
	firstHeader  string // the location header the first caller gets; "" none
	firstTrailer string // the x-receipt trailer the first caller gets; "" none
	stored       string // "v:<v>" a response, "code:<code>" a kept status; "" the key released
	storedHeader string // the location header stored with it, "/<x>"; the x-receipt trailer is then "<x>"
	retryV       string // the retry's v ("again": the handler ran again); "" an error
	retryCode    codes.Code
	runs         int
	charges      int // the charges committed (inTx rows)

	// atomic is what follows in the atomic mode (tiered.WithAtomic), where
	// the rows' transaction is the Store's own: sameAtomic when it is
	// what is above.
	atomic atomicEnding
}

// atomicEnding is a row's outcome in the atomic mode; the fields mean
// what ending's do.
type atomicEnding struct {
	same                                                                      bool // as in the other modes
	firstCode                                                                 codes.Code
	firstMsg, firstV, firstHeader, firstTrailer, stored, storedHeader, retryV string
	retryCode                                                                 codes.Code
	runs, charges                                                             int
}

// sameAtomic says that a row ends in the atomic mode as in the others.
var sameAtomic = atomicEnding{same: true}

// refusedAtomic is the ending of a row whose handler completes its
// reservation itself in the atomic mode, and answers the completion's
// error as Unavailable: the completion is refused (a setup mistake,
// idem.ErrConfig, which says why), the Store's transaction rolls back with
// the charge, nothing is stored, and the retry runs.
var refusedAtomic = atomicEnding{firstCode: codes.Unavailable, firstMsg: "this execution is atomic", retryV: "again", runs: 2}

// refusalIgnoredAtomic is the ending of such a row whose handler ignores
// the refusal and returns a message: still nothing commits, and the
// caller gets the setup mistake as a failure, not the message.
var refusalIgnoredAtomic = atomicEnding{firstCode: codes.Internal, firstMsg: "could not be completed", retryV: "again", runs: 2}

// inMode returns the row as it ends in the given mode.
func (e ending) inMode(atomic bool) ending {
	if !atomic || e.atomic.same {
		return e
	}
	a := e.atomic
	e.firstCode, e.firstMsg, e.firstV, e.firstHeader, e.firstTrailer = a.firstCode, a.firstMsg, a.firstV, a.firstHeader, a.firstTrailer
	e.stored, e.storedHeader, e.retryV, e.retryCode, e.runs, e.charges = a.stored, a.storedHeader, a.retryV, a.retryCode, a.runs, a.charges
	return e
}

// endingRun is one run of a row's handler.
type endingRun struct {
	t       testing.TB
	ctx     context.Context
	s       *endingStack
	sql     *sqllayer.Layer
	id      string        // the row's charge ID
	atomic  bool          // the Store is atomic: its transaction is the run's
	lease   time.Duration // the Store's lease, when the row sets it
	dup     func()        // calls the key on another server: it must find it in flight
	renew   <-chan struct{}
	started chan<- struct{} // closed by a row that gives up, once it runs
	gone    <-chan struct{} // closed once the first caller has its answer
}

// expiring is a call's context whose deadline passes when expire is
// closed: Deadline reports a distant time (the server's own deadline), and
// Done and Err say DeadlineExceeded from then on, as a deadline that
// passed, without the test guessing how long the call takes to reach the
// handler.
type expiring struct {
	context.Context
	expire chan struct{}
}

func (c *expiring) Done() <-chan struct{} { return c.expire }

func (c *expiring) Err() error {
	select {
	case <-c.expire:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func resp(v string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{"v": structpb.NewStringValue(v)}}
}

// tx runs fn in a transaction that first inserts the run's charge,
// committing when fn returns nil. The transaction runs on a connection of
// its own, rolled back when its COMMIT fails (SQLite keeps a transaction
// whose deferred checks fail open).
//
// In the atomic mode the transaction is the Store's (sqllayer.TxFrom): it
// commits or rolls back as the handler ends, and fn's error is returned
// for the handler to end with.
func (r *endingRun) tx(fn func(tx bun.IConn) error) error {
	if r.atomic {
		tx, ok := sqllayer.TxFrom(r.ctx)
		if !ok {
			return errors.New("no transaction on the atomic handler's context")
		}
		if _, err := r.s.db.NewRaw("INSERT INTO "+r.s.charges+" (id, amount) VALUES (?, ?)", r.id, 100).Conn(tx).Exec(r.ctx); err != nil {
			return err
		}
		return fn(tx)
	}
	conn, err := r.s.db.Conn(r.ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(r.ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(r.ctx, "INSERT INTO "+r.s.charges+" (id, amount) VALUES (?, ?)", r.id, 100); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// complete completes the run's reservation with m in tx.
func (r *endingRun) complete(tx bun.IConn, m *structpb.Struct) error {
	res, ok := idem.ReservationFrom(r.ctx)
	if !ok {
		return errors.New("no reservation")
	}
	v, err := idemgrpc.Completion(r.ctx, m)
	if err != nil {
		return err
	}
	return r.sql.CompleteReservation(r.ctx, tx, res, v)
}
