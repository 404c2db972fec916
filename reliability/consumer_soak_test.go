//go:build unix

package reliability_test

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestSoakConsumer is the soak's consumer variant: for
// IDEM_SOAK_CONSUMER_TIME (6 s by default: the short seed of make test) it
// publishes a load drawn from IDEM_SOAK_CONSUMER_SEED (1 by default)
// through three consumer processes on the JetStream rig, with the broker's
// redeliveries (handlers that outlast the AckWait, first deliveries that
// fail), consumer processes killed by the test and by their own handler
// between its commit and its ack, and a publisher's retries under a new
// Nats-Msg-Id. Once the consumer has drained it checks the run: no
// message's effect twice, none lost, every delivery after the effect a
// duplicate acked without effect (or nacked while another consumer held
// the message), every message acked. Any anomaly fails it. make
// soak-consumer runs it for longer.
func TestSoakConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("the consumer soak runs for seconds of load")
	}
	dur, seed := soakKnobs(t, "IDEM_SOAK_CONSUMER", 6*time.Second)
	rig := defaultJSRig()
	rig.ackWait = 500 * time.Millisecond
	rig.handlers = 6
	l := consumerLoad{
		seed: seed, dur: dur, rate: 150, procs: 3,
		failFirst: 0.10, slow: 0.03, slowDelay: 700 * time.Millisecond,
		maxDelay: 5 * time.Millisecond, die: 0.003, republish: 0.05,
		killEvery: 100, rig: rig,
	}
	t.Logf("consumer soak: seed %d, %v of load", seed, dur)
	rep, run := l.run(t)
	rep.require(t)
	if run.kills+run.deaths == 0 {
		t.Fatal("no consumer process was killed: the seed tested no kill")
	}
}

// soakKnobs returns a consumer soak's duration and seed from the
// environment: prefix_TIME (dur unless set) and prefix_SEED (1 unless
// set). A value that does not parse fails the test.
func soakKnobs(t *testing.T, prefix string, dur time.Duration) (time.Duration, uint64) {
	t.Helper()
	seed := uint64(1)
	if v := os.Getenv(prefix + "_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s_TIME=%q: want a positive duration", prefix, v)
		}
		dur = d
	}
	if v := os.Getenv(prefix + "_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s_SEED=%q: %v", prefix, v, err)
		}
		seed = n
	}
	return dur, seed
}

// TestSoakConsumerPgx is the consumer soak with consumers on pgx: each
// process keeps its effect once with idempgx's InTx on a pgxpool (the
// processed event marked in the pgx.Tx of the ledger row, no Store),
// through the same JetStream rig, load and check as TestSoakConsumer:
// the broker's redeliveries, processes killed by the test and by their
// own handler between its commit and its ack, a publisher's retries. For
// IDEM_SOAK_CONSUMER_PGX_TIME (6 s by default: the short seed of make
// test) with IDEM_SOAK_CONSUMER_PGX_SEED; make soak-consumer-pgx runs it
// for longer. It needs Postgres.
func TestSoakConsumerPgx(t *testing.T) {
	if testing.Short() {
		t.Skip("the consumer soak runs for seconds of load")
	}
	dur, seed := soakKnobs(t, "IDEM_SOAK_CONSUMER_PGX", 6*time.Second)
	rig := defaultJSRig()
	rig.ackWait = 500 * time.Millisecond
	rig.handlers = 6
	rig.consumer = consumerPgx
	l := consumerLoad{
		seed: seed, dur: dur, rate: 150, procs: 3,
		failFirst: 0.10, slow: 0.03, slowDelay: 700 * time.Millisecond,
		maxDelay: 5 * time.Millisecond, die: 0.003, republish: 0.05,
		killEvery: 100, rig: rig,
	}
	t.Logf("consumer soak over pgx.Tx: seed %d, %v of load", seed, dur)
	rep, run := l.run(t)
	rep.require(t)
	if run.kills+run.deaths == 0 {
		t.Fatal("no consumer process was killed: the seed tested no kill")
	}
	if run.deaths == 0 {
		t.Log("no process died between its commit and its ack in this seed: only the test's kills")
	}
}
