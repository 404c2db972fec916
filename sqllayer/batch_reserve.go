package sqllayer

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// MUST AGREE with Reserve's own statements (reserve.go): a batch of claims
// answers each as Reserve alone would, or leaves it to them.
// FuzzBatchAgreesWithSingle (batch_fuzz_test.go) compares the two under
// make test; TestBatchedClaimsMixed pins every state a claim can meet.

// claimOut is a batch's answer to one claim. again: the batch could not
// decide the key, and the caller runs Reserve's own statements.
type claimOut struct {
	rec     idem.Record
	claimed bool
	err     error
	again   bool
}

// claimKey answers one Reserve: in a batch when batching is on, else, or
// when the batch leaves the key undecided, with Reserve's own statements.
func (l *Layer) claimKey(ctx context.Context, c *claim) (idem.Record, bool, error) {
	alone := func() claimOut {
		var out claimOut
		out.err = l.retry(ctx, func() (err error) {
			out.rec, out.claimed, err = l.reserve(ctx, c)
			return err
		})
		return out
	}
	var (
		out claimOut
		ok  bool
	)
	switch {
	case l.writes != nil:
		var w writeOut
		w, ok = l.writes.do(ctx, &writeOp{claim: c}, func() writeOut { return writeOut{claim: alone()} })
		out = w.claim
	case l.claims != nil:
		out, ok = l.claims.do(ctx, c, alone)
	default:
		out, ok = alone(), true
	}
	switch {
	case !ok:
		return idem.Record{}, false, ctx.Err()
	case out.again:
		out = alone()
	}
	return out.rec, out.claimed, out.err
}

// reserveMany answers a batch of claims: the keys in one multi-row INSERT
// that tolerates only the duplicate key (after one read of them all while
// most keys arrive taken, as Reserve reads first), then one read of the
// keys that were taken. A key the reads find expired, or lapsed for the
// same fingerprint, or missing after its INSERT lost (released meanwhile),
// and a key that appears twice, is left to its caller's own statements,
// which grant the grace or take over exactly as an unbatched Reserve does.
func (l *Layer) reserveMany(ctx context.Context, cs []*claim) []claimOut {
	if len(cs) == 1 {
		return []claimOut{{again: true}}
	}
	b := l.startClaims(ctx, cs)
	if len(b.todo) > 0 {
		claimed, rows, err := l.insertKeys(ctx, b.cs, b.todo, b.tokens)
		l.finishClaims(ctx, b, claimed, rows, err)
	}
	b.answerRepeats(l)
	return b.out
}

// claimBatch is a batch of claims between its statements.
type claimBatch struct {
	cs      []*claim
	out     []claimOut
	todo    []int           // the claims to insert, in key order
	tokens  []string        // the tokens of the claims to insert
	first   map[string]int  // each key's first claim in the batch
	repeats []int           // claims of a key an earlier claim in the batch carries
	found   map[string]*row // every row the batch read, for the repeats
}

// startClaims prepares a batch of claims for its INSERT: each key once, in
// key order, so that concurrent batches take their keys' locks in one
// order; and, while most keys arrive taken, after one read of them all
// that answers those it finds. todo is then what the INSERT carries.
func (l *Layer) startClaims(ctx context.Context, cs []*claim) *claimBatch {
	b := &claimBatch{
		cs:    cs,
		out:   make([]claimOut, len(cs)),
		todo:  make([]int, 0, len(cs)),
		first: make(map[string]int, len(cs)),
		found: make(map[string]*row, len(cs)),
	}
	for i, c := range cs {
		if _, ok := b.first[string(c.digest)]; ok {
			b.repeats = append(b.repeats, i)
			continue
		}
		b.first[string(c.digest)] = i
		b.todo = append(b.todo, i)
	}
	slices.SortFunc(b.todo, func(x, y int) int { return bytes.Compare(cs[x].digest, cs[y].digest) })
	if l.readFirst() {
		rows, err := l.readKeys(ctx, cs, b.todo)
		if err != nil {
			l.failed(ctx, "reserve", err, b.todo, func(i int, err error) { b.out[i].err = err }, func(i int) { b.out[i].again = true })
			b.todo = nil
			return b
		}
		b.todo = l.decide(cs, b.todo, rows, b.out, true)
		maps.Copy(b.found, rows)
	}
	if len(b.todo) > 0 {
		b.tokens = make([]string, len(cs))
		for _, i := range b.todo {
			b.tokens[i] = idem.NewToken()
		}
	}
	return b
}

// finishClaims answers the claims the INSERT carried, from what it
// claimed (and, on MySQL, the rows it read back of the others) or its
// error: the keys it did not claim are read in a new statement, which
// sees the claims that won even when the INSERT waited for their commit.
func (l *Layer) finishClaims(ctx context.Context, b *claimBatch, claimed map[string]claimTimes, rows map[string]*row, err error) {
	cs, out := b.cs, b.out
	if err != nil {
		l.failed(ctx, "reserve", err, b.todo, func(i int, err error) { out[i].err = err }, func(i int) { out[i].again = true })
		return
	}
	rest := make([]int, 0, len(b.todo))
	for _, i := range b.todo {
		if t, ok := claimed[string(cs[i].digest)]; ok {
			out[i] = claimOut{rec: cs[i].owner(b.tokens[i], t.lease, t.expires, l.resolution), claimed: true}
			l.seen.Learn(false)
			continue
		}
		l.seen.Learn(true)
		rest = append(rest, i)
	}
	if len(rest) == 0 {
		return
	}
	if rows == nil {
		if rows, err = l.readKeys(ctx, cs, rest); err != nil {
			l.failed(ctx, "reserve", err, rest, func(i int, err error) { out[i].err = err }, func(i int) { out[i].again = true })
			return
		}
	}
	l.decide(cs, rest, rows, out, false)
	maps.Copy(b.found, rows)
}

// answerRepeats answers the claims of a key an earlier claim in the batch
// carried, as a Reserve that came just after it would be answered: the
// record the first claimed, in progress and without its token, or the row
// the batch read, unless a claim could act on it; else the caller's own
// statements decide.
func (b *claimBatch) answerRepeats(l *Layer) {
	for _, j := range b.repeats {
		i := b.first[string(b.cs[j].digest)]
		switch r, ok := b.found[string(b.cs[j].digest)]; {
		case b.out[i].claimed:
			rec := b.out[i].rec
			rec.Token = ""
			b.out[j] = claimOut{rec: rec}
		case ok && !r.takeable(b.cs[j].fp):
			b.out[j] = claimOut{rec: r.record(b.cs[j].key, l.resolution)}
		default:
			b.out[j].again = true
		}
	}
}

// decide answers each claim of idx whose key rows holds and no claim may
// act on (live, completed or another fingerprint's). It returns the claims
// whose key is absent when absent is true (they go on to the INSERT);
// every other claim is left to its caller.
func (l *Layer) decide(cs []*claim, idx []int, rows map[string]*row, out []claimOut, absent bool) []int {
	var next []int
	for _, i := range idx {
		r, found := rows[string(cs[i].digest)]
		switch {
		case found && !r.takeable(cs[i].fp):
			out[i] = claimOut{rec: r.record(cs[i].key, l.resolution)}
			if absent {
				l.seen.Learn(true)
			}
		case !found && absent:
			next = append(next, i)
		default:
			out[i].again = true
		}
	}
	return next
}

// failed answers the claims or completions of idx after a batched
// statement failed with err: the error itself when the database could not
// be reached (a statement of their own would fail alike), else each call
// runs its own statements, so that a row the statement could not take fails
// only its own call.
func (l *Layer) failed(ctx context.Context, op string, err error, idx []int, fail func(i int, err error), again func(i int)) {
	k := classify(err, l.dialect)
	if ctx.Err() != nil || k == kindUnavailable || k == kindBroken {
		err = l.wrap(op, err)
		for _, i := range idx {
			fail(i, err)
		}
		return
	}
	for _, i := range idx {
		again(i)
	}
}

// claimTimes are a claim's lease and expiry, by the database's clock.
type claimTimes struct{ lease, expires time.Time }

// readKeys reads the records of the claims idx, by key digest.
func (l *Layer) readKeys(ctx context.Context, cs []*claim, idx []int) (map[string]*row, error) {
	keys := make([][]byte, len(idx))
	for j, i := range idx {
		keys[j] = cs[i].digest
	}
	args := l.keyArgs(keys)
	q := l.bst.readMany.get(len(idx))
	var rows map[string]*row
	err := l.retry(ctx, func() error {
		rows = make(map[string]*row, len(idx))
		return queryEach(ctx, l.pool(), q, args, func(scan func(...any) error) error {
			var key []byte
			r := l.newRow()
			if l.dialect != dialect.PG {
				if err := scan(append([]any{&key}, r.dest()...)...); err != nil {
					return err
				}
				rows[string(key)] = &r
				return nil
			}
			now := l.newRow().expiresAt
			if err := scan(append([]any{&key}, r.destAt(&now)...)...); err != nil {
				return err
			}
			r.at(now.t)
			rows[string(key)] = &r
			return nil
		})
	})
	return rows, err
}

// insertKeys inserts the claims idx, each with its token, where the key is
// free. It returns the lease and expiry of each key it claimed; on MySQL,
// which returns no rows from an INSERT, it reads the keys back and returns
// the rows of those it did not claim as well.
func (l *Layer) insertKeys(ctx context.Context, cs []*claim, idx []int, tokens []string) (map[string]claimTimes, map[string]*row, error) {
	args := l.claimArgs(cs, idx, tokens)
	q := l.bst.claim.get(len(idx))
	claimed := make(map[string]claimTimes, len(idx))
	if l.dialect == dialect.MySQL {
		if err := l.retry(ctx, func() error { _, err := l.pool().exec(ctx, q, args...); return err }); err != nil {
			return nil, nil, err
		}
		rows, err := l.readKeys(ctx, cs, idx)
		if err != nil {
			return nil, nil, err
		}
		for _, i := range idx {
			k := string(cs[i].digest)
			if r, ok := rows[k]; ok && string(r.token) == tokens[i] {
				claimed[k] = claimTimes{r.leaseUntil.t, r.expiresAt.t}
				delete(rows, k)
			}
		}
		return claimed, rows, nil
	}
	err := l.retry(ctx, func() error {
		clear(claimed)
		return queryEach(ctx, l.pool(), q, args, func(scan func(...any) error) error {
			var key []byte
			r := l.newRow()
			if err := scan(&key, &r.leaseUntil, &r.expiresAt); err != nil {
				return err
			}
			claimed[string(key)] = claimTimes{r.leaseUntil.t, r.expiresAt.t}
			return nil
		})
	})
	return claimed, nil, err
}

// keyArgs returns the arguments of a read of keys: one array on Postgres,
// else one argument each.
func (l *Layer) keyArgs(keys [][]byte) []any {
	if l.dialect == dialect.PG {
		return []any{l.byteaArg(keys)}
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	return args
}

// claimArgs returns the arguments of the claims idx, each with its token:
// seven arrays on Postgres, else the arguments of each claim in turn.
func (l *Layer) claimArgs(cs []*claim, idx []int, tokens []string) []any {
	if l.dialect != dialect.PG {
		args := make([]any, 0, 7*len(idx))
		for _, i := range idx {
			args = append(args, cs[i].args(tokens[i], nil)...)
		}
		return args
	}
	var (
		n        = len(idx)
		keys     = make([][]byte, n)
		scopes   = make([]string, n)
		clients  = make([]string, n)
		fps      = make([][]byte, n)
		toks     = make([][]byte, n)
		leases   = make([]int64, n)
		expiries = make([]int64, n)
	)
	for j, i := range idx {
		c := cs[i]
		keys[j], fps[j], toks[j], leases[j], expiries[j] = c.digest, c.fp, bin(tokens[i]), c.lease, c.expiry
		scopes[j], _ = c.scope.(string)
		clients[j], _ = c.client.(string)
	}
	return []any{l.byteaArg(keys), l.textArg(scopes), l.textArg(clients), l.byteaArg(fps), l.byteaArg(toks),
		l.int8Arg(leases), l.int8Arg(expiries)}
}

// releaseOrphan releases a claim a batch won for a caller that had left,
// within the claim's lease: after it the claim lapses anyway.
func (l *Layer) releaseOrphan(c *claim, out claimOut) {
	if !out.claimed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.lease)*time.Microsecond)
	defer cancel()
	_ = l.Release(ctx, c.key, out.rec.Token)
}

// queryEach runs a query and calls each for every row it returns.
func queryEach(ctx context.Context, q querier, query string, args []any, each func(scan func(...any) error) error) error {
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	return rows.Err()
}
