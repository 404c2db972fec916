//go:build unix

package reliability_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// consumerReport is the check of a consumer run: the ledger (the effects)
// against the messages published, the delivery logs (what each delivery
// did, and whether it was acked or nacked) against the ledger, the broker's
// consumer state, and the idem records.
type consumerReport struct {
	messages    int    // event IDs published
	streamMsgs  uint64 // messages the stream took (a publisher's retry under a new Nats-Msg-Id is one more)
	deliveries  int    // deliveries the logs saw start
	redelivered int    // messages delivered more than once
	effects     int    // ledger rows
	dupAcked    int    // deliveries acked without running the handler
	nacked      int    // deliveries nacked
	unconfirmed int    // of them, after the handler's commit, which the Store could not confirm in time
	anomalies   []string
}

func (c consumerReport) ratio() float64 {
	if c.messages == 0 {
		return 0
	}
	return float64(c.redelivered) / float64(c.messages)
}

func (c consumerReport) String() string {
	return fmt.Sprintf("%d messages (%d in the stream), %d deliveries (%.2f per message), %d redelivered (ratio %.3f), "+
		"%d effects, %d duplicates acked without effect, %d nacks (%d after a commit the Store could not confirm), %d anomalies",
		c.messages, c.streamMsgs, c.deliveries, float64(c.deliveries)/float64(max(c.messages, 1)), c.redelivered, c.ratio(),
		c.effects, c.dupAcked, c.nacked, c.unconfirmed, len(c.anomalies))
}

// check checks a run whose consumer has drained and whose processes have
// stopped, for the event IDs ids. Anomalies:
//
//   - a message with no effect (lost), or more than one (a duplicate
//     effect), or an effect of no message published;
//   - a delivery acked after running the handler that made no effect of
//     its own (its effect lost, or another's taken for it);
//   - a delivery that ran the handler after the message's effect committed
//     (a duplicate that was not recognised);
//   - a message no delivery acked, a consumer that still holds messages
//     unacked or undelivered, a key not completed.
func (r *jsRig) check(ids []string, ci *jetstream.ConsumerInfo) consumerReport {
	r.t.Helper()
	var rep consumerReport
	rep.messages = len(ids)
	rep.streamMsgs = ci.Delivered.Stream
	bad := func(format string, args ...any) { rep.anomalies = append(rep.anomalies, fmt.Sprintf(format, args...)) }

	type effect struct {
		row       ledgerRow
		committed int64 // from the effecting delivery's end, 0 when its process died first
	}
	effects := map[string][]effect{}
	for _, l := range r.ledgerRows() {
		effects[l.msg] = append(effects[l.msg], effect{row: l})
		rep.effects++
	}
	published := map[string]bool{}
	for _, id := range ids {
		published[id] = true
		switch n := len(effects[id]); {
		case n == 0:
			bad("%s: lost: no effect", id)
		case n > 1:
			bad("%s: %d effects: %v", id, n, effects[id])
		}
	}
	for id := range effects {
		if !published[id] {
			bad("%s: an effect of a message never published", id)
		}
	}

	evs := r.deliveries()
	starts := map[string]int{}
	maxN := map[string]uint64{}
	acked := map[string]bool{}
	isEffect := func(id string, ev deliveryEvent) bool {
		for _, e := range effects[id] {
			if e.row.node == ev.Node && e.row.seq == ev.Seq && e.row.delivery == ev.N {
				return true
			}
		}
		return false
	}
	for _, ev := range evs {
		if ev.Ev == "end" && ev.Committed != 0 {
			for i, e := range effects[ev.Msg] {
				if e.row.node == ev.Node && e.row.seq == ev.Seq && e.row.delivery == ev.N {
					effects[ev.Msg][i].committed = ev.Committed
				}
			}
		}
	}
	for _, ev := range evs {
		if ev.Ev == "start" {
			rep.deliveries++
			starts[ev.Msg]++
			maxN[ev.Msg] = max(maxN[ev.Msg], ev.N)
			continue
		}
		where := fmt.Sprintf("%s: delivery %d of stream message %d on %s", ev.Msg, ev.N, ev.Seq, ev.Node)
		switch {
		case ev.Err != "":
			rep.nacked++
			if ev.Committed != 0 {
				// The Store could not read back the completion the
				// handler's transaction committed (a database too slow
				// to answer): it does not vouch for it, and the message
				// is nacked. Not lost, not run again: its redelivery
				// finds it processed, which the other checks hold.
				rep.unconfirmed++
			}
		case !ev.Ran:
			rep.dupAcked++
			acked[ev.Msg] = true
		default:
			acked[ev.Msg] = true
			if !isEffect(ev.Msg, ev) {
				bad("%s: acked after running the handler, with no effect of its own", where)
			}
		}
		if ev.Ran && !isEffect(ev.Msg, ev) {
			for _, e := range effects[ev.Msg] {
				if e.committed != 0 && e.committed < ev.At && ev.Committed == 0 && startedAfter(evs, ev, e.committed) {
					bad("%s: ran the handler after the effect of delivery %d on %s committed", where, e.row.delivery, e.row.node)
				}
			}
		}
	}
	for _, id := range ids {
		if starts[id] > 1 || maxN[id] > 1 {
			rep.redelivered++
		}
		if !acked[id] {
			bad("%s: no delivery was acked", id)
		}
	}
	if !drained(ci) {
		bad("the consumer holds %d messages undelivered, %d unacked, %d redelivered", ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
	}
	if n := r.completedKeys(); n != len(ids) {
		bad("%d keys completed, want %d", n, len(ids))
	}
	return rep
}

// startedAfter reports whether the delivery that ended with end started
// after t.
func startedAfter(evs []deliveryEvent, end deliveryEvent, t int64) bool {
	for _, ev := range evs {
		if ev.Ev == "start" && ev.Node == end.Node && ev.Seq == end.Seq && ev.N == end.N && ev.Msg == end.Msg {
			return ev.At > t
		}
	}
	return false
}

// require fails the test on any anomaly.
func (c consumerReport) require(t *testing.T) {
	t.Helper()
	t.Log(c)
	if len(c.anomalies) > 0 {
		shown := c.anomalies
		if len(shown) > 30 {
			shown = shown[:30]
		}
		t.Fatalf("%d anomalies:\n%s", len(c.anomalies), strings.Join(shown, "\n"))
	}
}
