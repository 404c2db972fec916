//go:build unix

package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// wmSoakInput is the payload of one input message of the middleware soak:
// what its handler's first run does.
type wmSoakInput struct {
	I    int  `json:"i"`
	Fail bool `json:"fail"` // the first run fails
	Slow bool `json:"slow"` // the first run outlives the Timeout
}

// wmSoak is the middleware soak's handler and its record of every run
// that succeeded: the message it produced, as it made it.
type wmSoak struct {
	mu       sync.Mutex
	runs     map[string]int                // input UUID → runs
	produced map[string][]*message.Message // input UUID → the produced message of each run that succeeded
	log      map[string][]string           // input UUID → each run: which router, when, how it ended
	start    time.Time
}

// handler returns the handler of the router named node.
func (s *wmSoak) handler(node string) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		began := time.Since(s.start)
		out, err := s.handle(msg)
		s.mu.Lock()
		s.log[msg.UUID] = append(s.log[msg.UUID], fmt.Sprintf("%s %v–%v err=%v", node, began.Round(time.Millisecond), time.Since(s.start).Round(time.Millisecond), err))
		s.mu.Unlock()
		return out, err
	}
}

func (s *wmSoak) handle(msg *message.Message) ([]*message.Message, error) {
	var in wmSoakInput
	if err := json.Unmarshal(msg.Payload, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.runs[msg.UUID]++
	first := s.runs[msg.UUID] == 1
	s.mu.Unlock()
	switch {
	case first && in.Fail:
		return nil, fmt.Errorf("input %d: the first run fails", in.I)
	case first && in.Slow:
		time.Sleep(300 * time.Millisecond) // past the 150 ms Timeout, ignoring it
	}
	out := message.NewMessage(watermill.NewUUID(), append([]byte("shipped "), msg.Payload...))
	out.Metadata.Set("in", msg.UUID)
	out.Metadata.Set("trace", "\xff\xfe\x00\x01")
	c := message.NewMessage(out.UUID, append([]byte(nil), out.Payload...))
	c.Metadata = maps.Clone(out.Metadata)
	s.mu.Lock()
	s.produced[msg.UUID] = append(s.produced[msg.UUID], c)
	s.mu.Unlock()
	return []*message.Message{out}, nil
}

// TestSoakConsumerMiddlewares is the consumer soak with Watermill's
// Timeout (150 ms) and Retry in the chain and a stalling deciding tier:
// two routers on one JetStream durable consumer (AckWait 500 ms, which a
// slow run with a stall outlasts: the broker redelivers to the other), one
// with Retry and Timeout before idem, the other with them after it, each
// over a Store of its own on one Redis and one database, whose SQL tier
// stalls 200–600 ms on a random 5% of its claims, completions and reads. For IDEM_SOAK_WM_TIME (3 s by default, the short
// seed of make test) it publishes 60 messages a second drawn from
// IDEM_SOAK_WM_SEED (1): a tenth fail their first run, a twentieth outlive
// the Timeout on it, and the router's publish fails now and then. Once the
// input is acknowledged it checks that no message is lost (each ran to
// success exactly once) and that every produced message reached JetStream,
// byte for byte as its run made it, under its run's UUID.
func TestSoakConsumerMiddlewares(t *testing.T) {
	if testing.Short() {
		t.Skip("the middleware soak runs for seconds of load")
	}
	dur, seed := soakKnobs(t, "IDEM_SOAK_WM", 3*time.Second)
	rng := rand.New(rand.NewPCG(seed, 0x1de3))
	var rngMu sync.Mutex
	chance := func(p float64) (bool, time.Duration) {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.Float64() < p, time.Duration(200+rng.IntN(400)) * time.Millisecond
	}

	r := newWMRig(t, 500*time.Millisecond) // a slow first run with a stall outlasts it: the broker redelivers
	st := wmStack(t, testenv.AnySQL(t))    // one Redis prefix and one table for both routers
	s := &wmSoak{runs: map[string]int{}, produced: map[string][]*message.Message{}, log: map[string][]string{}, start: time.Now()}
	var stalls atomic.Int64
	retry := middleware.Retry{MaxRetries: 2, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, Multiplier: 2}.Middleware
	timeout := middleware.Timeout(150 * time.Millisecond)
	for _, before := range []bool{true, false} {
		store, fl := wmStore(t, st)
		for _, m := range []faultlayer.Method{faultlayer.Reserve, faultlayer.Complete, faultlayer.Get} {
			fl.Hook(m, func(ctx context.Context) error {
				if stall, d := chance(0.05); stall {
					stalls.Add(1)
					select {
					case <-time.After(d):
					case <-ctx.Done():
					}
				}
				return nil
			})
		}
		idem, err := idemwatermill.New(store)
		if err != nil {
			t.Fatal(err)
		}
		if before {
			r.run(s.handler("before"), retry, timeout, idem)
		} else {
			r.run(s.handler("after"), idem, retry, timeout)
		}
	}

	t.Logf("middleware soak: seed %d, %v of load", seed, dur)
	var inputs []string
	end := time.Now().Add(dur)
	for i := 0; time.Now().Before(end); i++ {
		fail, _ := chance(0.10)
		slow, _ := chance(0.05)
		if refuse, _ := chance(0.02); refuse {
			r.pub.failNext(1)
		}
		payload, err := json.Marshal(wmSoakInput{I: i, Fail: fail, Slow: slow})
		if err != nil {
			t.Fatal(err)
		}
		uuid := fmt.Sprintf("in-%d-%d", seed, i)
		r.publish(message.NewMessage(uuid, payload))
		inputs = append(inputs, uuid)
		time.Sleep(time.Second / 60)
	}
	r.waitDrained()

	stored := map[string][]*message.Message{}
	outputs := r.stored(r.out)
	for _, m := range outputs {
		stored[m.Metadata.Get("in")] = append(stored[m.Metadata.Get("in")], m)
	}
	var lost, twice, lostOut, altered, deliveries, nacks int
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range inputs {
		d, n := r.counts(id)
		deliveries, nacks = deliveries+d, nacks+n
		runs := s.produced[id]
		switch {
		case len(runs) == 0:
			lost++
			t.Errorf("%s: lost: no run succeeded (%d runs, %d deliveries)", id, s.runs[id], d)
			continue
		case len(runs) > 1:
			twice++
			t.Errorf("%s: %d runs succeeded, want 1: %q", id, len(runs), s.log[id])
		}
		if len(stored[id]) == 0 {
			lostOut++
			t.Errorf("%s: its produced message %s was never published", id, runs[0].UUID)
		}
		for _, m := range stored[id] {
			if diff := sameBytes(m, runs[0]); diff != "" {
				altered++
				t.Errorf("%s: a published produced message differs from its run's: %s", id, diff)
			}
		}
	}
	t.Logf("%d messages, %d deliveries (%d redeliveries, %d nacked by the chain), %d stalls of the SQL tier, %d produced messages published (%d again); lost %d, run twice %d, produced lost %d, altered %d",
		len(inputs), deliveries, deliveries-len(inputs), nacks, stalls.Load(), len(outputs), len(outputs)-len(inputs), lost, twice, lostOut, altered)
	if stalls.Load() == 0 {
		t.Fatal("the SQL tier never stalled: the seed tested no stall")
	}
}
