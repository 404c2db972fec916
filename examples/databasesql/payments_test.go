package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/idemkit/idem/examples/databasesql/db"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// open opens the test's database with the team's tables in it: Postgres
// through pgx's database/sql driver, in a schema of its own that is
// dropped when the test ends, or, when no Postgres is at hand (and
// IDEM_REQUIRE_SERVICES is not set), an embedded SQLite file.
func open(t *testing.T) (*sql.DB, *bun.DB) {
	t.Helper()
	ctx := context.Background()
	if testenv.Required() || postgresAtHand() {
		dsn := testenv.Postgres(t).DSN
		schema := testenv.Name("dbsql")
		admin, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
				t.Error(err)
			}
			_ = admin.Close()
		})
		if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		sqldb, err := sql.Open("pgx", u.String())
		if err != nil {
			t.Fatal(err)
		}
		sqldb.SetMaxOpenConns(6)
		t.Cleanup(func() { _ = sqldb.Close() })
		apply(t, sqldb, "db/schema.sql")
		return sqldb, bun.NewDB(sqldb, pgdialect.New())
	}
	sqldb, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "payments.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqldb.Close() })
	apply(t, sqldb, "db/schema_sqlite.sql")
	return sqldb, bun.NewDB(sqldb, sqlitedialect.New())
}

// postgresAtHand reports whether the test's Postgres answers.
func postgresAtHand() bool {
	_, err := testenv.PostgresDSN()
	return err == nil
}

// apply runs the statements of the file at path.
func apply(t *testing.T, sqldb *sql.DB, path string) {
	t.Helper()
	ddl, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(string(ddl), ";") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := sqldb.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// newTestService is the service on the test's database, with its Store.
func newTestService(t *testing.T, atomic bool) (*service, http.Handler) {
	t.Helper()
	sqldb, idemDB := open(t)
	s, store, err := newService(context.Background(), sqldb, idemDB, atomic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h, err := s.newRouter(store, atomic)
	if err != nil {
		t.Fatal(err)
	}
	return s, h
}

// answer is a response's status and body.
type answer struct {
	status int
	body   string
}

func post(t *testing.T, h http.Handler, account, key string, p paymentRequest) answer {
	t.Helper()
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/payments", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Account", account)
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return answer{rec.Code, rec.Body.String()}
}

func (s *service) payments(t *testing.T, ext string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRowContext(context.Background(), "SELECT count(*) FROM payment WHERE external_payment_id = $1", ext).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func decode(t *testing.T, a answer) db.Payment {
	t.Helper()
	var p db.Payment
	if err := json.Unmarshal([]byte(a.body), &p); err != nil {
		t.Fatalf("%d %q: %v", a.status, a.body, err)
	}
	return p
}

// The seed's flow end to end, in both modes: a retry of a key replays;
// the same payment under a new key hits the payment's unique key and gets
// the payment that exists (200), another payment under the same provider
// id gets 409; each answer is the key's from then on; the settlement
// consumer books once however often its event is delivered.
func TestPaymentFlow(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		name := "reservation"
		if atomic {
			name = "atomic"
		}
		t.Run(name, func(t *testing.T) {
			s, h := newTestService(t, atomic)
			p := paymentRequest{
				OrderID:           "4b1c7f52-8f0e-4c1b-9d59-2f8a6f1c0a01",
				CustomerID:        "7d0e8a3c-1f2b-4e6d-8a9c-0b1d2e3f4a5b",
				Provider:          "stripe",
				ExternalPaymentID: "pi_3N" + name,
				Amount:            "125.50",
			}

			first := post(t, h, "acct-1", "key-1", p)
			if first.status != http.StatusCreated {
				t.Fatalf("first payment: %d %s", first.status, first.body)
			}
			created := decode(t, first)
			if created.Status != "authorized" || created.ExternalPaymentID != p.ExternalPaymentID {
				t.Fatalf("created %+v", created)
			}
			if again := post(t, h, "acct-1", "key-1", p); again != first {
				t.Fatalf("retry of key-1: %d %s, want the replay %d %s", again.status, again.body, first.status, first.body)
			}

			// The client lost its key: the payment's unique key answers.
			lost := post(t, h, "acct-1", "key-2", p)
			if lost.status != http.StatusOK || decode(t, lost).ID != created.ID {
				t.Fatalf("same payment, new key: %d %s; want 200 and payment %d", lost.status, lost.body, created.ID)
			}
			other := p
			other.Amount = "999.00"
			clash := post(t, h, "acct-1", "key-3", other)
			if clash.status != http.StatusConflict || !strings.Contains(clash.body, `"id":`) {
				t.Fatalf("another payment under the provider id: %d %s; want 409 with the existing payment", clash.status, clash.body)
			}
			// Each key keeps its answer.
			if again := post(t, h, "acct-1", "key-2", p); again != lost {
				t.Fatalf("retry of key-2: %d %s, want the replay of %d", again.status, again.body, lost.status)
			}
			if again := post(t, h, "acct-1", "key-3", other); again != clash {
				t.Fatalf("retry of key-3: %d %s, want the replay of the 409", again.status, again.body)
			}
			// key-3 with another body is refused by the middleware, never run.
			if misuse := post(t, h, "acct-1", "key-3", p); misuse.status != http.StatusUnprocessableEntity {
				t.Fatalf("key-3 with another body: %d %s; want 422", misuse.status, misuse.body)
			}
			// The scope is the account: another account's key-1 is its own.
			if n := s.payments(t, p.ExternalPaymentID); n != 1 {
				t.Fatalf("%d payments for %s, want 1", n, p.ExternalPaymentID)
			}
			if own := post(t, h, "acct-2", "key-1", p); own.status != http.StatusOK {
				t.Fatalf("acct-2's key-1: %d %s; want its own run, answered by the unique key (200)", own.status, own.body)
			}

			// The settlement consumer, delivered three times.
			ctx := context.Background()
			ev := settled{EventID: "evt_" + name, Provider: p.Provider, ExternalPaymentID: p.ExternalPaymentID}
			for i, want := range []bool{false, true, true} {
				dup, err := s.handleSettled(ctx, ev)
				if err != nil || dup != want {
					t.Fatalf("delivery %d: duplicate %v, %v; want %v", i, dup, err, want)
				}
			}
			n, err := s.queries.CountLedgerEntries(ctx, created.ID)
			if err != nil || n != 1 {
				t.Fatalf("%d ledger entries, %v; want 1", n, err)
			}
			// A failed run rolls its mark back: the redelivery runs again.
			bad := settled{EventID: "evt_unknown_" + name, Provider: p.Provider, ExternalPaymentID: "pi_missing"}
			if _, err := s.handleSettled(ctx, bad); err == nil {
				t.Fatal("a settlement of no payment: no error")
			}
			if dup, err := s.handleSettled(ctx, bad); dup || err == nil {
				t.Fatalf("its redelivery: duplicate %v, %v; want a second run that fails again", dup, err)
			}
		})
	}
}
