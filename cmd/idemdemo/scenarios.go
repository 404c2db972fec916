package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// demo is one run of the scenarios.
type demo struct {
	run       string // unique per run, so runs against a real database never meet
	b         *backends
	instances []*instance
	db        *bun.DB // the demo's own pool, for counting rows
	// unguarded runs scenarios 9's and 10's consumers without idem, as
	// tests do to prove that their ledger checks catch a second effect.
	unguarded bool
}

// scenario is one thing users fear, with what must happen.
type scenario struct {
	title, expected string
	play            func(d *demo, ctx context.Context) (observed string, err error)
}

var scenarios = []scenario{
	{"20 identical concurrent POSTs over 3 instances", "1 charge, 20 identical 201s", (*demo).burst},
	{"response lost, the client retries", "stored response, no new charge", (*demo).lostResponse},
	{"same key, different amount", "422, no charge", (*demo).mismatch},
	{"Redis dies in the middle of a burst", "exactly 1 charge per key", (*demo).redisDies},
	{"queue redelivers one event 50 times", "processed once, in its transaction", (*demo).redelivery},
	{"retry with a new timestamp and trace ID", "same request: replayed", (*demo).noisyRetry},
	{"CRM sync: v17 twice, then a late v16", "applied once, v16 skipped", (*demo).crmSync},
	{"charge and idem's record in one transaction, response killed after the commit", "retry replays, 1 charge", (*demo).inTxCrash},
	{"JetStream: 3 consumers, one dies between commit and ack; the publisher retries", "1 shipment per order, every message acked", (*demo).queue},
	{"Kafka: a group of 3, one dies between its transaction and its offset commit; the publisher retries", "1 ledger row per event, every offset committed", (*demo).kafka},
}

func (d *demo) url(i int) string { return d.instances[i%len(d.instances)].url() }

func (d *demo) merchant() string { return "merchant-" + d.run }

// chargesFor counts the charges recorded for a customer.
func (d *demo) chargesFor(ctx context.Context, customer string) (int, error) {
	n, err := d.db.NewSelect().Model((*Charge)(nil)).Where("customer = ?", customer).Count(ctx)
	return int(n), err
}

// fire sends n identical requests at once, spread over the instances.
func (d *demo) fire(ctx context.Context, n int, key, body string) []response {
	out := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = post(ctx, d.url(i), d.merchant(), key, body)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// identical checks that every response is a 201 equal to the first.
func identical(rs []response) error {
	for i, r := range rs {
		if r.err != nil {
			return fmt.Errorf("request %d: %w", i, r.err)
		}
		if r.status != 201 || !r.same(rs[0]) {
			return fmt.Errorf("request %d got %d %q, request 0 got %d %q", i, r.status, r.body, rs[0].status, rs[0].body)
		}
	}
	return nil
}

func replays(rs []response) int {
	n := 0
	for _, r := range rs {
		if r.replayed {
			n++
		}
	}
	return n
}

func expectCharges(got, want int) error {
	if got != want {
		return fmt.Errorf("%d charges recorded, want %d", got, want)
	}
	return nil
}

func (d *demo) burst(ctx context.Context) (string, error) {
	customer := "cus_burst_" + d.run
	rs := d.fire(ctx, 20, "order-1001-"+d.run, chargeBody(4200, customer, "2026-11-30T10:00:00Z", "t1"))
	if err := identical(rs); err != nil {
		return "", err
	}
	n, err := d.chargesFor(ctx, customer)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d charge, %d identical 201s (%d replays)", n, len(rs), replays(rs)), expectCharges(n, 1)
}

func (d *demo) lostResponse(ctx context.Context) (string, error) {
	customer := "cus_lost_" + d.run
	key := "order-2002-" + d.run
	body := chargeBody(1999, customer, "2026-11-30T10:01:00Z", "t2")
	// The server does the work; the answer is lost on the way back.
	if err := postAndVanish(d.url(0), d.merchant(), key, body); err != nil {
		return "", fmt.Errorf("first attempt: %w", err)
	}
	// The caller retries with the same key; the client half waits out a 409
	// while the first attempt is still completing.
	retry := postTo(ctx, retrying, d.url(1)+"/charges", d.merchant(), key, body)
	again := postTo(ctx, retrying, d.url(2)+"/charges", d.merchant(), key, body)
	if retry.status != 201 || !retry.same(again) || !retry.replayed || !again.replayed {
		return "", fmt.Errorf("retries got %d %q (replay %v) and %d %q (replay %v), want the stored 201 twice",
			retry.status, retry.body, retry.replayed, again.status, again.body, again.replayed)
	}
	n, err := d.chargesFor(ctx, customer)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("201 replayed twice, %d charge", n), expectCharges(n, 1)
}

func (d *demo) mismatch(ctx context.Context) (string, error) {
	customer := "cus_mismatch_" + d.run
	key := "order-3003-" + d.run
	first := post(ctx, d.url(0), d.merchant(), key, chargeBody(500, customer, "t", "a"))
	// Retried by the client half? No: a 422 is the caller's mistake.
	second := postTo(ctx, retrying, d.url(1)+"/charges", d.merchant(), key, chargeBody(50000, customer, "t", "a"))
	if first.status != 201 || second.status != 422 {
		return "", fmt.Errorf("got %d then %d, want 201 then 422", first.status, second.status)
	}
	n, err := d.chargesFor(ctx, customer)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("422 for the new amount, %d charge", n), expectCharges(n, 1)
}

func (d *demo) redisDies(ctx context.Context) (string, error) {
	defer d.b.reviveRedis()
	const keys = 5
	customers := make([]string, keys)
	results := make([][]response, keys)
	var wg sync.WaitGroup
	for k := range keys {
		customers[k] = fmt.Sprintf("cus_redis_%d_%s", k, d.run)
		wg.Go(func() {
			results[k] = d.fire(ctx, 20, fmt.Sprintf("order-4%03d-%s", k, d.run), chargeBody(100+int64(k), customers[k], "t", "x"))
		})
	}
	before := d.b.redisErrors.Load()
	time.Sleep(15 * time.Millisecond) // the bursts are in flight: the providers take 25 ms
	d.b.killRedis()
	wg.Wait()
	redisErrors := d.b.redisErrors.Load() - before
	if redisErrors == 0 {
		return "", errors.New("no instance saw Redis fail: it died too late to matter")
	}
	total := 0
	for k := range keys {
		if err := identical(results[k]); err != nil {
			return "", fmt.Errorf("key %d: %w", k, err)
		}
		n, err := d.chargesFor(ctx, customers[k])
		if err != nil {
			return "", err
		}
		if err := expectCharges(n, 1); err != nil {
			return "", fmt.Errorf("key %d: %w", k, err)
		}
		total += n
	}
	return fmt.Sprintf("%d keys × 20 requests: %d charges, identical 201s (%d Redis errors absorbed)", keys, total, redisErrors), nil
}

func (d *demo) redelivery(ctx context.Context) (string, error) {
	event := "evt_refund_" + d.run
	var wg sync.WaitGroup
	var mu sync.Mutex
	processed, duplicates, failed := 0, 0, 0
	for i := range 50 {
		wg.Go(func() {
			sql := d.instances[i%len(d.instances)].sql
			dup, err := sql.InTx(ctx, "ledger", event, func(ctx context.Context, tx bun.Tx) error {
				_, err := tx.NewInsert().Model(&LedgerEntry{EventID: event, Amount: -4200}).Exec(ctx)
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed++
			case dup:
				duplicates++
			default:
				processed++
			}
		})
	}
	wg.Wait()
	n, err := d.db.NewSelect().Model((*LedgerEntry)(nil)).Where("event_id = ?", event).Count(ctx)
	rows := int(n)
	if err != nil {
		return "", err
	}
	obs := fmt.Sprintf("processed %d, duplicates %d, ledger rows %d", processed, duplicates, rows)
	if processed != 1 || duplicates != 49 || failed != 0 || rows != 1 {
		return obs, fmt.Errorf("%s, failed %d", obs, failed)
	}
	return obs, nil
}

func (d *demo) noisyRetry(ctx context.Context) (string, error) {
	customer := "cus_noisy_" + d.run
	key := "order-6006-" + d.run
	first := post(ctx, d.url(0), d.merchant(), key, chargeBody(7500, customer, "2026-11-30T10:06:00.000Z", "4bf92f3577b34da6a3ce929d0e0e4736"))
	retry := post(ctx, d.url(1), d.merchant(), key, chargeBody(7500, customer, "2026-11-30T10:06:03.512Z", "00f067aa0ba902b7a1b2c3d4e5f60718"))
	if first.status != 201 || !first.same(retry) || !retry.replayed {
		return "", fmt.Errorf("got %d then %d %q (replay %v)", first.status, retry.status, retry.body, retry.replayed)
	}
	n, err := d.chargesFor(ctx, customer)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("201 replayed, %d charge", n), expectCharges(n, 1)
}

func (d *demo) crmSync(ctx context.Context) (string, error) {
	id := "crm_4821_" + d.run
	sql := d.instances[0].sql
	applied := []int64{}
	for _, v := range []int64{17, 17, 16} {
		err := sql.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			newer, err := sql.AdvanceVersion(ctx, tx, "crm", id, v)
			if err != nil || !newer {
				return err
			}
			applied = append(applied, v)
			c := &Customer{ExternalID: id, Name: fmt.Sprintf("Ada Lovelace (v%d)", v), Version: v}
			_, err = tx.NewInsert().Model(c).On("CONFLICT (external_id) DO UPDATE").
				Set("name = EXCLUDED.name").Set("version = EXCLUDED.version").Exec(ctx)
			return err
		})
		if err != nil {
			return "", err
		}
	}
	var c Customer
	if err := d.db.NewSelect().Model(&c).Where("external_id = ?", id).Scan(ctx); err != nil {
		return "", err
	}
	obs := fmt.Sprintf("applied %v, stored v%d", applied, c.Version)
	if len(applied) != 1 || applied[0] != 17 || c.Version != 17 {
		return obs, errors.New(obs + ": want only v17 applied")
	}
	return obs + ", v16 skipped", nil
}
