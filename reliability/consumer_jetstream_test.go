//go:build unix

package reliability_test

import (
	"fmt"
	"testing"
	"time"
)

// The JetStream scenarios: three consumer processes in one durable pull
// consumer with a short AckWait, each a Watermill router behind
// idemwatermill over its own Store on the shared Redis and database; each
// handler writes its ledger row in the transaction that completes the
// message's key. The broker's own redelivery is what the scenarios meet.

// ordinary publishes n messages that need nothing special, with event IDs
// prefix-1..n, and returns their IDs.
func (r *jsRig) ordinary(prefix string, n int) []string {
	r.t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i+1)
		r.publish(consumerPayload{ID: id, DelayMS: 5}, "msg-"+id, "uuid-"+id)
		ids = append(ids, id)
	}
	return ids
}

// deliveriesOf returns the delivery log's events of message id.
func (r *jsRig) deliveriesOf(id string) []deliveryEvent {
	var out []deliveryEvent
	for _, ev := range r.deliveries() {
		if ev.Msg == id {
			out = append(out, ev)
		}
	}
	return out
}

// TestConsumerJetStreamKilledMidHandler: a consumer is killed (SIGKILL)
// while its handler runs a message. The broker redelivers it after the
// AckWait; the key the dead consumer claimed holds the other consumers off
// until its lease lapses, then one runs the message: one effect.
func TestConsumerJetStreamKilledMidHandler(t *testing.T) {
	r := newJSRig(t, defaultJSRig())
	r.start(3)
	ids := r.ordinary("before", 10)
	const held = "held-1"
	r.publish(consumerPayload{ID: held, Hold: true}, "msg-"+held, "uuid-"+held)
	ids = append(ids, held)
	victim := r.waitMark("hold", held)
	r.proc(victim).kill()
	r.spawn().ready(t) // the group is three again
	ids = append(ids, r.ordinary("after", 10)...)
	ci := r.waitDrained(2 * time.Minute)
	r.stop()
	rep := r.check(ids, ci)
	rep.require(t)

	rows := r.ledgerRows()
	var effectNode string
	for _, l := range rows {
		if l.msg == held {
			effectNode = l.node
		}
	}
	if effectNode == victim {
		t.Fatalf("the held message's effect is the killed consumer's (%s): it was to die before its commit", victim)
	}
	var redelivered bool
	for _, ev := range r.deliveriesOf(held) {
		redelivered = redelivered || ev.N > 1
	}
	if !redelivered {
		t.Fatalf("the held message was not redelivered by the broker: %v", r.deliveriesOf(held))
	}
	t.Logf("killed %s mid-handler; the broker redelivered %s, whose one effect is %s's", victim, held, effectNode)
}

// TestConsumerJetStreamDiedBeforeAck: a consumer commits the message's
// effect and its key, and dies before its ack. The broker redelivers the
// message; the redelivery is a duplicate acked without running the
// handler, and the message ends acked with one effect.
func TestConsumerJetStreamDiedBeforeAck(t *testing.T) {
	r := newJSRig(t, defaultJSRig())
	r.start(3)
	ids := r.ordinary("before", 10)
	const dying = "dying-1"
	r.publish(consumerPayload{ID: dying, Die: true}, "msg-"+dying, "uuid-"+dying)
	ids = append(ids, dying)
	victim := r.waitMark("die", dying)
	r.proc(victim).reap(t)
	r.spawn().ready(t)
	ids = append(ids, r.ordinary("after", 10)...)
	ci := r.waitDrained(2 * time.Minute)
	r.stop()
	rep := r.check(ids, ci)
	rep.require(t)

	var effectNode string
	for _, l := range r.ledgerRows() {
		if l.msg == dying {
			effectNode = l.node
		}
	}
	if effectNode != victim {
		t.Fatalf("the effect of %s is %s's; want the consumer that died after its commit (%s)", dying, effectNode, victim)
	}
	var dupAcked bool
	for _, ev := range r.deliveriesOf(dying) {
		if ev.Ev == "end" && ev.N > 1 && ev.Err == "" && !ev.Ran {
			dupAcked = true
		}
	}
	if !dupAcked {
		t.Fatalf("no redelivery of %s was acked as a duplicate: %v", dying, r.deliveriesOf(dying))
	}
	t.Logf("%s committed %s and died before its ack; the redelivery was acked without effect", victim, dying)
}

// TestConsumerJetStreamPublisherRetry: a publisher that retries. Within
// the stream's duplicate window, a retry under the same Nats-Msg-Id is
// dropped by JetStream (the stream keeps one copy). A retry under a new
// Nats-Msg-Id, or under the same one after the window, is a second copy in
// the stream, delivered like the first: idem, which identifies the message
// by its event_id metadata, acks it without effect.
func TestConsumerJetStreamPublisherRetry(t *testing.T) {
	c := defaultJSRig()
	c.dupWindow = time.Second
	r := newJSRig(t, c)
	r.start(3)

	// Within the window, the same Nats-Msg-Id: JetStream drops the retry.
	first := consumerPayload{ID: "evt-1", DelayMS: 5}
	if ack := r.publish(first, "msg-evt-1", "uuid-evt-1-a"); ack.Duplicate {
		t.Fatal("the first publish of evt-1 is a duplicate")
	}
	if ack := r.publish(first, "msg-evt-1", "uuid-evt-1-a"); !ack.Duplicate {
		t.Fatal("JetStream kept a retry under the same Nats-Msg-Id within its window")
	}
	// A new Nats-Msg-Id (and a new Watermill UUID): a second copy.
	if ack := r.publish(first, "msg-evt-1-retry", "uuid-evt-1-b"); ack.Duplicate {
		t.Fatal("JetStream dropped a publish under a new Nats-Msg-Id")
	}

	// The same Nats-Msg-Id after the window: once JetStream forgets it,
	// the retry is a second copy.
	second := consumerPayload{ID: "evt-2", DelayMS: 5}
	r.publish(second, "msg-evt-2", "uuid-evt-2-a")
	deadline := time.Now().Add(30 * time.Second)
	dropped := 0
	for {
		ack := r.publish(second, "msg-evt-2", "uuid-evt-2-b")
		if !ack.Duplicate {
			break
		}
		dropped++
		if time.Now().After(deadline) {
			t.Fatal("JetStream still drops evt-2's Nats-Msg-Id 30 s after a 1 s window")
		}
		time.Sleep(200 * time.Millisecond) // until the window passes
	}

	ci := r.waitDrained(2 * time.Minute)
	r.stop()
	ids := []string{"evt-1", "evt-2"}
	rep := r.check(ids, ci)
	rep.require(t)
	if rep.streamMsgs != 4 {
		t.Fatalf("the stream took %d messages, want 4 (two copies of each event)", rep.streamMsgs)
	}
	for _, id := range ids {
		seqs := map[uint64]bool{}
		dup := false
		for _, ev := range r.deliveriesOf(id) {
			if ev.Ev == "end" && ev.Err == "" {
				seqs[ev.Seq] = true
				dup = dup || !ev.Ran
			}
		}
		if len(seqs) != 2 || !dup {
			t.Fatalf("%s: acked copies %v, one of them a duplicate without effect: %v; want both copies acked, one without effect", id, seqs, dup)
		}
	}
	t.Logf("JetStream dropped the retry within its window (and %d tries of evt-2 before its window passed); idem dropped the copies under a new Nats-Msg-Id and after the window", dropped)
}
