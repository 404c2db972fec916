package idemwatermill_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// ledger is a business table beside idem's on a stack's database: one
// effect row per run of a handler, deliberately without a unique key, so
// that a second effect for one message shows as a second row.
type ledger struct {
	st    *stacktest.Stack
	db    *bun.DB
	table string
}

func newLedger(t *testing.T, st *stacktest.Stack) *ledger {
	t.Helper()
	l := &ledger{st: st, db: st.DB(t), table: testenv.Name("effects")}
	if _, err := l.db.ExecContext(t.Context(), "CREATE TABLE "+l.table+" (msg VARCHAR(64) NOT NULL, consumer VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := l.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+l.table); err != nil {
			t.Errorf("drop %s: %v", l.table, err)
		}
	})
	return l
}

// node is one consumer instance: a Store of its own over the stack, with
// the SQL layer that decides for it.
type node struct {
	store *tiered.Store
	sql   *sqllayer.Layer
}

func (l *ledger) node(t *testing.T, opts ...tiered.Option) node {
	t.Helper()
	sql := l.st.SQLLayer(t)
	base := []tiered.Option{tiered.WithRedis(l.st.RedisLayer(t)), tiered.WithSQL(sql), tiered.WithTimeouts(2*time.Second, 10*time.Second)}
	s := must.Get(tiered.New(append(base, opts...)...))(t)
	t.Cleanup(func() { _ = s.Close() })
	return node{store: s, sql: sql}
}

// effect writes msg's effect row and completes its key in one transaction.
// fail, when non-nil, is returned from the transaction after the
// completion, so that it rolls back.
func (l *ledger) effect(ctx context.Context, sql *sqllayer.Layer, msg *message.Message, consumer string, fail error, produced ...*message.Message) error {
	return l.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+l.table+" (msg, consumer) VALUES (?, ?)", msg.UUID, consumer); err != nil {
			return err
		}
		if err := idemwatermill.Complete(ctx, tx, sql, produced...); err != nil {
			return err
		}
		return fail
	})
}

// effects counts the effect rows per message of consumer.
func (l *ledger) effects(t *testing.T, consumer string) map[string]int {
	t.Helper()
	var rows []struct {
		Msg string `bun:"msg"`
		N   int    `bun:"n"`
	}
	if err := l.db.NewRaw("SELECT msg, COUNT(*) AS n FROM "+l.table+" WHERE consumer = ? GROUP BY msg", consumer).Scan(t.Context(), &rows); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Msg] = r.N
	}
	return out
}

// wrap returns h behind the middleware over store.
func wrap(t *testing.T, store *tiered.Store, h message.HandlerFunc, opts ...idemwatermill.Option) message.HandlerFunc {
	t.Helper()
	mw := must.Get(idemwatermill.New(store, append([]idemwatermill.Option{idemwatermill.WithConsumer("ship")}, opts...)...))(t)
	return mw(h)
}

// delivery returns a delivery of a message: a copy with its own context,
// as a broker hands each delivery over.
func delivery(t *testing.T, uuid string, payload string, md ...string) *message.Message {
	t.Helper()
	m := message.NewMessage(uuid, []byte(payload))
	for i := 0; i+1 < len(md); i += 2 {
		m.Metadata.Set(md[i], md[i+1])
	}
	m.SetContext(t.Context())
	return m
}

// counter counts a handler's runs.
type counter struct{ runs atomic.Int64 }

func (c *counter) handler(out ...*message.Message) message.HandlerFunc {
	return func(*message.Message) ([]*message.Message, error) {
		c.runs.Add(1)
		return out, nil
	}
}

// acks records, per router handler and message, how each delivery ended:
// a middleware outside idem's, as the router sees it.
type acks struct {
	mu      sync.Mutex
	acked   map[string]int   // handler/uuid → acked deliveries
	lastErr map[string]error // handler/uuid → the error of its last nacked delivery
	nacks   atomic.Int64
}

// redeliveryPause is how long a nacked delivery waits before GoChannel
// may resend it.
const redeliveryPause = 20 * time.Millisecond

func newAcks() *acks { return &acks{acked: map[string]int{}, lastErr: map[string]error{}} }

func (a *acks) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		out, err := h(msg)
		k := message.HandlerNameFromCtx(msg.Context()) + "/" + msg.UUID
		if err != nil {
			a.mu.Lock()
			a.lastErr[k] = err
			a.mu.Unlock()
			a.nacks.Add(1)
			// A broker redelivers a nacked message after a while (an ack
			// wait, a resend interval, a backoff); GoChannel resends it at
			// once. Without the pause, three routers re-running every
			// nacked delivery in a tight loop kept SQLite's write lock
			// busy past the SQL timeout at load 9, and most messages had
			// no delivery acknowledged within 30 s.
			time.Sleep(redeliveryPause)
			return out, err
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.acked[k]++
		return out, nil
	}
}

func (a *acks) count(handler, uuid string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked[handler+"/"+uuid]
}

// short says which of handlers' deliveries of uuids have fewer than want
// acknowledgements, with the error of each one's last nack: what a test
// that timed out waiting for them reports.
func (a *acks) short(handlers, uuids []string, want int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, h := range handlers {
		for _, id := range uuids {
			if k := h + "/" + id; a.acked[k] < want {
				fmt.Fprintf(&b, "\n\t%s: %d of %d acknowledged; last nack: %v", k, a.acked[k], want, a.lastErr[k])
			}
		}
	}
	fmt.Fprintf(&b, "\n\t%d nacks in all", a.nacks.Load())
	return b.String()
}

// waitFor polls cond until it holds, for at most a minute; on a timeout
// the test fails with what, and with what each of explain says (the state
// that kept cond from holding). The bound is past a default lease and its
// grace (37.5 s): on a busy machine a claim whose release did not reach
// SQLite holds its message until then, and the redeliveries take it over
// after. A shorter lease would not do: an owner whose completion cannot
// get through for a whole lease may be taken over, and its work runs
// twice (DESIGN's "cut off past its lease"), which this suite counts.
func waitFor(t *testing.T, what string, cond func() bool, explain ...func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			var why strings.Builder
			for _, e := range explain {
				why.WriteString(e())
			}
			t.Fatalf("timed out waiting for %s%s", what, why.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runRouter runs r until the test ends.
func runRouter(t *testing.T, r *message.Router) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case <-r.Running():
	case err := <-done:
		t.Fatalf("router: %v", err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("router: %v", err)
		}
	})
}

var logger = watermill.NopLogger{}
