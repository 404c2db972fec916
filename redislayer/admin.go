package redislayer

import (
	"context"
	_ "embed" // admin.lua
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

var (
	//go:embed admin.lua
	adminLua    string
	adminScript = redis.NewScript(adminLua)
)

// Admin is the operator's view of a Layer's records: read a record with
// its owner token, list the claims whose lease lapsed, free one with a
// compare-and-set on the token read. It serves the idem command and a
// service that mounts the same operations behind its own admin
// authentication; the library exposes no endpoint of its own. Redis keeps
// no audit: record what an Admin did where the SQL tier's Admin records
// its own (sqllayer.Admin.Record). It is safe for concurrent use.
type Admin struct{ l *Layer }

// Admin returns the operator's view of the layer's records.
func (l *Layer) Admin() *Admin { return &Admin{l: l} }

// Entry is a stored record as an operator sees it, with the owner token
// that a release compares. Redis keeps no labels (scope, client key) and no
// claim time: the SQL tier has them.
type Entry struct {
	// Key is the record's key, from its digest: it has no labels.
	Key idem.Key
	// Fingerprint is what the first request meant.
	Fingerprint string
	// State is idem.StateInProgress or idem.StateCompleted.
	State idem.State
	// Grace is set for an in-progress claim whose lapsed lease a Reserve
	// extended by a grace.
	Grace bool
	// Token is the owner token of the claim (kept once completed; a record
	// back-filled from another tier has none, "......................").
	Token string
	// Result is the stored result of a completed record.
	Result []byte
	// LeaseLeft is how long an in-progress claim's lease has left by
	// Redis's own clock (the key's TTL), negative when it lapsed; zero for
	// a completed record. ExpiresIn is the key's TTL.
	LeaseLeft, ExpiresIn time.Duration
	// LeaseUntil and ExpiresAt are the times the writer stored, by its
	// own clock: for reading only.
	LeaseUntil, ExpiresAt time.Time
}

// Inspect returns the record of key as stored, with its owner token, or
// idem.ErrNotFound. It never flags the record as waited.
func (a *Admin) Inspect(ctx context.Context, key idem.Key) (Entry, error) {
	if key.IsZero() {
		return Entry{}, idem.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	l := a.l
	reply, err := getScript.Run(ctx, l.client, []string{l.name(key)}, "").Slice()
	if isNil(err) {
		return Entry{}, idem.ErrNotFound
	}
	if err != nil {
		return Entry{}, l.fail(ctx, "inspect", err)
	}
	v, pttl, err := recordReply("inspect", reply)
	if err != nil {
		return Entry{}, err
	}
	s, err := decode(v)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Key: key, Fingerprint: strings.Clone(s.fp), Token: strings.Clone(s.token),
		ExpiresIn: time.Duration(max(pttl, 0)) * time.Millisecond, ExpiresAt: fromMillis(s.expiry)}
	if s.inProgress() {
		e.State, e.Grace = idem.StateInProgress, s.state == stateGrace
		e.LeaseLeft = time.Duration(pttl-s.mark) * time.Millisecond
		e.LeaseUntil = fromMillis(s.lease)
	} else {
		e.State, e.Result = idem.StateCompleted, []byte(s.result)
	}
	return e, nil
}

// Outcome is what a release or a forget did to the record.
type Outcome string

const (
	// Freed: the record read was deleted; the next Reserve claims the key.
	Freed Outcome = "freed"
	// Changed: the record is no longer the one read: nothing changed.
	Changed Outcome = "changed"
	// Absent: there was no record: nothing changed.
	Absent Outcome = "absent"
)

// Release frees the in-progress claim e (read with Inspect or Stuck): a
// compare-and-set on its token in one script, so that a claim that
// completed or was taken over since it was read is left as it is
// (Changed), and the key's waiters are woken. go-redis may send the script
// again after a network error: a release that freed the claim unseen then
// reports Absent.
func (a *Admin) Release(ctx context.Context, e Entry) (Outcome, error) {
	return a.change(ctx, "release", e, "p")
}

// Forget deletes the completed record e (read with Inspect), with a
// compare-and-set on its token, so that the next Reserve claims the key
// again. A record that changed since it was read is left as it is.
func (a *Admin) Forget(ctx context.Context, e Entry) (Outcome, error) {
	return a.change(ctx, "forget", e, "c")
}

func (a *Admin) change(ctx context.Context, op string, e Entry, which string) (Outcome, error) {
	l := a.l
	if e.Key.IsZero() {
		return "", idem.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	n, err := adminScript.Run(ctx, l.client, []string{l.name(e.Key)}, e.Token, which).Int64()
	switch {
	case err != nil:
		return "", l.fail(ctx, op, err)
	case n == 1:
		return Freed, nil
	case n == 0:
		return Changed, nil
	}
	return Absent, nil
}

// Stuck returns at most limit in-progress claims whose lease has lapsed,
// the longest lapsed first, found by a SCAN of the layer's keys: on every
// master of a *redis.ClusterClient and every shard of a *redis.Ring, on the
// one server otherwise. A SCAN visits the whole keyspace, in steps: run it
// from an operator's command, not on a request's path.
func (a *Admin) Stuck(ctx context.Context, limit int) ([]Entry, error) {
	l := a.l
	if limit <= 0 {
		return nil, fmt.Errorf("redislayer: Stuck needs a positive limit (got %d)", limit)
	}
	var (
		mu  sync.Mutex // guards out: a Cluster's and a Ring's nodes are scanned at once
		out []Entry
	)
	err := l.eachNode(ctx, func(ctx context.Context, c Client) error {
		return scanRecords(ctx, c, l.prefix, func(digest string) error {
			key, err := idem.KeyFromHex(digest)
			if err != nil {
				return nil // not a record of the layer's
			}
			e, err := a.Inspect(ctx, key)
			switch {
			case errors.Is(err, idem.ErrNotFound):
				return nil
			case err != nil:
				return err
			case e.State == idem.StateInProgress && e.LeaseLeft <= 0:
				mu.Lock()
				out = append(out, e)
				mu.Unlock()
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Entry) int { return int(a.LeaseLeft - b.LeaseLeft) })
	return out[:min(limit, len(out))], nil
}

// eachNode runs fn on every node that holds keys: each master of a
// Cluster, each shard of a Ring (those at once, each in a goroutine of
// go-redis's), the one server otherwise.
func (l *Layer) eachNode(ctx context.Context, fn func(context.Context, Client) error) error {
	each := func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) }
	switch c := l.client.(type) {
	case interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	}:
		return c.ForEachMaster(ctx, each)
	case interface {
		ForEachShard(context.Context, func(context.Context, *redis.Client) error) error
	}:
		return c.ForEachShard(ctx, each)
	}
	return fn(ctx, l.client)
}

// scanRecords calls fn with the digest of every key of one node that looks
// like a record under prefix (prefix{digest}).
func scanRecords(ctx context.Context, c Client, prefix string, fn func(digest string) error) error {
	pattern := globEscape(prefix) + "{*}"
	cursor := "0"
	for {
		cmd := redis.NewSliceCmd(ctx, "SCAN", cursor, "MATCH", pattern, "COUNT", 500)
		if err := c.Process(ctx, cmd); err != nil {
			return err
		}
		reply := cmd.Val()
		if len(reply) != 2 {
			return fmt.Errorf("redislayer: unexpected SCAN reply %v", reply)
		}
		cursor, _ = reply[0].(string)
		keys, _ := reply[1].([]any)
		for _, k := range keys {
			name, _ := k.(string)
			digest, ok := strings.CutPrefix(name, prefix+"{")
			if digest, ok2 := strings.CutSuffix(digest, "}"); ok && ok2 {
				if err := fn(digest); err != nil {
					return err
				}
			}
		}
		if cursor == "0" || cursor == "" {
			return nil
		}
	}
}

// globEscape escapes the characters a SCAN MATCH pattern gives a meaning.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}
