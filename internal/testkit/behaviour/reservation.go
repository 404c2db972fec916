package behaviour

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// Serve is the route of the reservation rows: the handler of POST
// /charge/{id}, given the context the framework's handler reads (in Gin
// c.Request.Context(), in Echo c.Request().Context()), its writer and the
// path's id.
type Serve func(ctx context.Context, w http.ResponseWriter, id string)

// ReservationAdapter builds an app with store's middleware in front of
// POST /charge/{id}, which calls serve.
type ReservationAdapter func(store *tiered.Store, serve Serve) (http.Handler, error)

// RunReservation runs the rows of the reservation in the handler's
// transaction through adapt, on the real Redis and Postgres and on the
// embedded pair, each with several instances sharing them; then again with
// the Stores in the atomic mode (see runAtomicReservation).
func RunReservation(t *testing.T, adapt ReservationAdapter) {
	t.Helper()
	RunReservationWith(t, adapt, BunTx, stacktest.Each)
}

// RunReservationWith runs the rows of RunReservation with the handler's
// transaction of kind, on each stack each gives: the reservation's
// completion and the atomic mode's transaction in that type.
func RunReservationWith(t *testing.T, adapt ReservationAdapter, kind TxKind, each func(t *testing.T, fn func(t *testing.T, st *stacktest.Stack))) {
	t.Helper()
	each(t, func(t *testing.T, st *stacktest.Stack) {
		t.Run("default", func(t *testing.T) { runReservation(t, newCharger(t, st, kind, false), adapt) })
		t.Run("atomic", func(t *testing.T) { runAtomicReservation(t, newCharger(t, st, kind, true), adapt) })
	})
}

// newCharger creates the business tables of one run of the rows.
func newCharger(t *testing.T, st *stacktest.Stack, kind TxKind, atomic bool) *charger {
	c := &charger{st: st, db: st.DB(t), table: testenv.Name("charges"), kids: testenv.Name("charge_kids"), atomic: atomic, kind: kind,
		modes: map[string]mode{}, hooks: map[string]func(){}, errs: map[string]error{}}
	c.sqlite = c.db.Dialect().Name() == dialect.SQLite
	c.mysql = c.db.Dialect().Name() == dialect.MySQL
	parents := testenv.Name("charge_parents")
	kids := "CREATE TABLE " + c.kids + " (id VARCHAR(64) PRIMARY KEY, parent VARCHAR(64) REFERENCES " + parents + " (id) DEFERRABLE INITIALLY DEFERRED)"
	if c.mysql {
		// MariaDB checks a foreign key at each statement, never at COMMIT.
		kids = "CREATE TABLE " + c.kids + " (id VARCHAR(64) PRIMARY KEY, parent VARCHAR(64))"
	}
	for _, ddl := range []string{
		"CREATE TABLE " + c.table + " (id VARCHAR(64) PRIMARY KEY)",
		"CREATE TABLE " + parents + " (id VARCHAR(64) PRIMARY KEY)",
		kids,
	} {
		if _, err := c.db.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, table := range []string{c.kids, parents, c.table} {
			_, _ = c.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
		}
	})
	return c
}

// instance is one service instance of the rows: a Store and a server.
type instance struct {
	store *tiered.Store
	srv   *httptest.Server
}

// start starts an instance over c's stack, atomic when c is.
func (c *charger) start(t *testing.T, adapt ReservationAdapter) instance {
	var (
		tier idem.Layer
		sql  *sqllayer.Layer
	)
	if c.kind.Layer != nil {
		tier, sql = c.kind.Layer(t, c.st)
	} else {
		sql = c.st.SQLLayer(t)
		tier = sql
	}
	store, err := tiered.New(tiered.WithRedis(c.st.RedisLayer(t)), tiered.WithSQL(tier), tiered.WithTimeouts(2*time.Second, 10*time.Second),
		tiered.WithAtomic(c.atomic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := must.Get(adapt(store, c.serve(sql)))(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return instance{store, srv}
}

// post sends the charge id's request to in.
func post(t *testing.T, ctx context.Context, in instance, id string) (Result, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.srv.URL+"/charge/"+id, strings.NewReader(`{"amount":100}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "key-"+id)
	resp, err := in.srv.Client().Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Result{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}, err
}

// check fails t unless got is the charge id's response.
func check(t *testing.T, got Result, id string) {
	t.Helper()
	want := fmt.Sprintf(`{"charge":%q,"token_seen":true}`, id)
	if got.Status != http.StatusCreated || got.ContentType != "application/json" || got.Body != want {
		t.Fatalf("got %d %q %q, want 201 application/json %s", got.Status, got.ContentType, got.Body, want)
	}
}

func runReservation(t *testing.T, c *charger, adapt ReservationAdapter) {
	st := c.st
	start := func(t *testing.T) instance { return c.start(t, adapt) }

	t.Run("committed then the instance dies, the retry replays elsewhere", func(t *testing.T) {
		a, b := start(t), start(t)
		id := "die-" + testenv.Name("c")
		runs := c.runs.Load()
		c.set(id, dieAfter, func() { go func() { _ = a.store.Close() }() })
		got, err := post(t, t.Context(), a, id)
		if err != nil || got.Status != http.StatusServiceUnavailable {
			t.Fatalf("the dying instance answered %+v, %v; want 503", got, err)
		}
		for _, in := range []instance{b, b} {
			got, err := post(t, t.Context(), in, id)
			if err != nil {
				t.Fatal(err)
			}
			check(t, got, id)
		}
		c.wantOnce(t, id, runs)
	})

	t.Run("committed then the response is cut, the retry replays elsewhere", func(t *testing.T) {
		a, b := start(t), start(t)
		id := "cut-" + testenv.Name("c")
		runs := c.runs.Load()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// The handler cuts the client off after the commit and answers only
		// once the client has given up, so that the answer never races the
		// cut to the client.
		gone := make(chan struct{})
		c.set(id, cutAfter, func() {
			cancel()
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
			}
		})
		got, err := post(t, ctx, a, id)
		close(gone)
		if err == nil {
			t.Fatalf("the cut request got %+v", got)
		}
		got, err = post(t, t.Context(), b, id)
		if err != nil {
			t.Fatal(err)
		}
		check(t, got, id)
		c.wantOnce(t, id, runs)
	})

	t.Run("completing before writing is refused", func(t *testing.T) {
		a := start(t)
		id := "early-" + testenv.Name("c")
		c.set(id, writeLater, nil)
		got, err := post(t, t.Context(), a, id)
		if err != nil || got.Status != http.StatusInternalServerError {
			t.Fatalf("%+v, %v; want a 500, nothing kept", got, err)
		}
		if err := c.err(id); !errors.Is(err, idem.ErrConfig) || errors.Is(err, middleware.ErrResponseFrozen) {
			t.Fatalf("%v, want ErrConfig and a response still writable", err)
		}
	})

	// Endings that commit nothing: the first caller gets a 500 problem,
	// nothing is charged, and the retry runs again and commits once.
	for _, e := range []struct {
		name string
		m    mode
		err  func(error) bool // what the handler heard, or nil
	}{
		{"rolled back after completing", rollback, func(err error) bool { return errors.Is(err, middleware.ErrResponseFrozen) }},
		{"the transaction fails before completing, nothing written", failBefore, nil},
		{"written, then the transaction fails before completing", writeThenFail, nil},
		{"COMMIT fails", commitFails, func(err error) bool { return errors.Is(err, middleware.ErrResponseFrozen) }},
		{"the reservation taken and never completed", neverComplete, nil},
	} {
		t.Run(e.name+", the retry runs again and commits once", func(t *testing.T) {
			c.needsFailingCommit(t, e.m)
			a, b := start(t), start(t)
			id := fmt.Sprintf("end%d-%s", e.m, testenv.Name("c"))
			runs := c.runs.Load()
			c.set(id, e.m, nil)
			got, err := post(t, t.Context(), a, id)
			if err != nil || got.Status != http.StatusInternalServerError || got.ContentType != "application/problem+json" {
				t.Fatalf("%+v, %v; want a 500 problem", got, err)
			}
			if e.err != nil && !e.err(c.err(id)) {
				t.Fatalf("the handler heard %v", c.err(id))
			}
			if n := c.count(t, id); n != 0 {
				t.Fatalf("%d charges after nothing committed", n)
			}
			c.set(id, commit, nil)
			for _, in := range []instance{b, a} {
				got, err := post(t, t.Context(), in, id)
				if err != nil {
					t.Fatal(err)
				}
				check(t, got, id)
			}
			if n := c.runs.Load() - runs; n != 2 {
				t.Fatalf("the handler ran %d times, want 2", n)
			}
			if n := c.count(t, id); n != 1 {
				t.Fatalf("%d charges, want 1", n)
			}
		})
	}

	// Endings that commit once: every caller, the first included, gets
	// what committed.
	for _, e := range []struct {
		name string
		m    mode
		err  func(error) bool // what the handler heard
	}{
		{"completed twice with the same response", completeTwice, func(err error) bool { return err == nil }},
		// Behind the middleware the response written is the result: bytes
		// given beside it are refused before anything is written.
		{"completed again with other bytes", completeOther, func(err error) bool { return errors.Is(err, idem.ErrConfig) }},
		{"the response changed after completing", changeAfter, func(err error) bool { return errors.Is(err, middleware.ErrResponseFrozen) }},
	} {
		t.Run(e.name+", every caller gets what committed", func(t *testing.T) {
			a, b := start(t), start(t)
			id := fmt.Sprintf("end%d-%s", e.m, testenv.Name("c"))
			runs := c.runs.Load()
			c.set(id, e.m, nil)
			for _, in := range []instance{a, b, a} {
				got, err := post(t, t.Context(), in, id)
				if err != nil {
					t.Fatal(err)
				}
				check(t, got, id)
			}
			if !e.err(c.err(id)) {
				t.Fatalf("the handler heard %v", c.err(id))
			}
			c.wantOnce(t, id, runs)
		})
	}

	t.Run("a Store without SQL says what to do", func(t *testing.T) {
		id := "nosql-" + testenv.Name("c")
		store := MemoryStore(t)
		h := must.Get(adapt(store, c.serve(st.SQLLayer(t))))(t)
		srv := httptest.NewServer(h)
		defer srv.Close()
		runs := c.runs.Load()
		for range 2 { // nothing is kept: the retry runs again
			got, err := post(t, t.Context(), instance{store, srv}, id)
			if err != nil || got.Status != http.StatusInternalServerError || got.ContentType != "application/problem+json" {
				t.Fatalf("%+v, %v; want a 500 problem in place of the handler's response", got, err)
			}
		}
		if n := c.runs.Load() - runs; n != 2 {
			t.Fatalf("the handler ran %d times, want 2", n)
		}
		if err := c.err(id); !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "tiered.WithSQL") {
			t.Fatalf("%v, want ErrConfig naming tiered.WithSQL", err)
		}
	})
}
