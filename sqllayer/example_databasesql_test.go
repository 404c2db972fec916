package sqllayer_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"

	"github.com/go-chi/chi/v5"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// DBTX is what sqlc's database/sql mode generates its queries on: a
// *sql.DB or a *sql.Tx.
type DBTX interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// Queries are the team's queries, in sqlc's database/sql shape.
type Queries struct{ db DBTX }

// WithTx returns the same queries in tx.
func (q *Queries) WithTx(tx *sql.Tx) *Queries { return &Queries{db: tx} }

// Payment is a row of the team's payment table.
type Payment struct {
	ID                int64  `json:"id"`
	Provider          string `json:"provider"`
	ExternalPaymentID string `json:"external_payment_id"`
	Amount            string `json:"amount"`
	Status            string `json:"status"`
}

// InsertPayment records an authorized payment.
func (q *Queries) InsertPayment(ctx context.Context, provider, externalID, amount string) (Payment, error) {
	p := Payment{Provider: provider, ExternalPaymentID: externalID, Amount: amount, Status: "authorized"}
	err := q.db.QueryRowContext(ctx, `INSERT INTO payment (provider, external_payment_id, amount, status)
		VALUES ($1, $2, $3, 'authorized') RETURNING id`, provider, externalID, amount).Scan(&p.ID)
	return p, err
}

// GetPaymentByExternalID reads the payment the provider knows by its id.
func (q *Queries) GetPaymentByExternalID(ctx context.Context, provider, externalID string) (Payment, error) {
	var p Payment
	err := q.db.QueryRowContext(ctx, `SELECT id, provider, external_payment_id, CAST(amount AS TEXT), status
		FROM payment WHERE provider = $1 AND external_payment_id = $2`, provider, externalID).
		Scan(&p.ID, &p.Provider, &p.ExternalPaymentID, &p.Amount, &p.Status)
	return p, err
}

// SettlePayment marks the payment settled.
func (q *Queries) SettlePayment(ctx context.Context, provider, externalID string) (int64, error) {
	var id int64
	err := q.db.QueryRowContext(ctx, `UPDATE payment SET status = 'settled'
		WHERE provider = $1 AND external_payment_id = $2 RETURNING id`, provider, externalID).Scan(&id)
	return id, err
}

// InsertLedgerEntry books the payment.
func (q *Queries) InsertLedgerEntry(ctx context.Context, paymentID int64) error {
	_, err := q.db.ExecContext(ctx, `INSERT INTO ledger_entry (payment_id) VALUES ($1)`, paymentID)
	return err
}

// paymentRequest is POST /payments' body.
type paymentRequest struct {
	Provider          string `json:"provider"`
	ExternalPaymentID string `json:"external_payment_id"`
	Amount            string `json:"amount"`
}

// accountKey is where the authentication puts the caller's account.
type accountKey struct{}

// The payments flow on database/sql, as sqlc's database/sql mode, sqlx and
// gorm run it: POST /payments behind the middleware, the payment and idem's
// completion in one *sql.Tx, the payment's own unique key under a
// savepoint, and a consumer whose processed event shares the *sql.Tx of
// its business update. On Postgres through pgx's database/sql driver when
// IDEM_POSTGRES_DSN names one, else on an embedded SQLite file.
func Example_databaseSQL() {
	ctx := context.Background()
	sqldb, dialect, cleanup := exampleDatabase()
	defer cleanup()

	// idem's tier on the team's *sql.DB: the same pool, no second one.
	sqlLayer, err := sqllayer.New(bun.NewDB(sqldb, dialect))
	if err != nil {
		log.Fatal(err)
	}
	if err := sqlLayer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(sqlLayer))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	queries := &Queries{db: sqldb}

	// insertOrExisting inserts the payment under a savepoint; on the
	// payment's own unique key it answers, in the same transaction, with
	// the payment that exists: 200 when it is the one asked for, 409 when
	// the provider's id names another payment.
	insertOrExisting := func(ctx context.Context, tx *sql.Tx, in paymentRequest) (int, any, error) {
		q := queries.WithTx(tx)
		var p Payment
		err := sqllayer.Savepoint(ctx, tx, func(ctx context.Context) error {
			var err error
			p, err = q.InsertPayment(ctx, in.Provider, in.ExternalPaymentID, in.Amount)
			return err
		})
		switch {
		case err == nil:
			return http.StatusCreated, p, nil
		case !sqllayer.IsUnique(err):
			return 0, nil, err
		}
		existing, err := q.GetPaymentByExternalID(ctx, in.Provider, in.ExternalPaymentID)
		if err != nil {
			return 0, nil, err
		}
		a, _ := new(big.Rat).SetString(existing.Amount)
		b, _ := new(big.Rat).SetString(in.Amount)
		if a == nil || b == nil || a.Cmp(b) != 0 {
			return http.StatusConflict, existing, nil
		}
		return http.StatusOK, existing, nil
	}

	createPayment := func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var in paymentRequest
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "malformed payment", http.StatusBadRequest)
			return
		}
		res, _ := idem.ReservationFrom(ctx) // always there behind the middleware
		tx, err := sqldb.BeginTx(ctx, nil)
		if err != nil {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		defer tx.Rollback()
		status, body, err := insertOrExisting(ctx, tx, in)
		if err != nil {
			http.Error(w, "payment failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
		// Last, in the same *sql.Tx: stores the response written.
		if err := sqlLayer.CompleteReservation(ctx, tx, res, nil); err != nil {
			return // nothing commits: the client gets a 500, its retry runs
		}
		_ = tx.Commit()
	}

	guard, err := middleware.New(store, middleware.WithScope(middleware.ScopeFromContext(accountKey{})))
	if err != nil {
		log.Fatal(err)
	}
	router := chi.NewRouter()
	router.Use(func(next http.Handler) http.Handler { // the team's authentication
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, r.Header.Get("X-Account"))))
		})
	})
	router.With(guard).Post("/payments", createPayment)

	// handleSettled marks the event processed in the *sql.Tx of the
	// business update: a redelivery finds it processed and changes nothing.
	handleSettled := func(ctx context.Context, eventID, provider, externalID string) (duplicate bool, err error) {
		tx, err := sqldb.BeginTx(ctx, nil)
		if err != nil {
			return false, err
		}
		defer tx.Rollback()
		if dup, err := sqlLayer.MarkProcessed(ctx, tx, "settlements", eventID); err != nil || dup {
			return dup, err
		}
		q := queries.WithTx(tx)
		id, err := q.SettlePayment(ctx, provider, externalID)
		if err != nil {
			return false, err
		}
		if err := q.InsertLedgerEntry(ctx, id); err != nil {
			return false, err
		}
		return false, tx.Commit()
	}

	post := func(key, amount string) {
		body, _ := json.Marshal(paymentRequest{Provider: "stripe", ExternalPaymentID: "pi_1", Amount: amount})
		req := httptest.NewRequest(http.MethodPost, "/payments", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Account", "acct-1")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		var p Payment
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		fmt.Printf("%s, amount %s: %d, payment %d\n", key, amount, rec.Code, p.ID)
	}
	post("key-1", "125.50") // the payment
	post("key-1", "125.50") // its retry: the replay
	post("key-2", "125.50") // the same payment under a new key: the unique key answers
	post("key-3", "999.00") // another payment under the provider's id
	for range 2 {
		dup, err := handleSettled(ctx, "evt-1", "stripe", "pi_1")
		fmt.Println("settlement: duplicate", dup, err)
	}
	var entries int
	_ = sqldb.QueryRowContext(ctx, "SELECT count(*) FROM ledger_entry").Scan(&entries)
	fmt.Println("ledger entries:", entries)
	// Output:
	// key-1, amount 125.50: 201, payment 1
	// key-1, amount 125.50: 201, payment 1
	// key-2, amount 125.50: 200, payment 1
	// key-3, amount 999.00: 409, payment 1
	// settlement: duplicate false <nil>
	// settlement: duplicate true <nil>
	// ledger entries: 1
}

// exampleDatabase opens the example's database with the team's tables in
// it: on Postgres (pgx's database/sql driver) a schema of its own, else a
// SQLite file; cleanup drops what it made.
func exampleDatabase() (*sql.DB, schema.Dialect, func()) {
	if dsn, err := testenv.PostgresDSN(); err == nil {
		name := testenv.Name("example")
		admin, err := sql.Open("pgx", dsn)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := admin.Exec("CREATE SCHEMA " + name); err != nil {
			log.Fatal(err)
		}
		cfg, err := pgxConfigWithSearchPath(dsn, name)
		if err != nil {
			log.Fatal(err)
		}
		sqldb, err := sql.Open("pgx", cfg)
		if err != nil {
			log.Fatal(err)
		}
		sqldb.SetMaxOpenConns(testenv.MaxTestConns)
		mustExec(sqldb, `CREATE TABLE payment (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			provider text NOT NULL, external_payment_id text NOT NULL, amount numeric(19,4) NOT NULL,
			status text NOT NULL, UNIQUE (provider, external_payment_id))`,
			`CREATE TABLE ledger_entry (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			payment_id bigint NOT NULL REFERENCES payment (id))`)
		return sqldb, pgdialect.New(), func() {
			_ = sqldb.Close()
			_, _ = admin.Exec("DROP SCHEMA " + name + " CASCADE")
			_ = admin.Close()
		}
	} else if testenv.Required() {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "idem")
	if err != nil {
		log.Fatal(err)
	}
	sqldb, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "payments.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	mustExec(sqldb, `CREATE TABLE payment (id INTEGER PRIMARY KEY, provider TEXT NOT NULL,
		external_payment_id TEXT NOT NULL, amount NUMERIC NOT NULL, status TEXT NOT NULL,
		UNIQUE (provider, external_payment_id))`,
		`CREATE TABLE ledger_entry (id INTEGER PRIMARY KEY, payment_id INTEGER NOT NULL REFERENCES payment (id))`)
	return sqldb, sqlitedialect.New(), func() { _ = sqldb.Close(); _ = os.RemoveAll(dir) }
}

// pgxConfigWithSearchPath returns dsn with its connections' search_path
// set to schema.
func pgxConfigWithSearchPath(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func mustExec(db *sql.DB, stmts ...string) {
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			log.Fatal(errors.Join(fmt.Errorf("%.40s…", s), err))
		}
	}
}
