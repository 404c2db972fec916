package main

import (
	"context"
	"flag"
	"fmt"
	"time"
)

var listCommand = command{
	name:  "list",
	usage: "list --in-progress [--older-than D] [--limit N] [--tier sql|redis|all]",
	flags: func(fs *flag.FlagSet) func(context.Context, *config, []string) int {
		inProgress := fs.Bool("in-progress", false, "list in-progress claims whose lease lapsed, or older than --older-than (required)")
		olderThan := fs.Duration("older-than", 0, "also list claims made at least this long ago, however often renewed (SQL only; 0: every claim in progress)")
		limit := fs.Int("limit", 100, "list at most this many per tier")
		tier := fs.String("tier", "", `the tiers to list: "sql", "redis" (a SCAN of the whole keyspace) or "all"; default sql, or redis without a database`)
		return func(ctx context.Context, c *config, args []string) int {
			switch {
			case !*inProgress:
				return fail(c, usagef("list needs --in-progress (the one listing there is)"))
			case len(args) != 0:
				return fail(c, usagef("list takes no arguments (got %q)", args))
			case *limit <= 0 || *olderThan < 0:
				return fail(c, usagef("--limit must be positive and --older-than 0 or more"))
			}
			t, err := c.open(ctx)
			if err != nil {
				return fail(c, err)
			}
			defer t.close()
			sqlToo, redisToo := t.sql != nil, t.sql == nil
			switch *tier {
			case "":
			case "sql":
				sqlToo, redisToo = true, false
			case "redis":
				sqlToo, redisToo = false, true
			case "all":
				sqlToo, redisToo = true, true
			default:
				return fail(c, usagef("--tier: give sql, redis or all (got %q)", *tier))
			}
			if (sqlToo && t.sql == nil) || (redisToo && t.redis == nil) {
				return fail(c, usagef("--tier %s: that tier is not configured", *tier))
			}
			var out []view
			if sqlToo {
				es, err := t.sql.Admin().Stuck(ctx, *olderThan, *limit)
				if err != nil {
					return fail(c, err)
				}
				for _, e := range es {
					out = append(out, sqlView(e))
				}
			}
			if redisToo {
				es, err := t.redis.Admin().Stuck(ctx, *limit)
				if err != nil {
					return fail(c, err)
				}
				for _, e := range es {
					out = append(out, redisView(e))
				}
			}
			if c.json {
				if out == nil {
					out = []view{}
				}
				if err := printJSON(c.env.stdout, map[string]any{"claims": out}); err != nil {
					return fail(c, err)
				}
				return exitOK
			}
			printClaims(c, out, *olderThan)
			return exitOK
		}
	},
}

func printClaims(c *config, vs []view, olderThan time.Duration) {
	w := c.env.stdout
	if len(vs) == 0 {
		what := "no in-progress claim"
		if olderThan > 0 {
			what += fmt.Sprintf(" whose lease lapsed or made over %s ago", human(olderThan))
		}
		fmt.Fprintln(w, what+".")
		return
	}
	rows := make([][]string, 0, len(vs))
	for _, v := range vs {
		rows = append(rows, []string{v.Tier, v.Digest, quoted(v.Scope), quoted(v.ClientKey), v.status(), v.age(), v.leaseLeft()})
	}
	table(w, []string{"TIER", "DIGEST", "SCOPE", "CLIENT KEY", "STATE", "AGE", "LEASE LEFT"}, rows)
}
