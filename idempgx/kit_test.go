package idempgx_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idempgx"
	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// newPool opens a pgx pool on the test's Postgres, closed when the test
// ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	s := testenv.Postgres(t)
	cfg, err := pgxpool.ParseConfig(s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// tables are st's table names as options.
func tables(st *stacktest.Stack) []sqllayer.Option {
	return []sqllayer.Option{sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events), sqllayer.WithVersionsTable(st.Versions)}
}

// pgxKind is the charge handler's transaction as a pgx team holds it: a
// pgx.Tx of the pool the tier is built on (idempgx.New), and in the atomic
// mode the execution's pgx.Tx (idempgx.TxFrom).
func pgxKind(t *testing.T, pool *pgxpool.Pool) behaviour.TxKind {
	// Any Layer of the pool adapts its transactions: it compares the
	// pool's configuration, whatever its tables.
	base, err := idempgx.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = base.Close() })
	return behaviour.TxKind{
		Name: "pgx.Tx",
		Layer: func(t *testing.T, st *stacktest.Stack) (idem.Layer, *sqllayer.Layer) {
			l, err := idempgx.New(pool, tables(st)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l, l.Layer
		},
		Run: func(ctx context.Context, _ *bun.DB, fn func(ctx context.Context, tx behaviour.ChargeTx) error) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			if err := fn(ctx, pgxCharge{tx: tx, idem: base.Tx(tx)}); err != nil {
				return err
			}
			return tx.Commit(ctx)
		},
		From: func(ctx context.Context, _ *bun.DB) (behaviour.ChargeTx, bool) {
			tx, ok := idempgx.TxFrom(ctx)
			if !ok {
				return nil, false
			}
			return pgxCharge{tx: tx, idem: base.Tx(tx)}, true
		},
	}
}

// pgxCharge runs the charge handler's statements on a pgx.Tx.
type pgxCharge struct {
	tx   pgx.Tx
	idem sqllayer.Tx
}

func (p pgxCharge) Exec(ctx context.Context, query string, args ...any) error {
	_, err := p.tx.Exec(ctx, behaviour.Dollars(query), args...)
	return err
}

func (p pgxCharge) Idem() sqllayer.Tx { return p.idem }

// TestReservationRows runs the reservation rows of the handler-ending
// table, and the atomic rows, with the handler's transaction a pgx.Tx and
// the tier on the same pgx pool.
func TestReservationRows(t *testing.T) {
	pool := newPool(t)
	onPostgres := func(t *testing.T, fn func(t *testing.T, st *stacktest.Stack)) {
		t.Run("postgres", func(t *testing.T) {
			fn(t, stacktest.On(t, "postgres", testenv.AnyRedis(t), testenv.Postgres(t)))
		})
	}
	behaviour.RunReservationWith(t, func(store *tiered.Store, serve behaviour.Serve) (http.Handler, error) {
		mw, err := middleware.New(store, middleware.WithSingleTenant())
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("POST /charge/{id}", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serve(r.Context(), w, r.PathValue("id"))
		})))
		return mux, nil
	}, pgxKind(t, pool), onPostgres)
}
