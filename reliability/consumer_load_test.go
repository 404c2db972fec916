//go:build unix

package reliability_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// consumerLoad is a load of messages through the JetStream rig while the
// consumer processes are killed and restarted at random: the messages are
// published over the run, some with a handler that outlasts the AckWait
// (the broker redelivers them while they run: a duplicate in flight
// elsewhere), some whose first delivery fails (released and nacked), a
// few whose first run kills its process after its commit and before its
// ack, and some published twice by a publisher's retry under a new
// Nats-Msg-Id.
type consumerLoad struct {
	seed      uint64
	messages  int           // publish this many, or
	dur       time.Duration // publish for this long
	rate      int           // messages a second, with dur
	batch     int           // messages a tick, with messages
	procs     int
	failFirst float64       // fraction whose first delivery fails
	slow      float64       // fraction whose handler outlasts the AckWait
	slowDelay time.Duration // their handler's work
	maxDelay  time.Duration // the others' work, drawn up to it
	die       float64       // fraction whose first run dies after its commit
	republish float64       // fraction published again under a new Nats-Msg-Id
	killEvery int           // the mean number of effects between kills (0: none)
	rig       jsRigConfig
}

// consumerRun is what a load did besides the report.
type consumerRun struct {
	published, republished int
	kills, deaths          int
	took                   time.Duration
}

// run publishes the load, kills and restarts consumers until the
// publishing is done and the consumer has drained, stops the processes,
// and checks the run.
func (l consumerLoad) run(t *testing.T) (consumerReport, consumerRun) {
	t.Helper()
	rng := consumerRand(l.seed)
	r := newJSRig(t, l.rig)
	r.start(l.procs)
	began := time.Now()
	var run consumerRun
	var ids []string
	nextKill := l.jitter(rng, l.killEvery)
	effects := 0
	// The run fails only when it stops making progress: no new effect
	// and no change in the consumer's state for two minutes.
	var lastState string
	lastProgress := time.Now()
	publishing := func() bool {
		if l.messages > 0 {
			return run.published < l.messages
		}
		return time.Since(began) < l.dur
	}
	tick := 50 * time.Millisecond
	for {
		busy := publishing()
		if busy {
			n := l.batch
			if l.messages == 0 {
				n = max(1, l.rate*int(tick)/int(time.Second))
			} else {
				n = min(n, l.messages-run.published)
			}
			for range n {
				run.published++
				id := fmt.Sprintf("m%06d", run.published)
				p := consumerPayload{ID: id}
				switch x := rng.Float64(); {
				case x < l.slow:
					p.DelayMS = int(l.slowDelay / time.Millisecond)
				case x < l.slow+l.failFirst:
					p.FailFirst = true
				case x < l.slow+l.failFirst+l.die:
					p.Die = true
				}
				if p.DelayMS == 0 && l.maxDelay > 0 {
					p.DelayMS = rng.IntN(int(l.maxDelay/time.Millisecond) + 1)
				}
				r.publish(p, "msg-"+id, "uuid-"+id)
				if rng.Float64() < l.republish {
					run.republished++
					r.publish(p, "msg-"+id+"-retry", "uuid-"+id+"-retry")
				}
				ids = append(ids, id)
			}
		}
		effects = r.effectCount()
		// Processes that killed themselves after a commit: restart them.
		for _, p := range r.live() {
			select {
			case <-p.done:
				p.killed = true
				run.deaths++
				r.spawn().ready(t)
			default:
			}
		}
		if l.killEvery > 0 && effects >= nextKill && (busy || !drained(r.info())) {
			live := r.live()
			victim := live[rng.IntN(len(live))]
			victim.kill()
			run.kills++
			r.spawn().ready(t)
			nextKill = effects + l.jitter(rng, l.killEvery)
		}
		ci := r.info()
		if !busy && drained(ci) {
			break
		}
		state := fmt.Sprintf("%d %d %d %d", effects, ci.Delivered.Consumer, ci.AckFloor.Consumer, ci.NumAckPending)
		if busy || state != lastState {
			lastState, lastProgress = state, time.Now()
		} else if time.Since(lastProgress) > 2*time.Minute {
			t.Fatalf("no progress for two minutes: %d effects, %d pending, %d unacked\n%s",
				effects, ci.NumPending, ci.NumAckPending, r.logTails())
		}
		time.Sleep(tick) // the next tick of the load
	}
	run.took = time.Since(began)
	r.stop()
	ci := r.info()
	rep := r.check(ids, ci)
	t.Logf("%d published (%d again under a new Nats-Msg-Id), %d consumer processes killed by the test and %d by their own handler after a commit, in %v",
		run.published, run.republished, run.kills, run.deaths, run.took.Round(time.Millisecond))
	return rep, run
}

// jitter draws a count between n/2 and 3n/2.
func (consumerLoad) jitter(rng interface{ IntN(int) int }, n int) int {
	if n <= 0 {
		return 0
	}
	return n/2 + rng.IntN(n)
}

// TestConsumerJetStreamRedeliveries: 10,000 messages through three
// consumer processes with a 1 s AckWait, handlers that outlast it, first
// deliveries that fail, and consumers killed and restarted at random: at
// least a fifth of the messages are redelivered, and the ledger has
// exactly one effect per message, every message acked, none lost.
// IDEM_CONSUMER_MESSAGES sets the count.
func TestConsumerJetStreamRedeliveries(t *testing.T) {
	n := 10000
	if v := os.Getenv("IDEM_CONSUMER_MESSAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("IDEM_CONSUMER_MESSAGES=%q: want a positive count", v)
		}
	}
	rig := defaultJSRig()
	rig.ackWait = time.Second
	rig.handlers = 8
	l := consumerLoad{
		seed: 1, messages: n, batch: 100, procs: 3,
		// Each of these is redelivered whatever the timing: a first
		// delivery that fails is nacked; a handler that works past the
		// AckWait is not acked within it. Together: 25 % of the messages,
		// some sigmas above the 20 % the scenario must reach with 1,000.
		failFirst: 0.21, slow: 0.04, slowDelay: 1300 * time.Millisecond,
		maxDelay: 3 * time.Millisecond, die: 0.0003,
		killEvery: max(n/4, 50), rig: rig, // a few kills whatever the count
	}
	rep, _ := l.run(t)
	rep.require(t)
	if rep.effects != n {
		t.Fatalf("%d effects, want %d", rep.effects, n)
	}
	if rep.ratio() < 0.20 {
		t.Fatalf("%.3f of the messages were redelivered; the scenario is to redeliver at least 0.20", rep.ratio())
	}
	t.Logf("redelivery ratio %.3f: %d of %d messages redelivered, %d deliveries", rep.ratio(), rep.redelivered, n, rep.deliveries)
}
