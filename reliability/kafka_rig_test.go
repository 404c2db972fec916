package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// The Kafka rig: a kfake cluster (franz-go's in-process implementation of
// the Kafka protocol: brokers, a group coordinator, committed offsets) on
// loopback ports, a consumer group whose members are franz-go clients, and
// the processed-event table and effects table on Postgres. Each member
// polls, runs each record's effect with sqllayer.InTx in the business
// transaction (the record's identity from its event_id header), and only
// then commits its offsets: the order the Kafka trap in the design calls
// for. A member dies between its transactions and its offset commit in two
// ways: it crashes (its connections cut: the coordinator drops it when its
// session times out) or it closes without committing (it leaves the group
// at once). Either way another member is handed its partitions from the
// last committed offsets and gets its records again.

// kafkaConsumer is the scope of the rig's processed events.
const kafkaConsumer = "payments"

// Group timings: short, so that a dead member's partitions move in a
// second or two rather than the defaults' 45 s session.
const (
	kafkaSession   = 1500 * time.Millisecond
	kafkaHeartbeat = 100 * time.Millisecond
)

// kafkaRig is one topic, one group and its members.
type kafkaRig struct {
	t       *testing.T
	cluster *kfake.Cluster
	topic   string
	group   string
	sql     *testenv.SQL
	admin   *bun.DB
	// pool is the members' connections: one pool, bounded, that the
	// members share (a member that dies leaves no connection open: its
	// transactions had committed), so that hundreds of deaths in a run
	// never take more of the shared server than it.
	pool    *bun.DB
	events  string // processed events
	effects string // one row per effect: the payment

	// die decides, after a member's poll was processed, whether it dies
	// before committing, and how (crash: connections cut).
	die func(m *kafkaMember, ids []string) (dies, crash bool)

	mu         sync.Mutex // guards the fields below
	members    []*kafkaMember
	spawned    int
	deliveries map[string]int // per partition/offset: how often processed
	dups       int            // deliveries InTx reported as duplicates
	deaths     map[string]int // crash / close
	errs       []error

	stopping atomic.Bool
	wg       sync.WaitGroup // the members' loops
}

// newKafkaRig starts a kfake cluster of three brokers with the topic of
// partitions, and the tables on Postgres (required under
// IDEM_REQUIRE_SERVICES=1).
func newKafkaRig(t *testing.T, partitions int32) *kafkaRig {
	t.Helper()
	pg := testenv.Postgres(t)
	r := &kafkaRig{t: t, sql: pg, topic: testenv.Name("payments"), group: testenv.Name("group"),
		events: testenv.Name("idem_kevt"), effects: testenv.Name("idem_keff"),
		deliveries: map[string]int{}, deaths: map[string]int{},
		die: func(*kafkaMember, []string) (bool, bool) { return false, false }}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, r.topic),
		kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	r.cluster = c
	t.Cleanup(c.Close)
	r.admin = pg.Open(t)
	r.pool = pg.Open(t)
	r.pool.SetMaxOpenConns(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := must.Get(sqllayer.New(r.admin, sqllayer.WithEventsTable(r.events)))(t).Init(ctx); err != nil {
		t.Fatalf("Init: %v", err)
	}
	if _, err := r.admin.ExecContext(ctx, "CREATE TABLE "+r.effects+" (event_id TEXT NOT NULL, member TEXT NOT NULL, part INT NOT NULL, off BIGINT NOT NULL)"); err != nil {
		t.Fatalf("create the effects table: %v", err)
	}
	t.Cleanup(func() {
		for _, table := range []string{r.events, r.effects} {
			_, _ = r.admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
		}
	})
	// Cleanups run last registered first: the members stop before the
	// cluster and the tables go.
	t.Cleanup(r.stop)
	return r
}

// client returns a franz-go client of the cluster with opts.
func (r *kafkaRig) client(opts ...kgo.Opt) *kgo.Client {
	r.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.cluster.ListenAddrs()...)}, opts...)...)
	if err != nil {
		r.t.Fatalf("kgo.NewClient: %v", err)
	}
	return cl
}

// publish produces one record per event ID, with its event_id header, and
// waits for the brokers' acks.
func (r *kafkaRig) publish(ids ...string) {
	r.t.Helper()
	cl := r.client(kgo.DefaultProduceTopic(r.topic))
	defer cl.Close()
	recs := make([]*kgo.Record, len(ids))
	for i, id := range ids {
		recs[i] = &kgo.Record{Key: []byte(id), Value: []byte(`{"amount":100,"event_id":"` + id + `"}`),
			Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte(id)}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		r.t.Fatalf("produce: %v", err)
	}
}

// kafkaMember is one member of the group.
type kafkaMember struct {
	name   string
	cl     *kgo.Client
	sql    *sqllayer.Layer
	dialer *cuttableDialer
}

// start adds n members to the group.
func (r *kafkaRig) start(n int) {
	r.t.Helper()
	for range n {
		if err := r.spawn(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// spawn starts a member and its loop. It runs on the test's goroutine or
// a dying member's, so it reports what goes wrong rather than failing the
// test itself.
func (r *kafkaRig) spawn() error {
	r.mu.Lock()
	r.spawned++
	name := "m" + strconv.Itoa(r.spawned)
	r.mu.Unlock()
	d := &cuttableDialer{}
	m := &kafkaMember{name: name, dialer: d}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.cluster.ListenAddrs()...),
		kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(r.topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(kafkaSession), kgo.HeartbeatInterval(kafkaHeartbeat),
		kgo.RebalanceTimeout(10*time.Second), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.Dialer(d.DialContext),
	)
	if err != nil {
		return fmt.Errorf("member %s: %w", name, err)
	}
	m.cl = cl
	if m.sql, err = sqllayer.New(r.pool, sqllayer.WithEventsTable(r.events)); err != nil {
		cl.Close()
		return fmt.Errorf("member %s: %w", name, err)
	}
	r.mu.Lock()
	r.members = append(r.members, m)
	r.mu.Unlock()
	r.wg.Go(func() { r.loop(m) })
	return nil
}

// loop is a member's life: poll, a transaction per record, then the
// offsets; until it dies or the rig stops.
func (r *kafkaRig) loop(m *kafkaMember) {
	ctx := context.Background()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := m.cl.PollRecords(pctx, 50)
		cancel()
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				r.fail(fmt.Errorf("%s: fetch %s/%d: %w", m.name, topic, p, err))
			}
		})
		var ids []string
		for _, rec := range fs.Records() {
			ids = append(ids, r.process(ctx, m, rec))
		}
		if dies, crash := r.die(m, ids); dies && len(ids) > 0 && !r.stopping.Load() {
			r.kill(m, crash)
			return
		}
		if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
			// The records come again to whoever holds the partition: a
			// redelivery, as after a death.
			r.fail(fmt.Errorf("%s: commit: %w", m.name, err))
		}
		m.cl.AllowRebalance()
		if r.stopping.Load() {
			return
		}
	}
}

// process runs rec's effect once per event: the effect row and the
// processed-event row commit together, or neither does.
func (r *kafkaRig) process(ctx context.Context, m *kafkaMember, rec *kgo.Record) string {
	var id string
	for _, h := range rec.Headers {
		if h.Key == "event_id" {
			id = string(h.Value)
		}
	}
	for attempt := 0; ; attempt++ {
		dup, err := m.sql.InTx(ctx, kafkaConsumer, id, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO "+r.effects+" (event_id, member, part, off) VALUES (?, ?, ?, ?)",
				id, m.name, rec.Partition, rec.Offset)
			return err
		})
		if err == nil {
			r.mu.Lock()
			r.deliveries[fmt.Sprintf("%d/%d", rec.Partition, rec.Offset)]++
			if dup {
				r.dups++
			}
			r.mu.Unlock()
			return id
		}
		if attempt == 20 {
			r.fail(fmt.Errorf("%s: InTx for %s: %w", m.name, id, err))
			return id
		}
		time.Sleep(50 * time.Millisecond) // a shared database's hiccup: the record is retried in place
	}
}

// kill ends m between its transactions and its offset commit: a crash cuts
// its connections, so that the coordinator only learns of it when its
// session times out; otherwise it leaves the group without committing. A
// member takes its place.
func (r *kafkaRig) kill(m *kafkaMember, crash bool) {
	how := "close"
	if crash {
		how = "crash"
		m.dialer.cut()
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		_ = m.cl.LeaveGroupContext(gone) // gives up at once: nothing reaches the broker
	}
	m.cl.CloseAllowingRebalance()
	r.mu.Lock()
	r.deaths[how]++
	for i, x := range r.members {
		if x == m {
			r.members = append(r.members[:i], r.members[i+1:]...)
			break
		}
	}
	r.mu.Unlock()
	if err := r.spawn(); err != nil {
		r.fail(err)
	}
}

func (r *kafkaRig) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// stop ends every member's loop and closes its client (committing
// nothing more).
func (r *kafkaRig) stop() {
	r.stopping.Store(true)
	r.wg.Wait()
	r.mu.Lock()
	members := r.members
	r.members = nil
	r.mu.Unlock()
	for _, m := range members {
		m.cl.CloseAllowingRebalance()
	}
}

// kafkaState is what the stores and the broker hold.
type kafkaState struct {
	effects, distinct int // effect rows, distinct event IDs among them
	committed, end    int64
}

// state reads the effects table and the group's committed offsets against
// the topic's end offsets.
func (r *kafkaRig) state(ctx context.Context) (kafkaState, error) {
	var s kafkaState
	if err := r.admin.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT event_id) FROM "+r.effects).Scan(&s.effects, &s.distinct); err != nil {
		return s, fmt.Errorf("count the effects: %w", err)
	}
	cl := r.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, r.topic)
	if err != nil {
		return s, fmt.Errorf("end offsets: %w", err)
	}
	committed, err := adm.FetchOffsets(ctx, r.group)
	if err != nil {
		return s, fmt.Errorf("committed offsets: %w", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		s.end += o.Offset
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok {
			s.committed += c.At
		}
	})
	return s, nil
}

// waitDone waits until want events had their effect and the group's
// offsets reached the end of every partition, or d passed; it returns the
// last state read.
func (r *kafkaRig) waitDone(want int, d time.Duration) kafkaState {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := r.state(ctx)
		cancel()
		if err == nil && s.distinct >= want && s.committed == s.end {
			return s
		}
		if time.Now().After(deadline) {
			if err != nil {
				r.t.Errorf("read the state: %v", err)
			}
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// redelivered returns how many records were processed more than once, and
// how many deliveries were made.
func (r *kafkaRig) redelivered() (records, deliveries int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.deliveries {
		deliveries += n
		if n > 1 {
			records++
		}
	}
	return records, deliveries
}

// err returns the members' errors.
func (r *kafkaRig) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// cuttableDialer dials the brokers until it is cut; then it closes every
// connection it made and refuses new ones: a crashed process's sockets.
type cuttableDialer struct {
	mu    sync.Mutex // guards conns and isCut
	conns []net.Conn
	isCut bool
}

func (d *cuttableDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isCut {
		_ = c.Close()
		return nil, errors.New("the member has crashed")
	}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *cuttableDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.isCut = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}
