//go:build unix

package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

// wmRig is one consumer in this process on JetStream: an embedded
// nats-server, an input stream with a durable consumer, an output stream
// the handler's produced messages are published to (and a poison one),
// and the router that runs a chain of middlewares around the handler.
// Unlike jsRig it runs no processes: the scenarios are about what
// Watermill's own middlewares do to a delivery around idem's.
type wmRig struct {
	t                 *testing.T
	srv               *server.Server
	js                jetstream.JetStream
	in, out, poison   string // stream names, each its own subject
	pub               *recordingPublisher
	mu                sync.Mutex
	deliveries, nacks map[string]int // per input UUID, as the outermost middleware saw them
}

// The durable consumer's name on the input stream.
const wmDurable = "idem"

func newWMRig(t *testing.T, ackWait time.Duration) *wmRig {
	t.Helper()
	r := &wmRig{t: t, deliveries: map[string]int{}, nacks: map[string]int{}}
	r.srv = startNATS(t, t.TempDir())
	_, r.js = connectNATS(t, r.srv)
	name := strings.ToUpper(testenv.Name("WM"))
	r.in, r.out, r.poison = name+"_IN", name+"_OUT", name+"_POISON"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []string{r.in, r.out, r.poison} {
		if _, err := r.js.CreateStream(ctx, jetstream.StreamConfig{Name: s, Subjects: []string{s}, Storage: jetstream.FileStorage}); err != nil {
			t.Fatalf("create stream %s: %v", s, err)
		}
	}
	if _, err := r.js.CreateOrUpdateConsumer(ctx, r.in, jetstream.ConsumerConfig{
		Durable: wmDurable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1,
	}); err != nil {
		t.Fatalf("create the durable consumer: %v", err)
	}
	pub, err := wmjs.NewPublisher(wmjs.PublisherConfig{URL: r.srv.ClientURL(), Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	r.pub = &recordingPublisher{inner: pub}
	return r
}

// run starts a router whose handler "ship" takes the input stream's
// messages through mws (the outermost first, behind the rig's delivery
// count) and publishes what it returns to the output stream. It runs until
// the test ends.
func (r *wmRig) run(h message.HandlerFunc, mws ...message.HandlerMiddleware) {
	r.t.Helper()
	sub, err := wmjs.NewSubscriber(wmjs.SubscriberConfig{
		URL:    r.srv.ClientURL(),
		Logger: watermill.NopLogger{},
		// Longer than any delivery here: JetStream's AckWait decides.
		AckWaitTimeout: time.Minute,
		ResourceInitializer: func(ctx context.Context, js jetstream.JetStream, _ string) (jetstream.Consumer, func(context.Context, watermill.LoggerAdapter), error) {
			cons, err := js.Consumer(ctx, r.in, wmDurable)
			return cons, nil, err
		},
		ConsumeOptions: []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(1)},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 20 * time.Second}, watermill.NopLogger{})
	if err != nil {
		r.t.Fatal(err)
	}
	router.AddMiddleware(append([]message.HandlerMiddleware{r.count}, mws...)...)
	router.AddHandler("ship", r.in, sub, r.out, r.pub, h)
	done := make(chan error, 1)
	go func() { done <- router.Run(context.Background()) }()
	select {
	case <-router.Running():
	case err := <-done:
		r.t.Fatalf("router: %v", err)
	}
	r.t.Cleanup(func() {
		_ = router.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			r.t.Errorf("router: %v", err)
		}
	})
}

// count is the outermost middleware: it counts each message's deliveries
// and the ones the chain nacked.
func (r *wmRig) count(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		out, err := h(msg)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.deliveries[msg.UUID]++
		if err != nil {
			r.nacks[msg.UUID]++
		}
		return out, err
	}
}

// counts returns how many deliveries of uuid the chain saw, and nacked.
func (r *wmRig) counts(uuid string) (deliveries, nacks int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliveries[uuid], r.nacks[uuid]
}

// publish publishes msg to the input stream.
func (r *wmRig) publish(msg *message.Message) {
	r.t.Helper()
	if err := r.pub.inner.Publish(r.in, msg); err != nil {
		r.t.Fatalf("publish %s: %v", msg.UUID, err)
	}
}

// waitDrained waits, for at most a minute, until every message of the
// input stream is acknowledged.
func (r *wmRig) waitDrained() {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cons, err := r.js.Consumer(ctx, r.in, wmDurable)
		var ci *jetstream.ConsumerInfo
		if err == nil {
			ci, err = cons.Info(ctx)
		}
		cancel()
		if err == nil && drained(ci) && ci.AckFloor.Stream == r.streamMsgs(r.in) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the input was not acknowledged within a minute: %+v, %v", ci, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamMsgs returns how many messages stream holds.
func (r *wmRig) streamMsgs(stream string) uint64 {
	r.t.Helper()
	n, _ := r.stream(stream)
	return n
}

// stream returns how many messages stream holds, and the stream.
func (r *wmRig) stream(name string) (uint64, jetstream.Stream) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := r.js.Stream(ctx, name)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return info.State.Msgs, s
}

// stored returns the messages stream holds, in order, as watermill-nats
// delivers them: UUID, metadata (the headers but NATS's own), payload.
func (r *wmRig) stored(name string) []*message.Message {
	r.t.Helper()
	n, s := r.stream(name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*message.Message
	for seq := uint64(1); seq <= n; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if err != nil {
			r.t.Fatalf("%s #%d: %v", name, seq, err)
		}
		m := message.NewMessage(raw.Header.Get(wmnats.WatermillUUIDHdr), raw.Data)
		for k, v := range raw.Header {
			if k != wmnats.WatermillUUIDHdr && k != nats.MsgIdHdr && len(v) > 0 {
				m.Metadata.Set(k, v[0])
			}
		}
		out = append(out, m)
	}
	return out
}

// recordingPublisher is the router's publisher: it keeps a copy of every
// message the router hands it (what idem returned), and fails the next
// publishes when told to.
type recordingPublisher struct {
	inner message.Publisher
	mu    sync.Mutex
	sent  []*message.Message
	fail  int // publishes still to fail
}

func (p *recordingPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	if p.fail > 0 {
		p.fail--
		p.mu.Unlock()
		return errors.New("the broker refused the publish (injected)")
	}
	p.mu.Unlock()
	if err := p.inner.Publish(topic, msgs...); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		c := message.NewMessage(m.UUID, slices.Clone(m.Payload))
		c.Metadata = maps.Clone(m.Metadata)
		p.sent = append(p.sent, c)
	}
	return nil
}

func (p *recordingPublisher) Close() error { return nil }

func (p *recordingPublisher) failNext(n int) {
	p.mu.Lock()
	p.fail = n
	p.mu.Unlock()
}

// published returns the messages published to the output stream so far.
func (p *recordingPublisher) published() []*message.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent)
}

// sameBytes says how got differs from want, byte for byte (UUID, every
// metadata key and value, payload), or "" when it does not.
func sameBytes(got, want *message.Message) string {
	switch {
	case got.UUID != want.UUID:
		return fmt.Sprintf("UUID %q, want %q", got.UUID, want.UUID)
	case string(got.Payload) != string(want.Payload):
		return fmt.Sprintf("payload %q, want %q", got.Payload, want.Payload)
	case !maps.Equal(got.Metadata, want.Metadata):
		return fmt.Sprintf("metadata %q, want %q", got.Metadata, want.Metadata)
	}
	return ""
}
