package idemprom_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// byLabel sums the series of the counter name by the value of label.
func byLabel(t *testing.T, g prometheus.Gatherer, name, label string) map[string]int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return out
}

// heldCall runs a Do on s whose work waits for release, and returns once
// the work runs, with the channel of the call's error.
func heldCall(t *testing.T, s *tiered.Store, k idem.Key, release <-chan struct{}) <-chan error {
	t.Helper()
	started, done := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := s.Do(context.Background(), k, "fp", func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte("paid"), nil
		})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the held call ended before its work ran: %v", err)
	}
	return done
}

// doAsync runs a Do on s on another goroutine.
func doAsync(s *tiered.Store, k idem.Key) <-chan tiered.Result {
	out := make(chan tiered.Result, 1)
	go func() {
		r, err := s.Do(context.Background(), k, "fp", func(context.Context) ([]byte, error) { return []byte("again"), nil })
		if err != nil || string(r.Value) != "paid" || !r.Replayed {
			r = tiered.Result{Value: []byte(fmt.Sprintf("%q, %v", r.Value, err))}
		}
		out <- r
	}()
	return out
}

// sqlAnswered is an Observer that signals when a call to the SQL tier
// returns: for a duplicate on another Store, SQL's answer that the key is
// in progress, after which the duplicate waits.
type sqlAnswered chan struct{}

func (c sqlAnswered) Observe(_ context.Context, e idem.Event) {
	if e.Kind == idem.EventTierCall && e.Tier == idem.TierSQL {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// One vocabulary for calls, events and answers, and a replay counted as a
// replay: a duplicate that waited for an execution in flight — joined in
// this process, or on another Store — and got its result is "replayed",
// its wait counted apart (events_total{event="waited"} and
// wait_duration_seconds). The event that ends a call has the call's
// outcome's name: "executed", "replayed".
func TestOutcomeVocabulary(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		newCollector := func(t *testing.T) (*idemprom.Collector, *prometheus.Registry) {
			c := must.Get(idemprom.New())(t)
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			return c, reg
		}
		t.Run("executed, then replayed", func(t *testing.T) {
			c, reg := newCollector(t)
			s := st.Store(t, tiered.WithObserver(c))
			k := idem.NewKey(t.Name(), "k")
			for range 2 {
				if _, err := s.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { return []byte("paid"), nil }); err != nil {
					t.Fatal(err)
				}
			}
			if got := byLabel(t, reg, "idem_calls_total", "outcome"); fmt.Sprint(got) != "map[executed:1 replayed:1]" {
				t.Errorf("calls by outcome %v, want one executed and one replayed", got)
			}
			events := byLabel(t, reg, "idem_events_total", "event")
			if events["executed"] != 1 || events["replayed"] != 1 || events["new"]+events["replay"]+events["waited"] != 0 {
				t.Errorf("events %v, want one executed and one replayed, and no wait", events)
			}
		})
		t.Run("in-process duplicate that waited", func(t *testing.T) {
			c, reg := newCollector(t)
			s := st.Store(t, tiered.WithObserver(c))
			// The duplicate joins the held execution unless it comes too
			// late, in which case it replays the stored result without
			// waiting: either way it is replayed. Run until one waited.
			rounds, waits := 0, 0
			for waits == 0 {
				if rounds++; rounds > 100 {
					t.Fatal("no duplicate in 100 joined the execution in flight")
				}
				k := idem.NewKey(t.Name(), fmt.Sprint("k", rounds))
				release := make(chan struct{})
				leader := heldCall(t, s, k, release)
				dup := doAsync(s, k)
				for range 100 {
					runtime.Gosched() // let the duplicate join the execution
				}
				close(release)
				if err := <-leader; err != nil {
					t.Fatal(err)
				}
				r := <-dup
				if !r.Replayed {
					t.Fatalf("duplicate: %s", r.Value)
				}
				if r.Waited {
					waits++
				}
			}
			want := fmt.Sprintf("map[executed:%d replayed:%d]", rounds, rounds)
			if got := byLabel(t, reg, "idem_calls_total", "outcome"); fmt.Sprint(got) != want {
				t.Errorf("calls by outcome %v, want %s: a duplicate that waited is a replay", got, want)
			}
			events := byLabel(t, reg, "idem_events_total", "event")
			if events["replayed"] != rounds || events["waited"] != waits {
				t.Errorf("events %v, want %d replayed and %d waited", events, rounds, waits)
			}
			if n := testutil.CollectAndCount(c, "idem_wait_duration_seconds"); n != 1 {
				t.Errorf("wait_duration_seconds has %d series, want the local tier's", n)
			}
		})
		t.Run("waiter on another Store", func(t *testing.T) {
			c, reg := newCollector(t)
			answered := make(sqlAnswered, 1)
			owner := st.Store(t, tiered.WithObserver(c))
			other := st.Store(t, tiered.WithObserver(idem.Observers(c, answered)), tiered.WithWait(time.Minute))
			k := idem.NewKey(t.Name(), "k")
			release := make(chan struct{})
			leader := heldCall(t, owner, k, release)
			dup := doAsync(other, k)
			<-answered // SQL told the duplicate the key is in progress: it waits
			close(release)
			if err := <-leader; err != nil {
				t.Fatal(err)
			}
			if r := <-dup; !r.Replayed || !r.Waited {
				t.Fatalf("duplicate on the other Store: %+v (%s), want a replay after a wait", r, r.Value)
			}
			if got := byLabel(t, reg, "idem_calls_total", "outcome"); fmt.Sprint(got) != "map[executed:1 replayed:1]" {
				t.Errorf("calls by outcome %v, want one executed and one replayed: a duplicate that waited is a replay", got)
			}
			events := byLabel(t, reg, "idem_events_total", "event")
			if events["executed"] != 1 || events["replayed"] != 1 || events["waited"] != 1 {
				t.Errorf("events %v, want one executed, one replayed and one waited", events)
			}
		})
	})
}
