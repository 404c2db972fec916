package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/examples/pgxsqlc/db"
	"github.com/idemkit/idem/idempgx"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/tiered"
)

// newService builds the service on a schema of its own on the test's
// Postgres (the team's tables from db/schema.sql, idem's from Init), so
// that the sqlc queries' table names are the team's and no other test
// sees them. The schema is dropped when the test ends.
func newService(t *testing.T) *service {
	t.Helper()
	ctx := context.Background()
	dsn := testenv.Postgres(t).DSN
	schema := testenv.Name("pgxsqlc")
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer a.Close()
		if _, err := a.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ddl, err := os.ReadFile("db/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, string(ddl)); err != nil {
		t.Fatal(err)
	}
	sql, err := idempgx.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sql.Close() })
	if err := sql.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return &service{pool: pool, queries: db.New(pool), sql: sql}
}

// router is the service's router on a Store over its tier, atomic or not.
func (s *service) router(t *testing.T, atomic bool) http.Handler {
	t.Helper()
	store, err := tiered.New(tiered.WithSQL(s.sql), tiered.WithAtomic(atomic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h, err := s.newRouter(store, atomic)
	if err != nil {
		t.Fatal(err)
	}
	return h
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
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM payment WHERE external_payment_id = $1", ext).Scan(&n); err != nil {
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
			s := newService(t)
			h := s.router(t, atomic)
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
