package reliability_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestConsumerKafkaDiedBeforeCommit: a member of a group of three runs a
// record's transaction (effect and processed event commit together) and
// dies before its offset commit, once by crashing (the coordinator drops
// it when its session times out) and once by closing without committing.
// The rebalance hands the record to another member, whose InTx finds the
// event processed: one effect, and the group's offsets reach the end.
func TestConsumerKafkaDiedBeforeCommit(t *testing.T) {
	for _, crash := range []bool{true, false} {
		t.Run(map[bool]string{true: "crash", false: "close"}[crash], func(t *testing.T) {
			r := newKafkaRig(t, 3)
			var once sync.Once
			r.die = func(_ *kafkaMember, ids []string) (bool, bool) {
				died := false
				for _, id := range ids {
					if id == "evt-1" {
						once.Do(func() { died = true })
					}
				}
				return died, crash
			}
			r.start(3)
			r.publish("evt-1")
			s := r.waitDone(1, time.Minute)
			r.stop()
			if err := r.err(); err != nil {
				t.Logf("members' errors: %v", err)
			}
			redelivered, deliveries := r.redelivered()
			r.mu.Lock()
			dups, deaths := r.dups, r.deaths
			r.mu.Unlock()
			if s.effects != 1 || s.distinct != 1 {
				t.Fatalf("%d effects of %d events, want 1 of 1", s.effects, s.distinct)
			}
			if s.committed != s.end {
				t.Fatalf("offsets committed to %d of %d", s.committed, s.end)
			}
			if redelivered != 1 || deliveries != 2 || dups != 1 || deaths[map[bool]string{true: "crash", false: "close"}[crash]] != 1 {
				t.Fatalf("redelivered %d, deliveries %d, duplicates %d, deaths %v; want the record delivered twice, the second a duplicate, one death",
					redelivered, deliveries, dups, deaths)
			}
		})
	}
}

// TestConsumerKafkaPublisherRetry: a publisher that retries sends the same
// event under the same event_id three times, as three records: one
// effect, two duplicates.
func TestConsumerKafkaPublisherRetry(t *testing.T) {
	r := newKafkaRig(t, 3)
	r.start(3)
	for range 3 {
		r.publish("evt-retried")
	}
	s := r.waitDone(1, time.Minute)
	r.stop()
	if err := r.err(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	dups := r.dups
	r.mu.Unlock()
	if s.effects != 1 || dups != 2 || s.committed != s.end || s.end != 3 {
		t.Fatalf("%d effects, %d duplicates, offsets %d of %d; want 1 effect, 2 duplicates, all 3 records committed", s.effects, dups, s.committed, s.end)
	}
}

// TestConsumerKafkaRedeliveries sends IDEM_KAFKA_MESSAGES events (1,000 by
// default; make infra-kafka sends 10,000), a twentieth of them published
// twice by a retrying publisher, through a group of three members on six
// partitions, while members die after their transactions and before their
// offset commits (whenever fewer than 30% of the records seen so far came
// again, and a sixth of the other polls; crashes and closes by turns, each
// replaced): at least a fifth of the records are delivered again, and
// exactly one effect per event is made, none lost, every offset committed.
func TestConsumerKafkaRedeliveries(t *testing.T) {
	n := 1000
	if v := os.Getenv("IDEM_KAFKA_MESSAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("IDEM_KAFKA_MESSAGES=%q: want a positive number", v)
		}
	}
	began := time.Now()
	r := newKafkaRig(t, 6)
	rng := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex // guards rng and deaths
	deaths := 0
	r.die = func(_ *kafkaMember, ids []string) (bool, bool) {
		// A death whenever fewer than 30% of the records seen so far came
		// again (the redeliveries of a death show once its rebalance is
		// over), and one poll in six besides: the share the test holds to
		// does not hang on how the polls happened to fall.
		r.mu.Lock()
		seen, again := len(r.deliveries), 0
		for _, n := range r.deliveries {
			if n > 1 {
				again++
			}
		}
		r.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		if float64(again) >= 0.3*float64(seen) && rng.IntN(6) != 0 {
			return false, false
		}
		deaths++
		return true, deaths%2 == 0
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt-%d", i+1)
	}
	var retried []string
	for i := 0; i < n; i += 20 {
		retried = append(retried, ids[i])
	}
	r.publish(ids...)
	r.publish(retried...)
	r.start(3)
	s := r.waitDone(n, 5*time.Minute)
	r.stop()
	took := time.Since(began)
	if err := r.err(); err != nil {
		t.Logf("members' errors (each a redelivery): %v", err)
	}
	redelivered, deliveries := r.redelivered()
	r.mu.Lock()
	dups, died := r.dups, r.deaths
	r.mu.Unlock()
	records := n + len(retried)
	ratio := float64(redelivered) / float64(records)
	t.Logf("kafka: %d events in %d records (%d published twice), %d deliveries, %d records redelivered (%.1f%%), %d duplicates suppressed, deaths %v, %d effects of %d events, offsets %d of %d, in %v",
		n, records, len(retried), deliveries, redelivered, 100*ratio, dups, died, s.effects, s.distinct, s.committed, s.end, took.Round(time.Millisecond))
	if s.effects != n || s.distinct != n {
		t.Errorf("%d effects of %d distinct events, want exactly %d of %d", s.effects, s.distinct, n, n)
	}
	if s.committed != s.end || s.end != int64(records) {
		t.Errorf("offsets committed to %d of %d, want all %d records", s.committed, s.end, records)
	}
	if ratio < 0.2 {
		t.Errorf("%.1f%% of the records redelivered, want at least 20%%", 100*ratio)
	}
}
