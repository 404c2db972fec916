package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os/user"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
)

var releaseCommand = command{
	name:  "release",
	usage: `release --scope S KEY | --digest HEX --reason "…" [--by NAME] [--forget --yes]`,
	flags: func(fs *flag.FlagSet) func(context.Context, *config, []string) int {
		k := bindKey(fs)
		reason := fs.String("reason", "", "why, for the audit (required)")
		by := fs.String("by", "", "who, for the audit (default: the OS user)")
		forget := fs.Bool("forget", false, "also delete a completed record, so that the next retry runs the work again")
		yes := fs.Bool("yes", false, "confirm --forget without typing the key")
		return func(ctx context.Context, c *config, args []string) int {
			key, err := k.key(args)
			if err != nil {
				return fail(c, err)
			}
			if strings.TrimSpace(*reason) == "" {
				return fail(c, usagef("--reason is required: say why, for the audit"))
			}
			who := *by
			if who == "" {
				if who = osUser(c.env); who == "" {
					return fail(c, usagef("--by is required: the OS user is unknown"))
				}
			}
			t, err := c.open(ctx)
			if err != nil {
				return fail(c, err)
			}
			defer t.close()
			rel := &release{c: c, t: t, key: key, note: sqllayer.Note{By: who, Reason: *reason}, forget: *forget, yes: *yes,
				confirm: strings.Join(append(args, k.digest), "")}
			return rel.run(ctx)
		}
	},
}

// osUser names the OS user running the command, or "".
func osUser(e env) string {
	if e.user != "" {
		return e.user
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return e.getenv("USER")
}

// afterRead, when set (by tests), runs between the release's read of the
// records and its compare-and-sets: where a real owner's completion can
// land.
var afterRead func()

// release is one run of the release command.
type release struct {
	c       *config
	t       *tiers
	key     idem.Key
	note    sqllayer.Note
	forget  bool
	yes     bool
	confirm string // what the operator types to confirm --forget

	results []result
}

// result is what the release did in one tier.
type result struct {
	Tier    string `json:"tier"`
	Action  string `json:"action"`
	State   string `json:"state"`
	Token   string `json:"token"`
	Outcome string `json:"outcome"`
}

func (r *release) run(ctx context.Context) int {
	var sqlE *sqllayer.Entry
	var redisE *redislayer.Entry
	if r.t.sql != nil {
		a := r.t.sql.Admin()
		if err := a.Init(ctx); err != nil {
			return fail(r.c, fmt.Errorf("the audit table: %w (no release without its audit)", err))
		}
		e, err := a.Inspect(ctx, r.key)
		switch {
		case err == nil:
			sqlE = &e
		case !errors.Is(err, idem.ErrNotFound):
			return fail(r.c, err)
		}
	}
	if r.t.redis != nil {
		e, err := r.t.redis.Admin().Inspect(ctx, r.key)
		switch {
		case err == nil:
			redisE = &e
		case !errors.Is(err, idem.ErrNotFound):
			return fail(r.c, err)
		}
	}
	if afterRead != nil {
		afterRead()
	}
	if sqlE == nil && redisE == nil {
		fmt.Fprintf(r.c.env.stderr, "idem: no tier holds key %s: nothing to release\n", r.key.Hex())
		return exitNotFound
	}
	completed := (sqlE != nil && sqlE.State == idem.StateCompleted) || (redisE != nil && redisE.State == idem.StateCompleted)
	if completed && !r.forget {
		fmt.Fprintf(r.c.env.stderr, "idem: key %s is completed: its answer is replayed to every retry; "+
			"refusing to release it (--forget deletes it, and the next retry runs the work again)\n", r.key.Hex())
		return exitRefused
	}
	if completed && !r.yes && !r.confirmed() {
		fmt.Fprintln(r.c.env.stderr, "idem: --forget not confirmed: nothing changed")
		return exitRefused
	}
	if sqlE != nil {
		a := r.t.sql.Admin()
		out, action := sqllayer.Outcome(""), "release"
		var err error
		if sqlE.State == idem.StateCompleted {
			action = "forget"
			out, err = a.Forget(ctx, *sqlE, r.note)
		} else {
			out, err = a.Release(ctx, *sqlE, r.note)
		}
		if err != nil {
			return fail(r.c, err)
		}
		r.record("sql", action, sqlE.State, sqlE.Token, string(out))
		if out != sqllayer.Freed {
			// The deciding tier's record changed under the operator: the
			// owner completed, or another claim took the key. Leave
			// Redis as it is.
			return r.finish(exitNothing)
		}
	}
	if redisE != nil {
		if code := r.releaseRedis(ctx, *redisE); code != exitOK {
			return code
		}
	}
	for _, res := range r.results {
		if res.Outcome == string(sqllayer.Freed) {
			return r.finish(exitOK)
		}
	}
	return r.finish(exitNothing)
}

func (r *release) releaseRedis(ctx context.Context, e redislayer.Entry) int {
	a := r.t.redis.Admin()
	action, out := "release", redislayer.Outcome("")
	var err error
	if e.State == idem.StateCompleted {
		action = "forget"
		out, err = a.Forget(ctx, e)
	} else {
		out, err = a.Release(ctx, e)
	}
	if err != nil {
		return fail(r.c, err)
	}
	r.record("redis", action, e.State, e.Token, string(out))
	if r.t.sql != nil {
		err := r.t.sql.Admin().Record(ctx, sqllayer.AuditEntry{Note: r.note, Action: action, Tier: idem.TierRedis,
			Outcome: sqllayer.Outcome(out), Key: r.key, Token: e.Token})
		if err != nil {
			return fail(r.c, fmt.Errorf("the Redis %s was done (%s) but its audit row was not written: %w", action, out, err))
		}
	}
	return exitOK
}

// record keeps what one tier's action did and writes its audit line to
// the standard error.
func (r *release) record(tier, action string, state idem.State, token, outcome string) {
	r.results = append(r.results, result{Tier: tier, Action: action, State: state.String(), Token: token, Outcome: outcome})
	slog.New(slog.NewTextHandler(r.c.env.stderr, nil)).Info("idem audit",
		"by", r.note.By, "action", action, "tier", tier, "key", r.key.Hex(), "scope", r.key.Scope(),
		"client_key", r.key.ClientKey(), "token", token, "state", state.String(), "outcome", outcome, "reason", r.note.Reason)
}

// confirmed asks the operator to type the key again before a forget.
func (r *release) confirmed() bool {
	fmt.Fprintf(r.c.env.stderr, "idem: --forget deletes a completed record: the next retry runs the work again.\n"+
		"type the key (%s) to confirm: ", r.confirm)
	if r.c.env.stdin == nil {
		return false
	}
	line, err := bufio.NewReader(r.c.env.stdin).ReadString('\n')
	if err != nil && line == "" {
		return false
	}
	return strings.TrimSpace(line) == r.confirm
}

func (r *release) finish(code int) int {
	if r.c.json {
		if err := printJSON(r.c.env.stdout, map[string]any{"digest": r.key.Hex(), "results": r.results}); err != nil {
			return fail(r.c, err)
		}
		return code
	}
	rows := make([][]string, 0, len(r.results))
	for _, res := range r.results {
		rows = append(rows, []string{res.Tier, res.Action, res.State, short(res.Token, 8), res.Outcome})
	}
	table(r.c.env.stdout, []string{"TIER", "ACTION", "STATE READ", "TOKEN", "OUTCOME"}, rows)
	switch code {
	case exitOK:
		fmt.Fprintln(r.c.env.stdout, "\nfreed: the next retry with this key runs the work again.")
	case exitNothing:
		fmt.Fprintln(r.c.env.stdout, "\nfreed nothing: the record changed since it was read (its owner completed, or a new claim took it); it stands.")
	}
	return code
}
