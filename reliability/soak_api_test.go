//go:build unix

package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"
	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
	"github.com/idemkit/idem/middleware/idemgin"
	"github.com/idemkit/idem/reliability/internal/history"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The soak's payments API: what each child process serves, behind idem's
// middleware on Gin, Echo or chi, and what the parent's client sends it.
//
// A request charges an account. Its body is a charge; the Idempotency-Key
// header names the operation; two headers of the soak's own carry the
// call's ID (so that the handler can name the call whose handler ran) and
// the behaviour the handler is to show. Neither header is part of the
// fingerprint: a retry with the same body is the same request whatever it
// asks the handler to do.
const (
	hdrCall      = "X-Soak-Call"
	hdrBehaviour = "X-Soak-Behaviour"
)

// Routes: most keys live on the long route, whose Store keeps records for
// an hour; expiry keys live on the short route, whose Store keeps them for
// less than its local cache's TTL.
const (
	routeLong  = "long"
	routeShort = "short"
)

func routePath(route string) string { return "/" + route + "/charges" }

// behaviour is what a request asks of the handler.
type behaviour string

const (
	behaveOK        behaviour = ""           // 201 with the charge
	behaveSlow      behaviour = "slow"       // 201 after a long while, unless the work is cancelled
	behaveFail      behaviour = "fail"       // 502: the payment provider failed (the key is released)
	behavePanic     behaviour = "panic"      // a panic before anything is written
	behavePanicLate behaviour = "panic-late" // half the body sent (flushed), then a panic
	behaveMWPanic   behaviour = "mw-panic"   // Gin only: a middleware after idem's panics before the handler
)

// charge is the request body as the handler reads it, with encoding/json.
type charge struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Account  string `json:"account"`
}

// meaning is what a request means to the handler: its route and the charge
// as encoding/json decodes its body, written back canonically. The client
// computes it from its own body the same way, so a body that Go reads
// differently from what the fingerprint hashes shows as another meaning.
func meaning(route string, body []byte) (string, error) {
	var c charge
	if err := json.Unmarshal(body, &c); err != nil {
		return "", err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return route + " " + string(b), nil
}

// receipt is the handler's answer: unique per execution, so that every
// replay traces to the run that produced it.
type receipt struct {
	Exec    string `json:"exec"`
	Call    string `json:"call"`
	Key     string `json:"key"`
	Meaning string `json:"meaning"`
}

var (
	errProvider   = errors.New("soak: the payment provider failed (502)")
	errPanic      = errors.New("soak: the handler panicked")
	errMWPanic    = errors.New("soak: a middleware after idem's panicked")
	errWorkEnded  = errors.New("soak: the work's context ended")
	errBadRequest = errors.New("soak: unreadable charge")
)

// api is a child's handler of charges: it records each run of the handler
// (an execution) with the history recorder, and tracks the runs in
// progress for the nemesis, which pauses a process while one runs.
type api struct {
	rec   *history.Recorder
	slow  time.Duration // how long a slow handler takes
	lease time.Duration // the Stores' lease, which long work outlasts

	seed    uint64   // draws each execution's ending
	endings []string // the endings drawn (see soakEndings)
	// db and sql are the database and each route's deciding layer, for
	// the endings that complete the reservation in a transaction; ledger
	// is the table of their charges, a row per committed execution.
	db     *bun.DB
	sql    map[string]*sqllayer.Layer
	ledger string
	// atomic: every execution writes its charge in the transaction of
	// the atomic execution (sqllayer.TxFrom), whatever its ending, its
	// statement bounded by sqlTimeout, as a service bounds its own.
	atomic     bool
	sqlTimeout time.Duration

	mu      sync.Mutex     // guards running
	running map[string]int // keys whose handler runs, with how many runs
}

func newAPI(rec *history.Recorder, cfg childConfig) *api {
	return &api{rec: rec, slow: cfg.Slow, lease: cfg.Lease, seed: cfg.Seed, endings: cfg.Endings,
		ledger: cfg.Ledger, atomic: cfg.Atomic, sqlTimeout: cfg.SQLTimeout, sql: map[string]*sqllayer.Layer{}, running: map[string]int{}}
}

// runningKeys returns the keys whose handler runs now.
func (a *api) runningKeys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.running))
	for c := range a.running {
		out = append(out, c)
	}
	return out
}

func (a *api) track(key string, d int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running[key] += d
	if a.running[key] <= 0 {
		delete(a.running, key)
	}
}

// charge is the route's handler on net/http (chi, and Echo through
// echo.WrapHandler): it reads the body from the request.
func (a *api) charge(route string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, errBadRequest.Error(), http.StatusBadRequest)
			return
		}
		a.serve(route, w, r, body)
	}
}

// ginCharge is the route's handler on Gin. It reads the body as Gin
// handlers do that bind it more than once (c.ShouldBindBodyWith): from
// the copy kept in the context, by ginAudit here, else from the request.
func (a *api) ginCharge(route string) gin.HandlerFunc {
	return func(c *gin.Context) {
		var body []byte
		if cb, ok := c.Get(gin.BodyBytesKey); ok {
			body, _ = cb.([]byte)
		}
		if body == nil {
			var err error
			if body, err = io.ReadAll(c.Request.Body); err != nil {
				c.String(http.StatusBadRequest, errBadRequest.Error())
				return
			}
		}
		a.serve(route, c.Writer, c.Request, body)
	}
}

// ginAudit is a common Gin middleware, ahead of idem's: it reads the body
// (to log or audit it), keeps it in the context where
// c.ShouldBindBodyWith finds it, and gives the request a fresh reader of
// it for what comes next.
func ginAudit(c *gin.Context) {
	b, err := c.GetRawData()
	if err != nil {
		c.AbortWithStatus(http.StatusBadRequest)
		return
	}
	c.Set(gin.BodyBytesKey, b)
	c.Request.Body = io.NopCloser(bytes.NewReader(b))
	c.Next()
}

// serve is the handler, the same on every framework: it charges the
// account the body names, and records that run (an execution) first.
func (a *api) serve(route string, w http.ResponseWriter, r *http.Request, body []byte) {
	call := r.Header.Get(hdrCall)
	key, _ := middleware.ParseKeyHeader(r.Header.Values(middleware.DefaultKeyHeader))
	fp, err := meaning(route, body)
	if err != nil {
		http.Error(w, errBadRequest.Error(), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	x := a.rec.ExecFor(call, key, fp, "")
	s := slotOf(ctx)
	s.started(x)
	defer s.ended()
	x.Watch(ctx, func(cause error) bool { return errors.Is(cause, idem.ErrLeaseLost) })
	a.track(key, 1)
	defer a.track(key, -1)

	v, _ := json.Marshal(receipt{Exec: x.ID(), Call: call, Key: key, Meaning: fp})
	if a.atomic {
		// The charge first, in the execution's transaction: it commits
		// with the key's completion or not at all, however the work ends.
		if err := a.chargeAtomic(ctx, x.ID(), key, call); err != nil {
			x.EndAs(endAtomicCharge, nil, err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	switch behaviour(r.Header.Get(hdrBehaviour)) {
	case behaveSlow:
		a.long(endLong, a.slow, w, r, x, v)
	case behaveFail:
		x.EndAs(endRetryable, answerBytes(http.StatusBadGateway, jsonHeader, v), errProvider)
		respond(w, http.StatusBadGateway, v)
	case behavePanic:
		x.EndAs(endPanic, nil, errPanic)
		panic(errPanic)
	case behavePanicLate:
		x.EndAs(endPanicAfterFlush, nil, errPanic)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(v[:len(v)/2])
		_ = http.NewResponseController(w).Flush()
		panic(errPanic)
	default:
		a.end(a.draw(call, route), route, key, call, w, r, x, v)
	}
}

// endAtomicCharge is the ending of an atomic execution whose charge could
// not be written (its connection cut, its transaction gone).
const endAtomicCharge = "atomic-charge-failed"

// chargeAtomic writes the execution's ledger row in the atomic
// execution's transaction.
func (a *api) chargeAtomic(ctx context.Context, exec, key, call string) error {
	tx, ok := sqllayer.TxFrom(ctx)
	if !ok {
		return errors.New("soak: no atomic execution's transaction in the handler's context")
	}
	// A statement on a connection whose server stopped answering waits
	// for its context: the handler bounds its own, as the layer does.
	ctx, cancel := context.WithTimeout(ctx, a.sqlTimeout)
	defer cancel()
	_, err := a.db.NewRaw("INSERT INTO "+a.ledger+" (exec, key, call) VALUES (?, ?, ?)", exec, key, call).Conn(tx).Exec(ctx)
	return err
}

// slot is where a request's execution, if its handler runs, meets the
// Store's events about it: the Store hands its observer the leading
// request's context values, so an observer finds the slot of the
// execution an event is about.
type slot struct {
	mu      sync.Mutex
	x       *history.Running
	done    bool // the handler returned
	decided bool // a completion was recorded
	pending bool // the completion failed for now; the Store retries it
}

type slotKey struct{}

// withSlot returns r with a fresh slot in its context.
func withSlot(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), slotKey{}, &slot{}))
}

// slotOf returns ctx's slot, or a detached one (a request that came
// without, which the routes never let through).
func slotOf(ctx context.Context) *slot {
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		return s
	}
	return &slot{}
}

func (s *slot) started(x *history.Running) {
	s.mu.Lock()
	s.x = x
	s.mu.Unlock()
}

func (s *slot) ended() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// observe records what the Store's event e says of the slot's execution:
// its completion accepted (the Store reports a new result once the
// deciding tier kept it), refused (a lost lease once the handler
// returned), or pending (the deciding tier failed; the Store retries). It
// reports whether the slot is pending after the event.
//
// In the atomic mode a release after the handler returned is the
// execution's transaction rolled back (its commit failed or was never
// sent, the watch found it gone): the Store kept nothing of it, and its
// charge went with the transaction — the history's effects check holds
// the ledger to that. It is recorded as a refused completion.
func (s *slot) observe(e idem.Event, atomic bool) (pending bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.x == nil || !s.done || s.decided {
		return false
	}
	switch {
	case e.Kind == idem.EventNew:
		s.decided, s.pending = true, false
		s.x.Completion(history.CompletionAccepted)
	case e.Kind == idem.EventLeaseLost, atomic && e.Kind == idem.EventReleased:
		s.decided, s.pending = true, false
		s.x.Completion(history.CompletionRefused)
	case e.Kind == idem.EventTierError && e.Tier == idem.TierSQL:
		s.pending = true
	}
	return s.pending
}

// flushPending records the completion of a slot still pending when the
// child stops.
func (s *slot) flushPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending && !s.decided {
		s.decided = true
		s.x.Completion(history.CompletionPending)
	}
}

// router builds the child's API on its framework: the long and the short
// route, each behind its own Store's middleware, and the framework's own
// recovery middleware outside.
func (a *api) router(framework string, long, short *tiered.Store) (http.Handler, error) {
	stores := map[string]*tiered.Store{routeLong: long, routeShort: short}
	switch framework {
	case "gin":
		gin.SetMode(gin.ReleaseMode)
		gin.DefaultWriter, gin.DefaultErrorWriter = io.Discard, io.Discard
		g := gin.Default() // with gin.Recovery, as most Gin services run
		for route, st := range stores {
			mw, err := idemgin.Middleware(st, middleware.WithSingleTenant())
			if err != nil {
				return nil, err
			}
			g.POST(routePath(route), ginAudit, ginSlot, mw, ginLaterPanic, a.ginCharge(route))
		}
		return g, nil
	case "echo":
		e := echo.New()
		e.Logger.SetOutput(io.Discard)
		e.Use(echomw.Recover())
		for route, st := range stores {
			mw, err := idemecho.Middleware(st, middleware.WithSingleTenant())
			if err != nil {
				return nil, err
			}
			e.POST(routePath(route), echo.WrapHandler(a.charge(route)), echoSlot, mw)
		}
		return e, nil
	case "chi":
		c := chi.NewRouter()
		c.Use(chimw.Recoverer)
		for route, st := range stores {
			mw, err := middleware.New(st, middleware.WithSingleTenant())
			if err != nil {
				return nil, err
			}
			c.With(stdSlot, mw).Post(routePath(route), a.charge(route))
		}
		return c, nil
	}
	return nil, fmt.Errorf("soak: unknown framework %q", framework)
}

func ginSlot(c *gin.Context) {
	c.Request = withSlot(c.Request)
	c.Next()
}

// ginLaterPanic is a middleware after idem's that panics before the
// handler when the request asks for it: the Store recovers the panic and
// answers 500, and Gin's handler loop must not then run the handler.
func ginLaterPanic(c *gin.Context) {
	if behaviour(c.GetHeader(hdrBehaviour)) == behaveMWPanic {
		panic(errMWPanic)
	}
	c.Next()
}

func echoSlot(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.SetRequest(withSlot(c.Request()))
		return next(c)
	}
}

func stdSlot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, withSlot(r)) })
}
