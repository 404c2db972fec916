package idem_test

import (
	"fmt"
	"os"
	"regexp"
	"sort"
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
		"tiered.WithLogger":            {"slog.Default()"},
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

// docs/configuration.md names every exported With… option of every library
// package of every module (libraryOptions): as a row of the table under its
// package's constructor ("`pkg.New(…)`:" and then "| `WithX…"), or by its
// qualified name (`pkg.WithX`) anywhere in the guide. An option added
// without a word in the guide fails here.
func TestConfigurationGuideNamesEveryOption(t *testing.T) {
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	pkg := ""
	table := regexp.MustCompile("^`([a-z]+)\\.[A-Z][A-Za-z]*[(`]")
	option := regexp.MustCompile("`(With[A-Za-z]+)")
	qualified := regexp.MustCompile("`([a-z]+\\.With[A-Za-z]+)")
	for _, line := range strings.Split(string(doc), "\n") {
		if m := table.FindStringSubmatch(line); m != nil {
			pkg = m[1]
		}
		if strings.HasPrefix(line, "| `With") && pkg != "" {
			// The first cell of a row names its options:
			// "| `WithRecordsTable`, `WithEventsTable` |".
			for _, m := range option.FindAllStringSubmatch(strings.Split(line, "|")[1], -1) {
				named[pkg+"."+m[1]] = true
			}
		}
		for _, m := range qualified.FindAllStringSubmatch(line, -1) {
			named[m[1]] = true
		}
	}
	opts, _ := libraryOptions(t)
	var missing []string
	for key := range opts {
		if !named[key] {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	for _, key := range missing {
		t.Errorf("docs/configuration.md does not name %s: give it a row in its package's table, or name it as %s", key, key)
	}
}
