package behaviour

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

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

// mode is what the charge handler does with one request.
type mode int

const (
	commit     mode = iota // write the response, charge and complete in one transaction
	dieAfter               // commit, then the instance dies before answering
	cutAfter               // commit, then the client's connection is cut
	rollback               // complete, then roll back
	writeLater             // complete before writing anything
)

// charger is one test's business: a charges table beside idem's, and the
// handler that writes to it.
type charger struct {
	st    *stacktest.Stack
	db    *bun.DB
	table string

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
		err := c.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+c.table+" (id) VALUES (?)", id); err != nil {
				return err
			}
			if m != writeLater {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = fmt.Fprintf(w, `{"charge":%q,"token_seen":%v}`, id, res.Token() != "")
			}
			if err := sql.CompleteReservation(ctx, tx, res, nil); err != nil {
				return err
			}
			if m == rollback {
				return errors.New("the ledger refused after the completion")
			}
			return nil
		})
		if err != nil {
			c.note(id, err)
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

// RunReservation runs the rows of the reservation in the handler's
// transaction through adapt, on the real Redis and Postgres and on the
// embedded pair, each with several instances sharing them.
func RunReservation(t *testing.T, adapt ReservationAdapter) {
	t.Helper()
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) { runReservation(t, st, adapt) })
}

func runReservation(t *testing.T, st *stacktest.Stack, adapt ReservationAdapter) {
	c := &charger{st: st, db: st.DB(t), table: testenv.Name("charges"),
		modes: map[string]mode{}, hooks: map[string]func(){}, errs: map[string]error{}}
	if _, err := c.db.ExecContext(t.Context(), "CREATE TABLE "+c.table+" (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+c.table) })

	type instance struct {
		store *tiered.Store
		srv   *httptest.Server
	}
	start := func(t *testing.T) instance {
		sql := st.SQLLayer(t)
		store, err := tiered.New(tiered.WithRedis(st.RedisLayer(t)), tiered.WithSQL(sql), tiered.WithTimeouts(2*time.Second, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		h := must.Get(adapt(store, c.serve(sql)))(t)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return instance{store, srv}
	}
	post := func(t *testing.T, ctx context.Context, in instance, id string) (Result, error) {
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
	want := func(id string) string { return fmt.Sprintf(`{"charge":%q,"token_seen":true}`, id) }
	check := func(t *testing.T, got Result, id string) {
		t.Helper()
		if got.Status != http.StatusCreated || got.ContentType != "application/json" || got.Body != want(id) {
			t.Fatalf("got %d %q %q, want 201 application/json %s", got.Status, got.ContentType, got.Body, want(id))
		}
	}

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

	t.Run("rolled back, the retry runs again and commits once", func(t *testing.T) {
		a, b := start(t), start(t)
		id := "rb-" + testenv.Name("c")
		runs := c.runs.Load()
		c.set(id, rollback, nil)
		got, err := post(t, t.Context(), a, id)
		if err != nil || got.Status != http.StatusInternalServerError || got.ContentType != "application/problem+json" {
			t.Fatalf("rolled back: %+v, %v; want a 500 problem", got, err)
		}
		if err := c.err(id); !errors.Is(err, middleware.ErrResponseFrozen) {
			t.Fatalf("the write after the completion: %v, want ErrResponseFrozen", err)
		}
		if n := c.count(t, id); n != 0 {
			t.Fatalf("%d charges after the rollback", n)
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
