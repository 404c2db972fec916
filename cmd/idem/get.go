package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/idemkit/idem"
)

var getCommand = command{
	name:  "get",
	usage: "get --scope S KEY | --digest HEX",
	flags: func(fs *flag.FlagSet) func(context.Context, *config, []string) int {
		k := bindKey(fs)
		return func(ctx context.Context, c *config, args []string) int {
			key, err := k.key(args)
			if err != nil {
				return fail(c, err)
			}
			t, err := c.open(ctx)
			if err != nil {
				return fail(c, err)
			}
			defer t.close()
			r := t.lookup(ctx, key)
			if c.json {
				if err := printJSON(c.env.stdout, r); err != nil {
					return fail(c, err)
				}
			} else {
				r.print(c)
			}
			switch {
			case r.failed():
				return exitError
			case !r.found():
				return exitNotFound
			}
			return exitOK
		}
	},
}

// lookup is a key's record in every configured tier.
type lookup struct {
	Digest    string   `json:"digest"`
	Scope     *string  `json:"scope,omitempty"`
	ClientKey *string  `json:"client_key,omitempty"`
	Tiers     []view   `json:"tiers"`
	Disagree  []string `json:"disagree,omitempty"`
}

func (t *tiers) lookup(ctx context.Context, key idem.Key) lookup {
	r := lookup{Digest: key.Hex()}
	if key.Scope() != "" || key.ClientKey() != "" {
		s, c := key.Scope(), key.ClientKey()
		r.Scope, r.ClientKey = &s, &c
	}
	if t.sql != nil {
		r.Tiers = append(r.Tiers, inspect(key, "sql", func() (view, error) {
			e, err := t.sql.Admin().Inspect(ctx, key)
			return sqlView(e), err
		}))
	}
	if t.redis != nil {
		r.Tiers = append(r.Tiers, inspect(key, "redis", func() (view, error) {
			e, err := t.redis.Admin().Inspect(ctx, key)
			return redisView(e), err
		}))
	}
	r.Disagree = disagreement(r.Tiers)
	return r
}

// inspect returns one tier's view of key: read's, or the tier without a
// record, or with the error that kept it from answering.
func inspect(key idem.Key, tier string, read func() (view, error)) view {
	v, err := read()
	switch {
	case err == nil:
		return v
	case errors.Is(err, idem.ErrNotFound):
		return view{Tier: tier, Digest: key.Hex()}
	}
	return view{Tier: tier, Digest: key.Hex(), Error: err.Error()}
}

// disagreement says how the tiers' records differ in what a retry would
// see. Redis missing a record SQL holds is normal (Redis is a cache that
// SQL back-fills); the other differences are worth an operator's look.
func disagreement(vs []view) []string {
	if len(vs) != 2 || !vs[0].Found || !vs[1].Found || vs[0].Expired {
		if len(vs) == 2 && !vs[0].Found && vs[0].Error == "" && vs[1].Found {
			return []string{"redis holds a record that sql does not: the sql claim was never written, or was released or swept"}
		}
		return nil
	}
	s, r := vs[0], vs[1]
	var out []string
	if s.State != r.State {
		out = append(out, fmt.Sprintf("state: sql %s, redis %s", s.State, r.State))
	}
	if s.Fingerprint != r.Fingerprint {
		out = append(out, "fingerprint: the tiers hold different requests")
	}
	if s.Answer != nil && r.Answer != nil && (s.Answer.Bytes != r.Answer.Bytes || s.Answer.Kind != r.Answer.Kind) {
		out = append(out, fmt.Sprintf("answer: sql %s of %d bytes, redis %s of %d bytes", s.Answer.Kind, s.Answer.Bytes, r.Answer.Kind, r.Answer.Bytes))
	}
	return out
}

func (r lookup) found() bool {
	for _, v := range r.Tiers {
		if v.Found {
			return true
		}
	}
	return false
}

func (r lookup) failed() bool {
	for _, v := range r.Tiers {
		if v.Error != "" {
			return true
		}
	}
	return false
}

func (r lookup) print(c *config) {
	w := c.env.stdout
	fmt.Fprintf(w, "key %s  scope %s  client key %s\n\n", r.Digest, quoted(r.Scope), quoted(r.ClientKey))
	rows := make([][]string, 0, len(r.Tiers))
	for _, v := range r.Tiers {
		rows = append(rows, []string{v.Tier, v.status(), short(v.Fingerprint, 12), v.leaseLeft(), v.age(),
			v.expiresIn(), short(v.Token, 8), quoted(v.Scope), quoted(v.ClientKey)})
	}
	table(w, []string{"TIER", "STATE", "FINGERPRINT", "LEASE LEFT", "AGE", "EXPIRES IN", "TOKEN", "SCOPE", "CLIENT KEY"}, rows)
	for _, v := range r.Tiers {
		if v.Answer == nil {
			continue
		}
		fmt.Fprintf(w, "\nanswer in %s:\n", v.Tier)
		for _, l := range v.Answer.lines() {
			fmt.Fprintln(w, "  "+l)
		}
	}
	for _, d := range r.Disagree {
		fmt.Fprintln(w, "\nthe tiers disagree: "+d)
	}
	if !r.found() && !r.failed() {
		fmt.Fprintln(w, "\nno tier holds this key: the next request with it runs.")
	}
}
