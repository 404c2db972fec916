package sqllayer_test

import (
	"testing"
	"time"
	_ "time/tzdata" // Asia/Tokyo for the DSNs below, wherever the tests run

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// TestMySQLTimesWhateverTheDSN: DATETIME columns hold UTC wall-clock times;
// the layer reads them right whether the driver parses them (in any
// location) or returns text.
func TestMySQLTimesWhateverTheDSN(t *testing.T) {
	s := testenv.MySQL(t)
	b := setup(t, s)
	ref, _ := b.layer(t)
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		parseTime bool
		loc       *time.Location
	}{
		{"text", false, time.UTC},
		{"parsed in another location", true, tokyo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := mysqldriver.ParseDSN(s.DSN)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ParseTime, cfg.Loc = tc.parseTime, tc.loc
			other := &testenv.SQL{Kind: s.Kind, DSN: cfg.FormatDSN(), Real: true}
			l := must.Get(sqllayer.New(other.Open(t), b.opts...))(t)
			k := idem.NewKey("mysql", testenv.Name("dsn"))
			rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
			if err != nil || !claimed {
				t.Fatal(claimed, err)
			}
			want, err := ref.Get(ctx(t), k)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.Get(ctx(t), k)
			if err != nil || !got.LeaseUntil.Equal(want.LeaseUntil) || !got.ExpiresAt.Equal(want.ExpiresAt) {
				t.Fatalf("Get = %v / %v (%v), want %v / %v", got.LeaseUntil, got.ExpiresAt, err, want.LeaseUntil, want.ExpiresAt)
			}
			if !rec.LeaseUntil.Equal(want.LeaseUntil) || !rec.ExpiresAt.Equal(want.ExpiresAt) {
				t.Fatalf("the claim said %v / %v, the row holds %v / %v", rec.LeaseUntil, rec.ExpiresAt, want.LeaseUntil, want.ExpiresAt)
			}
			if d := time.Until(got.LeaseUntil); d < 30*time.Second || d > 90*time.Second {
				t.Fatalf("lease ends in %v, want about a minute", d)
			}
		})
	}
}

// mysqlOddDSN is the MariaDB/MySQL of the tests under a DSN that sets
// neither parseTime nor loc=UTC but a location east of UTC: the driver
// returns DATETIME(6) columns as text, and would parse them in Tokyo.
// The layer needs neither setting, so the conformance suite runs on it too.
func mysqlOddDSN(tb testing.TB) *testenv.SQL {
	s := testenv.MySQL(tb)
	cfg, err := mysqldriver.ParseDSN(s.DSN)
	if err != nil {
		tb.Fatal(err)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ParseTime, cfg.Loc = false, tokyo
	return &testenv.SQL{Kind: s.Kind, DSN: cfg.FormatDSN(), Real: true}
}
