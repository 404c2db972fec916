package idem_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/client"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// human writes a duration as docs/configuration.md does: "250 ms", "30 s",
// "1 min", "24 h", "7 days".
func human(d time.Duration) string {
	switch {
	case d >= 48*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d == time.Minute:
		return "1 min"
	case d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d ms", d/time.Millisecond)
}

// mib writes a size in bytes as the guide does: "32 MiB".
func mib(n int) string { return fmt.Sprintf("%d MiB", n>>20) }

// The configuration guide states every default as the code defines it: a
// changed default fails here until the guide says so.
func TestConfigurationGuideDefaults(t *testing.T) {
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	// The default cell of each option's row, under the constructor whose
	// table it is in.
	got := map[string]string{}
	pkg := ""
	newOf := regexp.MustCompile("^`([a-z]+)\\.New[(`]")
	row := regexp.MustCompile("^\\| `(With[A-Za-z]+)")
	for _, line := range strings.Split(string(doc), "\n") {
		if m := newOf.FindStringSubmatch(line); m != nil {
			pkg = m[1]
		}
		if m := row.FindStringSubmatch(line); m != nil && pkg != "" {
			got[pkg+"."+m[1]] = strings.Split(line, "|")[2]
		}
	}
	want := map[string][]string{
		"tiered.WithLease":             {human(tiered.DefaultLease)},
		"tiered.WithRetention":         {human(tiered.DefaultRetention)},
		"tiered.WithWait":              {human(tiered.DefaultWait)},
		"tiered.WithLocalCache":        {fmt.Sprintf("%d,%03d", tiered.DefaultCacheItems/1000, tiered.DefaultCacheItems%1000), mib(tiered.DefaultCacheBytes), human(tiered.DefaultCacheTTL)},
		"tiered.WithTimeouts":          {human(tiered.DefaultRedisTimeout), human(tiered.DefaultSQLTimeout)},
		"tiered.WithRedisFallback":     {fmt.Sprint(tiered.DefaultRedisFailures), human(tiered.DefaultRedisCooldown)},
		"redislayer.WithPrefix":        {"`" + redislayer.DefaultPrefix + "`"},
		"redislayer.WithTimeout":       {human(redislayer.DefaultTimeout)},
		"sqllayer.WithRecordsTable":    {sqllayer.DefaultRecordsTable, sqllayer.DefaultEventsTable, sqllayer.DefaultVersionsTable},
		"sqllayer.WithRetries":         {fmt.Sprint(sqllayer.DefaultRetries)},
		"sqllayer.WithEventRetention":  {human(sqllayer.DefaultEventRetention)},
		"middleware.WithKeyHeader":     {middleware.DefaultKeyHeader},
		"middleware.WithBodyLimit":     {mib(middleware.DefaultBodyLimit)},
		"middleware.WithResponseLimit": {mib(middleware.DefaultResponseLimit)},
		"middleware.WithRetryAfter":    {human(middleware.DefaultRetryAfterInFlight), human(middleware.DefaultRetryAfterUnavailable)},
		"middleware.WithReplayHeaders": middleware.DefaultReplayHeaders(),
		"middleware.WithMethods":       {"POST", "PATCH"},
		"middleware.WithFingerprint":   {"fingerprint.New()"},
		"tiered.WithFailOpen":          {"false"},
		"middleware.WithReplayMarker":  {"off"},
		"sqllayer.WithReserveOrder":    {"adaptive"},
		"redislayer.WithReserveOrder":  {"adaptive"},
		"middleware.WithDerivedKey":    {"off"},
		"middleware.WithRequire":       {"off"},
		"middleware.WithErrorWriter":   {"RFC 9457"},
		"middleware.WithKeep":          {"408, 425, 429"},
		"tiered.WithObserver":          {"none"},
		"middleware.WithScope":         {"required"},
		"middleware.WithStatuses":      {"below"},
		"tiered.WithSQL":               {"none"},
		"tiered.WithRedis":             {"none"},

		// The server's half of the retry contract, and the client half.
		"middleware.WithShouldRetryHeader": {"`" + middleware.DefaultShouldRetryHeader + "`"},
		"client.WithKeyHeader":             {"`" + client.DefaultKeyHeader + "`"},
		"client.WithAttempts":              {fmt.Sprint(client.DefaultAttempts)},
		"client.WithAttemptTimeout":        {human(client.DefaultAttemptTimeout)},
		"client.WithDeadline":              {human(client.DefaultDeadline)},
		"client.WithBackoff":               {human(client.DefaultBackoff), human(client.DefaultMaxBackoff)},
		"client.WithBodyLimit":             {mib(client.DefaultBodyLimit)},
		"client.WithMethods":               {"POST", "PATCH"},
	}
	for opt, parts := range want {
		cell, ok := got[opt]
		if !ok {
			t.Errorf("docs/configuration.md has no row for %s", opt)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(cell, p) {
				t.Errorf("docs/configuration.md gives %s the default %q; the code's is %q", opt, strings.TrimSpace(cell), p)
			}
		}
	}
}
