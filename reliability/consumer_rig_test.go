//go:build unix

package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// jsRig is one JetStream scenario: an embedded nats-server with JetStream,
// a stream with a durable pull consumer, the shared Redis and database
// (the real ones when reachable, required under IDEM_REQUIRE_SERVICES=1;
// else a miniredis and a SQLite file, which the processes share over TCP
// and the file system), a ledger table, and the consumer processes.
type jsRig struct {
	t        *testing.T
	srv      *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	cons     jetstream.Consumer
	stream   string
	durable  string
	subject  string
	st       *stacktest.Stack
	admin    *bun.DB
	ledger   string
	dir      string
	marks    string
	child    consumerChildConfig // the template of every child's
	consumer string              // jsRigConfig.consumer
	procs    []*consumerProc
}

// jsRigConfig sets a rig's broker and consumer timings.
type jsRigConfig struct {
	ackWait       time.Duration // the durable consumer's AckWait
	dupWindow     time.Duration // the stream's Nats-Msg-Id window
	maxAckPending int
	handlers      int // subscriptions per consumer process
	lease, wait   time.Duration
	consumer      string // the children's Consumer: "" (idemwatermill over a Store) or consumerPgx
}

func defaultJSRig() jsRigConfig {
	return jsRigConfig{ackWait: time.Second, dupWindow: 2 * time.Minute, maxAckPending: 256, handlers: 4,
		lease: 2 * time.Second, wait: 1500 * time.Millisecond}
}

func newJSRig(t *testing.T, c jsRigConfig) *jsRig {
	t.Helper()
	r := &jsRig{t: t, dir: t.TempDir(), consumer: c.consumer}
	r.marks = filepath.Join(r.dir, "marks")
	if err := os.Mkdir(r.marks, 0o700); err != nil {
		t.Fatal(err)
	}
	// The backends first: a missing required service fails before a
	// broker starts.
	if c.consumer == consumerPgx {
		// idempgx is Postgres's alone: no SQLite fallback.
		r.st = stacktest.On(t, "real", testenv.AnyRedis(t), testenv.Postgres(t))
	} else {
		r.st = stacktest.Real(t)
	}
	if r.st.Redis.Mini != nil {
		r.st.Redis.Mini.ClockTTL(true) // leases lapse with the wall clock
	}
	r.admin = r.st.DB(t)
	r.ledger = testenv.Name("ledger")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.admin.ExecContext(ctx, "CREATE TABLE "+r.ledger+
		" (msg_id TEXT NOT NULL, node TEXT NOT NULL, delivery BIGINT NOT NULL, seq BIGINT NOT NULL)"); err != nil {
		t.Fatalf("create the ledger: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = r.admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+r.ledger)
	})

	srv := startNATS(t, filepath.Join(r.dir, "js"))
	r.srv = srv
	var err error
	r.nc, r.js = connectNATS(t, srv)
	name := strings.ToUpper(testenv.Name("orders"))
	r.stream, r.durable, r.subject = name, "ledger", strings.ToLower(name)+".placed"
	if _, err := r.js.CreateStream(ctx, jetstream.StreamConfig{Name: r.stream, Subjects: []string{r.subject},
		Storage: jetstream.FileStorage, Duplicates: c.dupWindow}); err != nil {
		t.Fatalf("create the stream: %v", err)
	}
	if r.cons, err = r.js.CreateOrUpdateConsumer(ctx, r.stream, jetstream.ConsumerConfig{
		Durable: r.durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: c.ackWait,
		MaxAckPending: c.maxAckPending, MaxDeliver: -1,
	}); err != nil {
		t.Fatalf("create the durable consumer: %v", err)
	}

	r.child = consumerChildConfig{
		NatsURL: srv.ClientURL(), Stream: r.stream, Durable: r.durable, Subject: r.subject, Handlers: c.handlers,
		SQLKind: r.st.SQL.Kind, SQLDSN: r.st.SQL.DSN,
		Prefix: r.st.Prefix, Records: r.st.Records, Events: r.st.Events, Versions: r.st.Versions, Ledger: r.ledger,
		Lease: c.lease, Wait: c.wait, Marks: r.marks, Consumer: c.consumer,
	}
	if o := r.st.Redis.Options; o != nil {
		r.child.RedisAddr, r.child.RedisUser, r.child.RedisPassword, r.child.RedisDB = o.Addr, o.Username, o.Password, o.DB
	}
	t.Logf("jetstream rig: embedded nats-server %s, SQL %s, Redis %s", srv.ClientURL(), r.st.SQL.Kind, r.st.Redis.Kind())
	return r
}

// startNATS starts an embedded nats-server with JetStream, its store in
// dir, stopped when the test ends.
func startNATS(t *testing.T, dir string) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	go srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server did not accept connections within 30 s")
	}
	return srv
}

// connectNATS connects to srv, until the test ends.
func connectNATS(t *testing.T, srv *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect to nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// start starts n consumer processes and waits until each runs its router.
func (r *jsRig) start(n int) {
	r.t.Helper()
	var ps []*consumerProc
	for range n {
		ps = append(ps, r.spawn())
	}
	for _, p := range ps {
		p.ready(r.t)
	}
}

// spawn starts one more consumer process, named after its rank.
func (r *jsRig) spawn() *consumerProc {
	r.t.Helper()
	cfg := r.child
	cfg.Node = fmt.Sprintf("c%d", len(r.procs)+1)
	cfg.Log = filepath.Join(r.dir, cfg.Node+".deliveries")
	p := startConsumerProc(r.t, r.dir, cfg)
	r.procs = append(r.procs, p)
	return p
}

// live returns the processes not killed.
func (r *jsRig) live() []*consumerProc {
	var out []*consumerProc
	for _, p := range r.procs {
		if !p.killed {
			out = append(out, p)
		}
	}
	return out
}

// proc returns the process named node.
func (r *jsRig) proc(node string) *consumerProc {
	for _, p := range r.procs {
		if p.node == node {
			return p
		}
	}
	r.t.Fatalf("no consumer process %q", node)
	return nil
}

// publish publishes p under the Nats-Msg-Id msgID and the Watermill UUID
// uuid, with its event ID as the event_id metadata, retrying what fails
// in the harness (the same Nats-Msg-Id: the stream keeps one copy).
func (r *jsRig) publish(p consumerPayload, msgID, uuid string) *jetstream.PubAck {
	r.t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		r.t.Fatal(err)
	}
	m := nats.NewMsg(r.subject)
	m.Data = data
	m.Header.Set(wmnats.WatermillUUIDHdr, uuid)
	m.Header.Set(mdEventID, p.ID)
	m.Header.Set(nats.MsgIdHdr, msgID)
	var last error
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ack, err := r.js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return ack
		}
		last = err
		time.Sleep(100 * time.Millisecond) // the harness's retry
	}
	r.t.Fatalf("publish %s: %v", p.ID, last)
	return nil
}

// info returns the durable consumer's state.
func (r *jsRig) info() *jetstream.ConsumerInfo {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ci, err := r.cons.Info(ctx)
	if err != nil {
		r.t.Fatalf("consumer info: %v", err)
	}
	return ci
}

// drained reports whether the consumer has delivered every message of the
// stream and holds no delivery unacknowledged.
func drained(ci *jetstream.ConsumerInfo) bool {
	return ci.NumPending == 0 && ci.NumAckPending == 0 && ci.NumRedelivered == 0
}

// waitDrained waits until the consumer is drained, failing after d.
func (r *jsRig) waitDrained(d time.Duration) *jetstream.ConsumerInfo {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ci := r.info()
		if drained(ci) {
			return ci
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the consumer did not drain within %v: %d pending, %d unacked, %d redelivered\n%s",
				d, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, r.logTails())
		}
		time.Sleep(50 * time.Millisecond) // until the consumers ack
	}
}

// stop stops every live process cleanly: a child that exits with an
// error (a race report under -race) fails the test.
func (r *jsRig) stop() {
	r.t.Helper()
	for _, p := range r.live() {
		p.exit(r.t)
	}
}

func (r *jsRig) logTails() string {
	var b strings.Builder
	for _, p := range r.procs {
		fmt.Fprintf(&b, "--- %s (killed=%v):\n%s\n", p.node, p.killed, p.logTail())
	}
	return b.String()
}

// waitMark waits until a child creates the marker what-id, and returns
// the node that did.
func (r *jsRig) waitMark(what, id string) string {
	r.t.Helper()
	path := filepath.Join(r.marks, what+"-"+id)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no consumer ran %s's first run within a minute\n%s", id, r.logTails())
		}
		time.Sleep(10 * time.Millisecond) // until a consumer takes the message
	}
}

type ledgerRow struct {
	msg, node     string
	delivery, seq uint64
}

func (r *jsRig) ledgerRows() []ledgerRow {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := r.admin.QueryContext(ctx, "SELECT msg_id, node, delivery, seq FROM "+r.ledger)
	if err != nil {
		r.t.Fatalf("read the ledger: %v", err)
	}
	defer q.Close()
	var out []ledgerRow
	for q.Next() {
		var l ledgerRow
		if err := q.Scan(&l.msg, &l.node, &l.delivery, &l.seq); err != nil {
			r.t.Fatalf("read the ledger: %v", err)
		}
		out = append(out, l)
	}
	if err := q.Err(); err != nil {
		r.t.Fatalf("read the ledger: %v", err)
	}
	return out
}

// effectCount counts the ledger's rows.
func (r *jsRig) effectCount() int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	if err := r.admin.QueryRowContext(ctx, "SELECT count(*) FROM "+r.ledger).Scan(&n); err != nil {
		r.t.Fatalf("count the ledger: %v", err)
	}
	return n
}

// completedKeys counts the idem records that are completed; with
// consumerPgx, which keeps no records, the events marked processed.
func (r *jsRig) completedKeys() int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	if r.consumer == consumerPgx {
		if err := r.admin.QueryRowContext(ctx, "SELECT count(*) FROM "+r.st.Events).Scan(&n); err != nil {
			r.t.Fatalf("count the processed events: %v", err)
		}
		return n
	}
	if err := r.admin.QueryRowContext(ctx, "SELECT count(*) FROM "+r.st.Records+" WHERE state = ?", int(idem.StateCompleted)).Scan(&n); err != nil {
		r.t.Fatalf("count the completed keys: %v", err)
	}
	return n
}

// deliveries reads every process's delivery log. A process killed in the
// middle of a write may leave a torn last line: it is left out.
func (r *jsRig) deliveries() []deliveryEvent {
	r.t.Helper()
	var out []deliveryEvent
	for _, p := range r.procs {
		b, err := os.ReadFile(p.cfg.Log)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			r.t.Fatal(err)
		}
		lines := bytes.Split(b, []byte("\n"))
		for i, line := range lines {
			if len(line) == 0 {
				continue
			}
			var ev deliveryEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				if i == len(lines)-1 && p.killed {
					continue // torn by the kill
				}
				r.t.Fatalf("delivery log of %s, line %d: %v", p.node, i+1, err)
			}
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b deliveryEvent) int { return int(a.At - b.At) })
	return out
}

// consumerProc is a consumer child seen from the parent.
type consumerProc struct {
	node   string
	cfg    consumerChildConfig
	log    string // its stderr
	out    string // its stdout
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan struct{}
	err    error
	killed bool
}

func startConsumerProc(t *testing.T, dir string, cfg consumerChildConfig) *consumerProc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &consumerProc{node: cfg.Node, cfg: cfg, log: filepath.Join(dir, cfg.Node+".log"),
		out: filepath.Join(dir, cfg.Node+".out"), done: make(chan struct{})}
	stdout, err := os.Create(p.out)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), consumerChildEnv+"="+string(raw))
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start consumer %s: %v", cfg.Node, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// ready waits until the child runs its router.
func (p *consumerProc) ready(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if f, err := os.Open(p.out); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if sc.Text() == consumerReady {
					_ = f.Close()
					return
				}
			}
			_ = f.Close()
		}
		select {
		case <-p.done:
			t.Fatalf("consumer %s exited before it ran: %v\n%s", p.node, p.err, p.logTail())
		case <-time.After(20 * time.Millisecond): // the child is starting
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s did not run within a minute\n%s", p.node, p.logTail())
		}
	}
}

// kill ends the child with SIGKILL and reaps it; it is also the cleanup of
// every child, on every path.
func (p *consumerProc) kill() {
	select {
	case <-p.done:
	default:
		p.killed = true
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.stdin.Close()
}

// reap waits for a child that kills itself, and marks it killed.
func (p *consumerProc) reap(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		p.killed = true
	case <-time.After(60 * time.Second):
		t.Fatalf("consumer %s did not die within a minute", p.node)
	}
}

// exit stops the child cleanly and waits until it has.
func (p *consumerProc) exit(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "exit\n"); err != nil {
		t.Errorf("consumer %s: %v", p.node, err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Errorf("consumer %s did not exit within a minute", p.node)
		p.kill()
	}
	if p.err != nil && !p.killed {
		t.Errorf("consumer %s: %v\n%s", p.node, p.err, p.logTail())
	}
}

func (p *consumerProc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}
