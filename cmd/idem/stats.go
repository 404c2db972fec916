package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/janitor"
)

var statsCommand = command{
	name:  "stats",
	usage: "stats [--janitor-lock KEY]",
	flags: func(fs *flag.FlagSet) func(context.Context, *config, []string) int {
		lock := fs.String("janitor-lock", janitor.DefaultLockKey, "the Redis key of the janitor's lock (its WithLockKey), to tell whether it sweeps now")
		return func(ctx context.Context, c *config, args []string) int {
			if len(args) != 0 {
				return fail(c, usagef("stats takes no arguments (got %q)", args))
			}
			t, err := c.open(ctx)
			if err != nil {
				return fail(c, err)
			}
			defer t.close()
			if t.sql == nil {
				return fail(c, usagef("stats counts the SQL tier's table: give a database"))
			}
			s, err := t.sql.Admin().Stats(ctx)
			if err != nil {
				return fail(c, err)
			}
			out := statsView{Table: c.records, InProgress: s.InProgress, Grace: s.Grace, Completed: s.Completed,
				Expired: s.Expired, Bytes: s.Bytes}
			if !s.OldestExpiry.IsZero() {
				out.OldestExpiredAgoMS = ms(s.Now.Sub(s.OldestExpiry))
			}
			if !s.OldestClaim.IsZero() {
				out.OldestClaimAgeMS = ms(s.Now.Sub(s.OldestClaim))
			}
			if last := s.LastSweep; !last.At.IsZero() {
				out.LastSweep = &sweepView{AgoMS: *ms(s.Now.Sub(last.At)), At: last.At.UTC().Format(time.RFC3339), By: last.By,
					Outcome: string(last.Outcome), Reason: last.Reason}
			}
			if t.client != nil {
				n, err := t.client.Exists(ctx, *lock).Result()
				if err != nil && !errors.Is(err, redis.Nil) {
					return fail(c, err)
				}
				sweeping := n == 1
				out.JanitorSweeping = &sweeping
			}
			if c.json {
				if err := printJSON(c.env.stdout, out); err != nil {
					return fail(c, err)
				}
				return exitOK
			}
			out.print(c)
			return exitOK
		}
	},
}

// statsView is what stats prints.
type statsView struct {
	Table      string `json:"table"`
	InProgress int64  `json:"in_progress"`
	Grace      int64  `json:"in_grace"`
	Completed  int64  `json:"completed"`
	// Expired rows wait for the janitor; the oldest expired so long ago
	// (the janitor has not swept since at least then).
	Expired            int64  `json:"expired"`
	OldestExpiredAgoMS *int64 `json:"oldest_expired_ago_ms,omitempty"`
	OldestClaimAgeMS   *int64 `json:"oldest_claim_age_ms,omitempty"`
	Bytes              int64  `json:"bytes"`
	// JanitorSweeping says whether the janitor's Redis lock is held now
	// (a sweep runs); absent without Redis.
	JanitorSweeping *bool `json:"janitor_sweeping,omitempty"`
	// LastSweep is the janitor's last run as the audit table recorded it;
	// absent when it recorded none (no audit table, or no run yet).
	LastSweep *sweepView `json:"janitor_last_run,omitempty"`
}

// sweepView is one run of the janitor.
type sweepView struct {
	AgoMS   int64  `json:"ago_ms"`
	At      string `json:"at"`
	By      string `json:"by"`
	Outcome string `json:"outcome"` // swept or failed
	Reason  string `json:"reason"`  // what it deleted, or why it failed
}

func (s statsView) print(c *config) {
	ago := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return human(time.Duration(*p)*time.Millisecond) + " ago"
	}
	size := "unknown"
	if s.Bytes >= 0 {
		size = fmt.Sprintf("%d bytes (%.1f MiB)", s.Bytes, float64(s.Bytes)/(1<<20))
	}
	rows := [][]string{
		{"in progress", fmt.Sprint(s.InProgress), "of which in a grace: " + fmt.Sprint(s.Grace) + "; oldest claim made " + ago(s.OldestClaimAgeMS)},
		{"completed", fmt.Sprint(s.Completed), ""},
		{"expired", fmt.Sprint(s.Expired), "awaiting the janitor; the oldest expired " + ago(s.OldestExpiredAgoMS)},
		{"size", size, "with indexes (SQLite: the whole database file)"},
	}
	last := "no run recorded (the janitor records its runs in the audit table once it exists: idem stats reads them)"
	if r := s.LastSweep; r != nil {
		last = fmt.Sprintf("%s %s ago (%s) by %s: %s", r.Outcome, human(time.Duration(r.AgoMS)*time.Millisecond), r.At, r.By, r.Reason)
	}
	rows = append(rows, []string{"janitor's last run", "", last})
	if s.JanitorSweeping != nil {
		rows = append(rows, []string{"janitor", map[bool]string{true: "sweeping now", false: "not sweeping now"}[*s.JanitorSweeping],
			"its lock in Redis"})
	}
	fmt.Fprintf(c.env.stdout, "table %s\n\n", s.Table)
	table(c.env.stdout, []string{"RECORDS", "COUNT", ""}, rows)
}
