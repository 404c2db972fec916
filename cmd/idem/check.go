package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/idemkit/idem/tiered"
)

var checkCommand = command{
	name:  "check",
	usage: "check",
	flags: func(fs *flag.FlagSet) func(context.Context, *config, []string) int {
		return func(ctx context.Context, c *config, args []string) int {
			if len(args) != 0 {
				return fail(c, usagef("check takes no arguments (got %q)", args))
			}
			t, err := c.open(ctx)
			if err != nil {
				return fail(c, err)
			}
			defer t.close()
			var opts []tiered.Option
			if t.sql != nil {
				opts = append(opts, tiered.WithSQL(t.sql))
			}
			if t.redis != nil {
				opts = append(opts, tiered.WithRedis(t.redis))
			}
			s, err := tiered.New(opts...)
			if err != nil {
				return fail(c, err)
			}
			defer s.Close()
			report, _ := s.Check(ctx)
			if c.json {
				if err := printJSON(c.env.stdout, report); err != nil {
					return fail(c, err)
				}
			} else {
				rows := make([][]string, 0, len(report.Tiers))
				for _, tr := range report.Tiers {
					state := "ok"
					if tr.Err != nil {
						state = tr.Err.Error()
					}
					rows = append(rows, []string{tr.Tier.String(), fmt.Sprint(tr.Deciding), fmt.Sprint(tr.Fallback), human(tr.Latency), state})
				}
				table(c.env.stdout, []string{"TIER", "DECIDING", "FALLBACK", "LATENCY", "STATE"}, rows)
				fmt.Fprintf(c.env.stdout, "\nready: %v\n", report.Ready)
			}
			if !report.Ready {
				return exitError
			}
			return exitOK
		}
	},
}
