//go:build unix

package reliability_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/idemkit/idem/idempgx"
	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// A consumer child is one consumer process of a JetStream scenario: the
// test binary run again with consumerChildEnv set to its
// consumerChildConfig. It runs a Watermill router whose handlers all pull
// from the scenario's durable consumer through watermill-nats, behind
// idemwatermill over a Store of its own on the shared Redis and database.
// Each handler writes its effect, a ledger row, in the transaction that
// completes the message's key (idemwatermill.Complete). Every delivery is
// written to the child's delivery log, one JSON line per event, in one
// write each, so that a line written before a SIGKILL is kept. It prints
// consumerReady once its router runs; it stops cleanly on the line "exit"
// on stdin, and at once when stdin closes (the parent is gone).
//
// What a message's handler does is said by its payload (consumerPayload):
// how long it works, whether its first delivery fails, whether its first
// run blocks until the process is killed (hold), whether its first run
// kills the process after its commit and before its ack (die). "First" is
// decided across processes by a marker file created with O_EXCL.

// consumerChildEnv holds a consumer child's configuration.
const consumerChildEnv = "IDEM_CONSUMER_CHILD"

// The child runs before TestMain: it is not a test run.
func init() {
	if raw := os.Getenv(consumerChildEnv); raw != "" {
		os.Exit(runConsumerChild(raw))
	}
}

// consumerReady is the line a child prints once its router runs.
const consumerReady = "CONSUMER-CHILD ready"

// consumerChildConfig is what the parent tells a consumer child.
type consumerChildConfig struct {
	Node     string
	NatsURL  string
	Stream   string
	Durable  string
	Subject  string
	Handlers int // subscriptions of the durable consumer, each a router handler

	SQLKind, SQLDSN string
	RedisAddr       string // "" for a Store without Redis
	RedisUser       string
	RedisPassword   string
	RedisDB         int
	Prefix          string
	Records         string
	Events          string
	Versions        string
	Ledger          string

	Lease, Wait time.Duration
	Log         string // the delivery log
	// Consumer is how the handler keeps a message's effect once: ""
	// through idemwatermill over a Store (the key completed in the
	// ledger's transaction), consumerPgx through idempgx's InTx (the
	// processed event marked in the ledger's pgx.Tx, no Store).
	Consumer string
	Marks    string // the directory of first-run markers
}

// consumerPayload is a message of the scenarios.
type consumerPayload struct {
	ID        string `json:"id"`                   // the event ID, as in the event_id metadata
	DelayMS   int    `json:"delay_ms,omitempty"`   // how long the handler works
	FailFirst bool   `json:"fail_first,omitempty"` // the first delivery's handler returns an error
	Hold      bool   `json:"hold,omitempty"`       // the first run blocks until the process is killed
	Die       bool   `json:"die,omitempty"`        // the first run kills its process after its commit
}

// deliveryEvent is one line of a delivery log.
type deliveryEvent struct {
	Node      string `json:"node"`
	Ev        string `json:"ev"` // "start" or "end"
	Msg       string `json:"msg"`
	Seq       uint64 `json:"seq"` // the stream sequence
	N         uint64 `json:"n"`   // JetStream's delivery count
	At        int64  `json:"at"`
	Ran       bool   `json:"ran,omitempty"`       // end: the handler ran (the key was claimed)
	Committed int64  `json:"committed,omitempty"` // end: when the handler's transaction committed
	Err       string `json:"err,omitempty"`       // end: the delivery was nacked with this error
}

// Metadata the child's unmarshaler adds from JetStream's own.
const (
	mdDelivered = "js_delivered"
	mdSeq       = "js_seq"
	mdEventID   = "event_id"
)

// consumerPgx is the Consumer of a child whose handler marks the event
// processed with idempgx on a pgxpool.
const consumerPgx = "idempgx"

type consumerChild struct {
	cfg    consumerChildConfig
	pool   *pgxpool.Pool  // consumerPgx
	pgxL   *idempgx.Layer // consumerPgx
	db     *bun.DB
	rdb    *redis.Client
	rl     *redislayer.Layer
	sqlL   *sqllayer.Layer
	store  *tiered.Store
	router *message.Router

	logMu sync.Mutex
	log   *os.File

	runs sync.Map // *message.Message → *deliveryRun
}

// deliveryRun is what the handler tells the delivery log's middleware.
// The handler runs on the Store's execution, which outlives a delivery
// whose context ends: its fields are guarded by mu.
type deliveryRun struct {
	mu        sync.Mutex
	ran       bool
	committed int64
}

func (d *deliveryRun) get() (bool, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ran, d.committed
}

func runConsumerChild(raw string) int {
	var cfg consumerChildConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "consumer child: config:", err)
		return 2
	}
	exit := make(chan struct{})
	go func() { // "exit" stops cleanly; EOF means the parent is gone
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "exit" {
				close(exit)
				return
			}
		}
		os.Exit(3)
	}()
	c, err := startConsumerChild(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer child:", err)
		return 2
	}
	fmt.Println(consumerReady)
	<-exit
	if err := c.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "consumer child: stop:", err)
		return 1
	}
	return 0
}

func startConsumerChild(cfg consumerChildConfig) (*consumerChild, error) {
	c := &consumerChild{cfg: cfg}
	var err error
	if c.log, err = os.OpenFile(cfg.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err != nil {
		return nil, err
	}
	if cfg.Consumer == consumerPgx {
		return c, c.startPgx()
	}
	switch cfg.SQLKind {
	case "postgres":
		sqldb, err := sql.Open("pgx", cfg.SQLDSN)
		if err != nil {
			return nil, err
		}
		sqldb.SetMaxOpenConns(8 + cfg.Handlers) // the server is shared
		c.db = bun.NewDB(sqldb, pgdialect.New())
	case "sqlite-file":
		sqldb, err := sql.Open("sqlite", cfg.SQLDSN)
		if err != nil {
			return nil, err
		}
		c.db = bun.NewDB(sqldb, sqlitedialect.New())
	default:
		return nil, fmt.Errorf("SQL kind %q: want postgres or sqlite-file", cfg.SQLKind)
	}
	if c.sqlL, err = sqllayer.New(c.db, sqllayer.WithRecordsTable(cfg.Records),
		sqllayer.WithEventsTable(cfg.Events), sqllayer.WithVersionsTable(cfg.Versions)); err != nil {
		return nil, err
	}
	opts := []tiered.Option{tiered.WithSQL(c.sqlL), tiered.WithLease(cfg.Lease), tiered.WithWait(cfg.Wait),
		tiered.WithTimeouts(time.Second, 10*time.Second)}
	if cfg.RedisAddr != "" {
		redis.SetLogger(quiet{})
		c.rdb = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, Username: cfg.RedisUser, Password: cfg.RedisPassword,
			DB: cfg.RedisDB, ContextTimeoutEnabled: true})
		if c.rl, err = redislayer.New(c.rdb, redislayer.WithPrefix(cfg.Prefix), redislayer.WithTimeout(time.Second)); err != nil {
			return nil, err
		}
		opts = append(opts, tiered.WithRedis(c.rl))
	}
	if c.store, err = tiered.New(opts...); err != nil {
		return nil, err
	}
	mw, err := idemwatermill.New(c.store, idemwatermill.WithConsumer("ledger"),
		idemwatermill.WithIdentity(idemwatermill.Metadata(mdEventID)))
	if err != nil {
		return nil, err
	}
	if err := c.startRouter(c.handle, mw); err != nil {
		return nil, err
	}
	return c, nil
}

// startRouter runs the child's router: cfg.Handlers subscriptions of the
// durable consumer, each a handler running handle behind the delivery
// log and mws.
func (c *consumerChild) startRouter(handle message.NoPublishHandlerFunc, mws ...message.HandlerMiddleware) error {
	cfg := c.cfg
	var err error
	logger := watermill.NopLogger{}
	if c.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 20 * time.Second}, logger); err != nil {
		return err
	}
	c.router.AddMiddleware(append([]message.HandlerMiddleware{c.logDeliveries}, mws...)...)
	for i := range cfg.Handlers {
		sub, err := wmjs.NewSubscriber(wmjs.SubscriberConfig{
			URL:    cfg.NatsURL,
			Logger: logger,
			// Longer than any handler runs: the broker's AckWait, not
			// the subscriber's, decides the redeliveries.
			AckWaitTimeout: time.Minute,
			ResourceInitializer: func(ctx context.Context, js jetstream.JetStream, _ string) (jetstream.Consumer, func(context.Context, watermill.LoggerAdapter), error) {
				cons, err := js.Consumer(ctx, cfg.Stream, cfg.Durable)
				return cons, nil, err
			},
			// Few messages buffered ahead of the handler, so that the
			// AckWait mostly runs while a message is handled.
			ConsumeOptions: []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(1)},
			Unmarshaler:    jsUnmarshaler{},
		})
		if err != nil {
			return err
		}
		c.router.AddConsumerHandler(fmt.Sprintf("%s-h%d", cfg.Node, i), cfg.Subject, sub, handle)
	}
	go func() {
		if err := c.router.Run(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "consumer child: router:", err)
			os.Exit(4)
		}
	}()
	<-c.router.Running()
	return nil
}

// jsUnmarshaler is watermill-nats's, with JetStream's delivery count and
// stream sequence added to the metadata for the delivery log.
type jsUnmarshaler struct{}

func (jsUnmarshaler) Unmarshal(msg jetstream.Msg) (*message.Message, error) {
	m, err := wmjs.DefaultUnmarshaler{}.Unmarshal(msg)
	if err != nil {
		return nil, err
	}
	if md, err := msg.Metadata(); err == nil {
		m.Metadata.Set(mdDelivered, strconv.FormatUint(md.NumDelivered, 10))
		m.Metadata.Set(mdSeq, strconv.FormatUint(md.Sequence.Stream, 10))
	}
	return m, nil
}

// logDeliveries is the outermost middleware: it writes each delivery's
// start and its end (acked, or nacked with the error) to the delivery log.
func (c *consumerChild) logDeliveries(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		n, _ := strconv.ParseUint(msg.Metadata.Get(mdDelivered), 10, 64)
		seq, _ := strconv.ParseUint(msg.Metadata.Get(mdSeq), 10, 64)
		ev := deliveryEvent{Node: c.cfg.Node, Ev: "start", Msg: msg.Metadata.Get(mdEventID), Seq: seq, N: n, At: time.Now().UnixNano()}
		c.write(ev)
		run := &deliveryRun{}
		c.runs.Store(msg, run)
		out, err := h(msg)
		c.runs.Delete(msg)
		ran, committed := run.get()
		ev.Ev, ev.At, ev.Ran, ev.Committed = "end", time.Now().UnixNano(), ran, committed
		if err != nil {
			ev.Err = err.Error()
		}
		c.write(ev)
		return out, err
	}
}

func (c *consumerChild) write(ev deliveryEvent) {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if _, err := c.log.Write(append(b, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "consumer child: delivery log:", err)
		os.Exit(5)
	}
}

// handle is the business handler: it runs only for a claimed key, and
// writes the ledger row and completes the key in one transaction.
func (c *consumerChild) handle(msg *message.Message) error {
	var p consumerPayload
	if err := json.Unmarshal(msg.Payload, &p); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	run, _ := c.runs.Load(msg)
	dr, _ := run.(*deliveryRun)
	if dr != nil {
		dr.mu.Lock()
		dr.ran = true
		dr.mu.Unlock()
	}
	n, _ := strconv.ParseUint(msg.Metadata.Get(mdDelivered), 10, 64)
	if p.FailFirst && n == 1 {
		return errors.New("the first delivery fails")
	}
	if p.Hold && c.first("hold", p.ID) {
		// Blocks until the parent kills this process; a parent that never
		// does leaves the message to the error after a minute.
		time.Sleep(time.Minute)
		return errors.New("held past a minute: the parent did not kill the process")
	}
	if p.DelayMS > 0 {
		time.Sleep(time.Duration(p.DelayMS) * time.Millisecond)
	}
	ctx := msg.Context()
	seq, _ := strconv.ParseUint(msg.Metadata.Get(mdSeq), 10, 64)
	err := c.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+c.cfg.Ledger+" (msg_id, node, delivery, seq) VALUES (?, ?, ?, ?)",
			p.ID, c.cfg.Node, n, seq); err != nil {
			return err
		}
		return idemwatermill.Complete(ctx, tx, c.sqlL)
	})
	if err != nil {
		return err
	}
	if dr != nil {
		dr.mu.Lock()
		dr.committed = time.Now().UnixNano()
		dr.mu.Unlock()
	}
	if p.Die && c.first("die", p.ID) {
		// Committed, not acked: the process dies here.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return nil
}

// startPgx starts a consumerPgx child: idem's SQL tier on a pgxpool
// (idempgx), no Store, and a router whose handler marks each event
// processed in the pgx.Tx of its ledger row.
func (c *consumerChild) startPgx() error {
	if c.cfg.SQLKind != "postgres" {
		return fmt.Errorf("consumer %s: SQL kind %q: want postgres", consumerPgx, c.cfg.SQLKind)
	}
	pc, err := pgxpool.ParseConfig(c.cfg.SQLDSN)
	if err != nil {
		return err
	}
	pc.MaxConns = int32(8 + c.cfg.Handlers) // the server is shared
	if c.pool, err = pgxpool.NewWithConfig(context.Background(), pc); err != nil {
		return err
	}
	if c.pgxL, err = idempgx.New(c.pool, sqllayer.WithRecordsTable(c.cfg.Records),
		sqllayer.WithEventsTable(c.cfg.Events), sqllayer.WithVersionsTable(c.cfg.Versions)); err != nil {
		return err
	}
	return c.startRouter(c.handlePgx)
}

// handlePgx is the business handler of a consumerPgx child: InTx marks
// the event processed and writes the ledger row in one pgx.Tx, or finds
// the event processed and writes nothing. The handler's work (and the
// hold) runs inside the transaction, with the mark's row lock held, so
// that a redelivery in flight on another process waits for its outcome,
// and a process killed there leaves its transaction to the server's
// rollback.
func (c *consumerChild) handlePgx(msg *message.Message) error {
	var p consumerPayload
	if err := json.Unmarshal(msg.Payload, &p); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	run, _ := c.runs.Load(msg)
	dr, _ := run.(*deliveryRun)
	setRan := func(ran bool) {
		if dr != nil {
			dr.mu.Lock()
			dr.ran = ran
			dr.mu.Unlock()
		}
	}
	n, _ := strconv.ParseUint(msg.Metadata.Get(mdDelivered), 10, 64)
	if p.FailFirst && n == 1 {
		return errors.New("the first delivery fails")
	}
	seq, _ := strconv.ParseUint(msg.Metadata.Get(mdSeq), 10, 64)
	dup, err := c.pgxL.InTx(msg.Context(), "ledger", p.ID, func(ctx context.Context, tx pgx.Tx) error {
		setRan(true)
		if p.Hold && c.first("hold", p.ID) {
			time.Sleep(time.Minute)
			return errors.New("held past a minute: the parent did not kill the process")
		}
		if p.DelayMS > 0 {
			time.Sleep(time.Duration(p.DelayMS) * time.Millisecond)
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+c.cfg.Ledger+" (msg_id, node, delivery, seq) VALUES ($1, $2, $3, $4)",
			p.ID, c.cfg.Node, int64(n), int64(seq))
		return err
	})
	if dup {
		// A run rolled back by a conflict, then a duplicate on the retry:
		// this delivery made no effect.
		setRan(false)
	}
	if err != nil {
		return err
	}
	if dup {
		return nil
	}
	if dr != nil {
		dr.mu.Lock()
		dr.committed = time.Now().UnixNano()
		dr.mu.Unlock()
	}
	if p.Die && c.first("die", p.ID) {
		// Committed, not acked: the process dies here.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return nil
}

// first reports whether this is the first run of what for id across the
// processes: the one that creates its marker file. The marker holds the
// node's name, for the parent to read.
func (c *consumerChild) first(what, id string) bool {
	f, err := os.OpenFile(filepath.Join(c.cfg.Marks, what+"-"+id), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	_, _ = f.WriteString(c.cfg.Node)
	_ = f.Close()
	return true
}

// stop closes the router (its handlers finish), the Store, and the rest.
func (c *consumerChild) stop() error {
	if c.cfg.Consumer == consumerPgx {
		errs := []error{c.router.Close(), c.pgxL.Close()}
		c.pool.Close()
		return errors.Join(append(errs, c.log.Close())...)
	}
	errs := []error{c.router.Close(), c.store.Close()}
	if c.rl != nil {
		errs = append(errs, c.rl.Close(), c.rdb.Close())
	}
	errs = append(errs, c.db.Close(), c.log.Close())
	return errors.Join(errs...)
}

// consumerRand is the parent's source of the scenarios' draws.
func consumerRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
