package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/uptrace/bun"
)

// Scenario 10: payments on Kafka. kfake (franz-go's in-process Kafka: three
// brokers, a group coordinator, committed offsets) holds a topic of three
// partitions; three franz-go members of one consumer group, one per
// instance, process each record with the instance's sqllayer.InTx (the
// ledger row and the processed event commit together; the identity is the
// record's event_id header) and commit their offsets only after. The
// member that gets event 5 commits its transaction and dies before its
// offset commit; the rebalance hands its records to the others, which find
// them processed. The publisher sends every fifth event twice, as a
// retrying publisher does, under the same event_id.

const (
	kafkaEvents    = 30
	kafkaHeartbeat = 100 * time.Millisecond
	kafkaSession   = 1500 * time.Millisecond
)

// kafkaRun is what scenario 10's members saw.
type kafkaRun struct {
	mu         sync.Mutex // guards the fields below
	deliveries int
	duplicates int
	died       string // the member that died, once it has
	errs       []error
	stopped    bool // the scenario is over: the members return
}

// kafkaEvent is the ID of the demo's i-th Kafka event.
func kafkaEvent(run string, i int) string { return fmt.Sprintf("evt_kafka_%s_%02d", run, i) }

func (d *demo) kafka(ctx context.Context) (string, error) {
	topic, group := "idemdemo_payments_"+d.run, "idemdemo_"+d.run
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topic), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := publishPayments(ctx, c.ListenAddrs(), topic, d.run); err != nil {
		return "", err
	}
	q := &kafkaRun{}
	crash := kafkaEvent(d.run, 5)
	var wg sync.WaitGroup
	var clients []*kgo.Client
	closed := make([]bool, len(d.instances)) // by the member itself, when it died; read after wg.Wait
	for i, in := range d.instances {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(kafkaSession), kgo.HeartbeatInterval(kafkaHeartbeat),
			kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			return "", err
		}
		clients = append(clients, cl)
		name := "member-" + string(rune('a'+i))
		inTx := in.sql.InTx
		if d.unguarded { // the effect alone, in its transaction: no processed mark
			inTx = func(ctx context.Context, _, _ string, fn func(ctx context.Context, tx bun.Tx) error) (bool, error) {
				return false, in.db.RunInTx(ctx, nil, fn)
			}
		}
		wg.Go(func() { closed[i] = q.consume(ctx, name, cl, inTx, crash) })
	}
	stop := sync.OnceFunc(func() {
		q.mu.Lock()
		q.stopped = true
		q.mu.Unlock()
		wg.Wait()
		for i, cl := range clients {
			if !closed[i] {
				cl.CloseAllowingRebalance()
			}
		}
	})
	defer stop()

	// Done when every event has its ledger row and the group's offsets
	// reach the end of every partition.
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		return "", err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var rows, committed, end int64
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := d.db.NewSelect().Model((*LedgerEntry)(nil)).Where("event_id LIKE ?", "evt_kafka_"+d.run+"_%").Count(ctx)
		if err != nil {
			return "", err
		}
		rows = int64(n)
		committed, end, err = offsets(ctx, adm, topic, group)
		if err == nil && rows >= kafkaEvents && end > 0 && committed == end {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("after 20s: %d ledger rows of %d events, offsets %d of %d (%v)", rows, kafkaEvents, committed, end, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	obs := fmt.Sprintf("%d events in %d records; %d deliveries, %s died between its transaction and its offset commit, %d processed again as duplicates; %d ledger rows, offsets %d of %d",
		kafkaEvents, end, q.deliveries, q.died, q.duplicates, rows, committed, end)
	switch {
	case rows != kafkaEvents:
		return obs, fmt.Errorf("the ledger is wrong: %d rows for %d events (%s)", rows, kafkaEvents, obs)
	case q.died == "" || q.duplicates < 1 || len(q.errs) > 0:
		return obs, fmt.Errorf("%s; errors: %v", obs, errors.Join(q.errs...))
	}
	return obs, nil
}

// consume is one member's loop: poll, a transaction per record, then the
// offsets, until the scenario is over. The member that got crash dies
// after its transactions and before its offset commit: it closes without
// committing (and reports it closed its client), and the group hands its
// partitions to the others from the last committed offsets.
func (q *kafkaRun) consume(ctx context.Context, name string, cl *kgo.Client, inTx func(context.Context, string, string, func(context.Context, bun.Tx) error) (bool, error), crash string) (closed bool) {
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollRecords(pctx, 10)
		cancel()
		q.mu.Lock()
		stopped := q.stopped
		q.mu.Unlock()
		if fs.IsClientClosed() || ctx.Err() != nil || stopped {
			cl.AllowRebalance()
			return false
		}
		dies := false
		for _, rec := range fs.Records() {
			var id string
			for _, h := range rec.Headers {
				if h.Key == "event_id" {
					id = string(h.Value)
				}
			}
			dup, err := inTx(ctx, "payments", id, func(ctx context.Context, tx bun.Tx) error {
				_, err := tx.NewInsert().Model(&LedgerEntry{EventID: id, Amount: 1500}).Exec(ctx)
				return err
			})
			q.mu.Lock()
			q.deliveries++
			switch {
			case err != nil:
				q.errs = append(q.errs, fmt.Errorf("%s: %s: %w", name, id, err))
			case dup:
				q.duplicates++
			}
			if id == crash && q.died == "" {
				q.died, dies = name, true
			}
			q.mu.Unlock()
		}
		if dies {
			cl.CloseAllowingRebalance() // no offset commit: its records come again
			return true
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			q.mu.Lock()
			q.errs = append(q.errs, fmt.Errorf("%s: commit: %w", name, err))
			q.mu.Unlock()
		}
		cl.AllowRebalance()
	}
}

// publishPayments produces the scenario's events, each with its event_id
// header; every fifth twice, as a publisher that retries.
func publishPayments(ctx context.Context, brokers []string, topic, run string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 1; i <= kafkaEvents; i++ {
		id := kafkaEvent(run, i)
		for range 1 + map[bool]int{true: 1}[i%5 == 0] {
			recs = append(recs, &kgo.Record{Key: []byte(id), Value: []byte(`{"amount":1500}`),
				Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte(id)}}})
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// offsets sums the group's committed offsets and the topic's end offsets.
func offsets(ctx context.Context, adm *kadm.Client, topic, group string) (committed, end int64, err error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, 0, err
	}
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, 0, err
	}
	ends.Each(func(o kadm.ListedOffset) {
		end += o.Offset
		if c, ok := got.Lookup(o.Topic, o.Partition); ok {
			committed += c.At
		}
	})
	return committed, end, nil
}
