//go:build unix

package reliability_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/clock"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/reliability/internal/history"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// A child is one service instance of the soak, in a process of its own:
// the test binary run again with soakChildEnv set to its childConfig
// (TestMain hands it to runSoakChild). It serves the payments API on one
// framework over two Stores, writes the executions to a history file of
// its own, prints its two addresses on one line of stdout, and takes
// commands on an admin listener. It exits when told to, or at once when
// its stdin closes: the parent is gone.

func init() { soakChild = runSoakChild }

// childConfig is what the parent tells a child.
type childConfig struct {
	Node      string // the history's node name: one per process
	Framework string // gin, echo or chi
	History   string // the file the child writes its events to

	DSN           string   // Postgres through the parent's fault proxy
	SentinelAddrs []string // the Sentinel the Redis clients ask for the master
	MasterName    string
	Prefix        string
	Records       string
	Events        string
	Versions      string

	Lease, Wait, RedisTimeout, SQLTimeout time.Duration
	LongRetention, ShortRetention         time.Duration
	Slow                                  time.Duration // how long a slow handler takes

	Seed    uint64   // draws each execution's ending
	Endings []string // the endings drawn
	Ledger  string   // the table of the charges committed with the key's record
	Atomic  bool     // the Stores in atomic mode: every execution charges in its transaction
}

// childReady is the line a child prints once it serves.
const childReady = "SOAK-CHILD api=%s admin=%s\n"

// child is a running child.
type child struct {
	cfg  childConfig
	file *os.File
	rec  *history.Recorder
	api  *api

	db     *bun.DB
	rdb    *redis.Client
	sqls   []*faultlayer.Layer
	rls    []*redislayer.Layer
	stores []*tiered.Store

	apiSrv, adminSrv *http.Server
	apiLn, adminLn   net.Listener
	exit             chan struct{}
	exitOnce         sync.Once

	mu      sync.Mutex // guards pending and errs
	pending map[*slot]bool
	errs    map[string]int // tier errors by tier and text, logged at the end
}

func runSoakChild(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "soak child: config:", err)
		return 2
	}
	go func() { // the parent is gone when stdin closes: so is the child
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	before := goleak.IgnoreCurrent()
	c, err := startChild(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak child:", err)
		return 2
	}
	fmt.Printf(childReady, c.apiLn.Addr(), c.adminLn.Addr())
	<-c.exit
	if err := c.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "soak child: stop:", err)
		return 1
	}
	// Every Store, layer, client and server the child started is stopped:
	// nothing of theirs runs on. Except pgx's closing of a connection it
	// gave up on (a black-holed one): that runs in the background, bounded
	// by its own deadlines, and outlives the pool.
	if err := goleak.Find(before, goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn.(*PgConn).asyncClose.func1")); err != nil {
		fmt.Fprintln(os.Stderr, "soak child:", err)
		return 1
	}
	return 0
}

func startChild(cfg childConfig) (*child, error) {
	f, err := os.OpenFile(cfg.History, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	c := &child{cfg: cfg, file: f, exit: make(chan struct{}), pending: map[*slot]bool{}, errs: map[string]int{}}
	c.rec = history.NewRecorder(f, cfg.Node, nil)
	c.api = newAPI(c.rec, cfg)

	sqldb, err := sql.Open("pgx", cfg.DSN)
	if err != nil {
		return nil, err
	}
	sqldb.SetMaxOpenConns(8) // the server is shared
	c.db = bun.NewDB(sqldb, pgdialect.New())
	c.api.db = c.db
	c.rdb = redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: cfg.MasterName, SentinelAddrs: cfg.SentinelAddrs, ContextTimeoutEnabled: true,
	})
	redis.SetLogger(quiet{})
	for _, retention := range []time.Duration{cfg.LongRetention, cfg.ShortRetention} {
		sqlLayer, err := sqllayer.New(c.db, sqllayer.WithRecordsTable(cfg.Records),
			sqllayer.WithEventsTable(cfg.Events), sqllayer.WithVersionsTable(cfg.Versions))
		if err != nil {
			return nil, err
		}
		sl := faultlayer.New(sqlLayer)
		var tier idem.Layer = sl
		mode := []tiered.Option{tiered.WithRedisFallback(3, time.Second)}
		if cfg.Atomic {
			a, ok := sl.Atomic()
			if !ok {
				return nil, fmt.Errorf("soak child: the SQL layer cannot run atomic executions")
			}
			tier, mode = a, append(mode, tiered.WithAtomic(true))
		}
		route := routeLong
		if retention == cfg.ShortRetention {
			route = routeShort
		}
		c.api.sql[route] = sqlLayer
		rl, err := redislayer.New(c.rdb, redislayer.WithPrefix(cfg.Prefix), redislayer.WithTimeout(cfg.RedisTimeout))
		if err != nil {
			return nil, err
		}
		st, err := tiered.New(append(mode, tiered.WithSQL(tier), tiered.WithRedis(rl),
			tiered.WithLease(cfg.Lease), tiered.WithRetention(retention), tiered.WithWait(cfg.Wait),
			tiered.WithTimeouts(cfg.RedisTimeout, cfg.SQLTimeout),
			tiered.WithObserver(idem.ObserverFunc(c.observe)))...)
		if err != nil {
			return nil, err
		}
		c.sqls, c.rls, c.stores = append(c.sqls, sl), append(c.rls, rl), append(c.stores, st)
	}
	h, err := c.api.router(cfg.Framework, c.stores[0], c.stores[1])
	if err != nil {
		return nil, err
	}
	if c.apiLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if c.adminLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	c.apiSrv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	c.adminSrv = &http.Server{Handler: c.adminMux(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.apiSrv.Serve(c.apiLn) }()
	go func() { _ = c.adminSrv.Serve(c.adminLn) }()
	return c, nil
}

// observe is the Stores' observer: it hands each event to the slot of
// the execution it is about, found in the leading request's values.
func (c *child) observe(ctx context.Context, e idem.Event) {
	if e.Kind == idem.EventTierError {
		c.mu.Lock()
		c.errs[fmt.Sprintf("%v: %v", e.Tier, e.Err)]++
		c.mu.Unlock()
	}
	s, ok := ctx.Value(slotKey{}).(*slot)
	if !ok {
		return
	}
	pending := s.observe(e, c.cfg.Atomic)
	c.mu.Lock()
	if pending {
		c.pending[s] = true
	} else {
		delete(c.pending, s)
	}
	c.mu.Unlock()
}

// adminMux serves the parent's commands.
func (c *child) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /running", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(c.api.runningKeys())
	})
	mux.HandleFunc("GET /stacks", func(w http.ResponseWriter, _ *http.Request) {
		// Every goroutine of the library's, for a failed run's report.
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "idemkit/idem/") && !strings.Contains(g, "adminMux") {
				_, _ = io.WriteString(w, g+"\n\n")
			}
		}
	})
	mux.HandleFunc("POST /skew", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		clock.Skew(d)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /slow-completions", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, l := range c.sqls {
			l.Delay(d, faultlayer.Complete)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /exit", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		c.exitOnce.Do(func() { close(c.exit) })
	})
	return mux
}

// stop ends the child cleanly: no new requests, the Stores closed (which
// ends their background completions), the completions still pending
// recorded, and the history file closed.
func (c *child) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var errs []error
	errs = append(errs, c.apiSrv.Shutdown(ctx), c.adminSrv.Shutdown(ctx))
	for _, s := range c.stores {
		errs = append(errs, s.Close())
	}
	c.mu.Lock()
	for s := range c.pending {
		s.flushPending()
	}
	for e, n := range c.errs {
		fmt.Fprintf(os.Stderr, "tier error %dx: %s\n", n, e)
	}
	c.mu.Unlock()
	for _, l := range c.rls {
		errs = append(errs, l.Close())
	}
	errs = append(errs, c.rdb.Close(), c.db.Close(), c.rec.Err(), c.file.Close())
	return errors.Join(errs...)
}
