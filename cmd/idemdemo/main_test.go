package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demonstration is part of the test suite: every scenario must pass on
// the embedded backends, and on the real ones when the environment names
// them.
func TestDemoScenarios(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"embedded", []string{"-redis", "", "-postgres", ""}},
	}
	// The real servers, when this machine has them (required under
	// IDEM_REQUIRE_SERVICES=1).
	_, rerr := testenv.RedisOptions()
	_, perr := testenv.PostgresDSN()
	switch {
	case rerr == nil && perr == nil:
		cases = append(cases, struct {
			name string
			args []string
		}{"real", []string{"-redis", orDefault(testenv.EnvRedis, testenv.DefaultRedisURL), "-postgres", orDefault(testenv.EnvPostgres, testenv.DefaultPostgresDSN)}})
	case testenv.Required():
		t.Fatalf("real services required but unavailable: redis: %v, postgres: %v", rerr, perr)
	default:
		t.Logf("no real redis and postgres (%v, %v): the demo runs on the embedded pair only", rerr, perr)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if code := run(tc.args, &out, &errs); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out.String(), errs.String())
			}
			if !strings.Contains(out.String(), fmt.Sprintf("all %d scenarios passed", len(scenarios))) {
				t.Fatalf("output:\n%s", out.String())
			}
			t.Log("\n" + out.String())
		})
	}
}

func orDefault(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

func TestBadBackendIsAClearError(t *testing.T) {
	var out, errs bytes.Buffer
	code := run([]string{"-redis", "redis://127.0.0.1:1/0", "-postgres", ""}, &out, &errs)
	if code == 0 || !strings.Contains(errs.String(), "does not answer") {
		t.Fatalf("exit %d, stderr %q: want a clear error", code, errs.String())
	}
}

// The queue scenario's ledger check is what makes it fail loudly: played
// without idem, the redelivery after the consumer's death and the
// publisher's re-sent orders ship twice, and the scenario says so.
func TestQueueLedgerCatchesASecondShipment(t *testing.T) {
	b, err := openBackends("", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	db, err := b.openDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := createSchema(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	d := &demo{run: randomRun(), b: b, db: db, unguarded: true}
	for _, name := range []string{"instance-a", "instance-b", "instance-c"} {
		in, err := startInstance(name, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer in.close()
		d.instances = append(d.instances, in)
	}
	obs, err := d.queue(t.Context())
	if err == nil || !strings.Contains(err.Error(), "the ledger is wrong") {
		t.Fatalf("unguarded consumers: observed %q, error %v; want the ledger check to fail", obs, err)
	}
	// Order 5: shipped, redelivered after the death, re-sent under a new
	// ID. Order 10: re-sent under a new ID. Order 3: retried with the same
	// ID, which JetStream dropped: that retry needs no idem.
	for _, want := range []string{orderID(d.run, 5) + " shipped 3 times", orderID(d.run, 10) + " shipped 2 times"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the ledger error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), orderID(d.run, 3)) {
		t.Errorf("the ledger error %q names order 3, whose same-ID retry JetStream drops", err)
	}
	t.Log(obs)
}

// The Kafka scenario's ledger check fails loudly too: without the
// processed-event row, the records the dead member had not committed and
// the publisher's retries are paid twice.
func TestKafkaLedgerCatchesASecondPayment(t *testing.T) {
	b, err := openBackends("", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	db, err := b.openDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := createSchema(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	d := &demo{run: randomRun(), b: b, db: db, unguarded: true}
	for _, name := range []string{"instance-a", "instance-b", "instance-c"} {
		in, err := startInstance(name, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer in.close()
		d.instances = append(d.instances, in)
	}
	obs, err := d.kafka(t.Context())
	if err == nil || !strings.Contains(err.Error(), "the ledger is wrong") {
		t.Fatalf("unguarded members: observed %q, error %v; want the ledger check to fail", obs, err)
	}
}
