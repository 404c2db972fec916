package idemotel_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// sqlAnswered signals when a call to the deciding tier returns: for a
// duplicate on another Store, its answer that the key is in progress.
type sqlAnswered chan struct{}

func (c sqlAnswered) Observe(_ context.Context, e idem.Event) {
	if e.Kind == idem.EventTierCall && e.Tier == idem.TierSQL {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// counts sums the data points of the int64 counter name by the value of
// attribute key.
func (r *rig) counts(t *testing.T, name, key string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range sum.DataPoints {
					v, _ := dp.Attributes.Value(attribute.Key(key))
					out[v.AsString()] += dp.Value
				}
			}
		}
	}
	return out
}

// The call spans and the metrics speak one vocabulary, and a replay is a
// replay: a duplicate that waited for an execution in flight — joined in
// this process, or on another Store — is "replayed", with idem.waited on
// its span and an "idem.waited" event, and the events that end calls are
// named as the outcomes ("executed", "replayed").
func TestOutcomeVocabulary(t *testing.T) {
	r := newRig(t)
	mem := must.Get(memlayer.New())(t)
	newStore := func(obs idem.Observer) *tiered.Store {
		s, err := tiered.New(tiered.WithSQL(mem), tiered.WithObserver(obs), tiered.WithWait(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	answered := make(sqlAnswered, 1)
	owner, other := newStore(r.obs), newStore(idem.Observers(r.obs, answered))
	paid := func(context.Context) ([]byte, error) { return []byte("paid"), nil }

	// held runs a Do on s whose work waits for release, and returns once
	// the work runs.
	held := func(s *tiered.Store, k idem.Key, release chan struct{}) chan error {
		started, done := make(chan struct{}), make(chan error, 1)
		go func() {
			_, err := s.Do(context.Background(), k, "fp", func(context.Context) ([]byte, error) {
				close(started)
				<-release
				return []byte("paid"), nil
			})
			done <- err
		}()
		<-started
		return done
	}
	dup := func(s *tiered.Store, k idem.Key) chan tiered.Result {
		out := make(chan tiered.Result, 1)
		go func() {
			res, err := s.Do(context.Background(), k, "fp", paid)
			if err != nil {
				t.Error(err)
			}
			out <- res
		}()
		return out
	}

	// Executed, then a replay of the completed key.
	k := idem.NewKey("", "done")
	for range 2 {
		if _, err := owner.Do(t.Context(), k, "fp", paid); err != nil {
			t.Fatal(err)
		}
	}
	// An in-process duplicate, until one joined the held execution (one
	// that came too late replays the stored result without waiting).
	for round := 1; ; round++ {
		if round > 100 {
			t.Fatal("no duplicate in 100 joined the execution in flight")
		}
		k := idem.NewKey("", fmt.Sprint("local", round))
		release := make(chan struct{})
		leader := held(owner, k, release)
		d := dup(owner, k)
		for range 100 {
			runtime.Gosched() // let the duplicate join the execution
		}
		close(release)
		if err := <-leader; err != nil {
			t.Fatal(err)
		}
		if res := <-d; res.Waited {
			break
		}
	}
	// A waiter on another Store.
	k = idem.NewKey("", "remote")
	release := make(chan struct{})
	leader := held(owner, k, release)
	d := dup(other, k)
	<-answered
	close(release)
	if err := <-leader; err != nil {
		t.Fatal(err)
	}
	if res := <-d; !res.Waited || !res.Replayed {
		t.Fatalf("the other Store's duplicate: %+v, want a replay after a wait", res)
	}

	var waited []string
	outcomes := map[string]int{}
	for _, s := range r.spansNamed("idem.call") {
		o := attr(s, "idem.outcome")
		outcomes[o]++
		if attr(s, "idem.waited") == "true" {
			waited = append(waited, o)
		}
	}
	sort.Strings(waited)
	if outcomes["waited"] != 0 || outcomes["executed"] != outcomes["replayed"] || strings.Join(waited, " ") != "replayed replayed" {
		t.Fatalf("call spans by outcome %v, waited %v: want each replay replayed, the two that waited marked", outcomes, waited)
	}
	calls := r.counts(t, "idem.calls", "idem.outcome")
	events := r.counts(t, "idem.events", "idem.event")
	if calls["waited"] != 0 || calls["executed"] != calls["replayed"] || calls["executed"] != int64(outcomes["executed"]) {
		t.Fatalf("idem.calls by outcome %v", calls)
	}
	if events["executed"] != calls["executed"] || events["replayed"] != calls["replayed"] || events["waited"] != 2 || events["new"]+events["replay"] != 0 {
		t.Fatalf("idem.events by event %v, calls %v: want executed and replayed as the calls, and two waits", events, calls)
	}
}
