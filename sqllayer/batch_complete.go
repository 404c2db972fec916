package sqllayer

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// MUST AGREE with Complete's own statements (owner.go): a batch of
// completions answers each as Complete alone would, or leaves it to them.
// FuzzBatchAgreesWithSingle (batch_fuzz_test.go) compares the two under
// make test; TestBatchedCompletionsMixed pins the cases.

// completion is one Complete's arguments in the form the statements take.
type completion struct {
	key    idem.Key
	digest []byte
	token  []byte
	result []byte
	ttl    int64 // microseconds
}

// newCompletion returns Complete's arguments in the form the batched
// statement takes.
func newCompletion(key idem.Key, token string, result []byte, ttl time.Duration) *completion {
	if result == nil {
		result = []byte{}
	}
	d := key.Digest()
	return &completion{key: key, digest: d[:], token: bin(token), result: result, ttl: micros(ttl)}
}

// completeOut is a batch's answer to one completion. again: the batch did
// not complete the key, and the caller runs Complete's own statements,
// which tell a completion re-sent after success from a lost lease.
type completeOut struct {
	err   error
	again bool
}

// completeKey answers one Complete: in a batch when batching is on and the
// result is small enough to share a statement, else, or when the batch
// leaves the key undecided, with Complete's own statements.
func (l *Layer) completeKey(ctx context.Context, key idem.Key, token string, result []byte, ttl time.Duration) error {
	alone := func() completeOut {
		return completeOut{err: l.retry(ctx, func() error { return l.complete(ctx, l.pool(), key, token, result, ttl) })}
	}
	if (l.completions == nil && l.writes == nil) || len(result) > maxBatchResult {
		return alone().err
	}
	c := newCompletion(key, token, result, ttl)
	var (
		out completeOut
		ok  bool
	)
	if l.writes != nil {
		var w writeOut
		w, ok = l.writes.do(ctx, &writeOp{comp: c}, func() writeOut { return writeOut{comp: alone()} })
		out = w.comp
	} else {
		out, ok = l.completions.do(ctx, c, alone)
	}
	switch {
	case !ok:
		return ctx.Err()
	case out.again:
		out = alone()
	}
	return out.err
}

// completeMany answers a batch of completions with one compare-and-set
// UPDATE on each key's token. A key it did not complete, and a key that
// appears twice, is left to its caller's own statements.
func (l *Layer) completeMany(ctx context.Context, cs []*completion) []completeOut {
	if len(cs) == 1 {
		return []completeOut{{again: true}}
	}
	b := startCompletions(cs)
	if len(b.todo) > 0 {
		done, err := l.completeKeys(ctx, b)
		l.finishCompletions(ctx, b, done, err)
	}
	return b.out
}

// completionBatch is a batch of completions between its statements.
type completionBatch struct {
	cs   []*completion
	out  []completeOut
	todo []int // the completions the UPDATE carries, in key order
}

// startCompletions prepares a batch of completions for its UPDATE: each
// key once, in key order, so that concurrent batches take their keys'
// locks in one order; a repeat is left to its caller.
func startCompletions(cs []*completion) *completionBatch {
	b := &completionBatch{cs: cs, out: make([]completeOut, len(cs)), todo: make([]int, 0, len(cs))}
	seen := make(map[string]bool, len(cs))
	for i, c := range cs {
		if seen[string(c.digest)] {
			b.out[i].again = true
			continue
		}
		seen[string(c.digest)] = true
		b.todo = append(b.todo, i)
	}
	slices.SortFunc(b.todo, func(x, y int) int { return bytes.Compare(cs[x].digest, cs[y].digest) })
	return b
}

// completeKeys runs the batch's UPDATE and returns the keys it completed.
func (l *Layer) completeKeys(ctx context.Context, b *completionBatch) (map[string]bool, error) {
	args := l.completionArgs(b.cs, b.todo)
	q := l.bst.complete.get(len(b.todo))
	done := make(map[string]bool, len(b.todo))
	if l.dialect == dialect.MySQL {
		return done, l.completeMySQL(ctx, b.cs, b.todo, q, args, done)
	}
	return done, l.retry(ctx, func() error {
		clear(done)
		return queryEach(ctx, l.pool(), q, args, func(scan func(...any) error) error {
			var key []byte
			if err := scan(&key); err != nil {
				return err
			}
			done[string(key)] = true
			return nil
		})
	})
}

// finishCompletions answers the completions the UPDATE carried, from the
// keys it completed or its error: a key it did not complete is left to its
// caller's own statements.
func (l *Layer) finishCompletions(ctx context.Context, b *completionBatch, done map[string]bool, err error) {
	if err != nil {
		l.failed(ctx, "complete", err, b.todo, func(i int, err error) { b.out[i].err = err }, func(i int) { b.out[i].again = true })
		return
	}
	for _, i := range b.todo {
		if !done[string(b.cs[i].digest)] {
			b.out[i].again = true
		}
	}
}

// completionArgs returns the arguments of the completions idx: four
// arrays on Postgres, else the four arguments of each in turn.
func (l *Layer) completionArgs(cs []*completion, idx []int) []any {
	if l.dialect != dialect.PG {
		args := make([]any, 0, 4*len(idx))
		for _, i := range idx {
			c := cs[i]
			args = append(args, c.digest, c.token, c.result, c.ttl)
		}
		return args
	}
	n := len(idx)
	keys, tokens, results, ttls := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([]int64, n)
	for j, i := range idx {
		c := cs[i]
		keys[j], tokens[j], results[j], ttls[j] = c.digest, c.token, c.result, c.ttl
	}
	return []any{l.byteaArg(keys), l.byteaArg(tokens), l.byteaArg(results), l.int8Arg(ttls)}
}

// completeMySQL runs the batched UPDATE, which returns no rows but how
// many it changed. When that is fewer than it carried, one read finds the
// rows this batch's tokens hold completed with its results, live or
// expired since: the UPDATE changed n of them, and any other was completed
// earlier by its own token (a completion re-sent). A row the UPDATE
// changed is done, as Complete's own UPDATE would have it, even when its
// retention has lapsed since. A re-sent one is done while it is live, as
// Complete's read after its UPDATE would find it, and left to Complete's
// own statements once expired. changedBy tells the two apart.
func (l *Layer) completeMySQL(ctx context.Context, cs []*completion, idx []int, q string, args []any, done map[string]bool) error {
	var n int64
	err := l.retry(ctx, func() (err error) {
		n, err = affected(ctx, l.pool(), q, args...)
		return err
	})
	if err != nil {
		return err
	}
	if n == int64(len(idx)) {
		for _, i := range idx {
			done[string(cs[i].digest)] = true
		}
		return nil
	}
	keys := make([]any, len(idx))
	byKey := make(map[string]*completion, len(idx))
	for j, i := range idx {
		keys[j] = cs[i].digest
		byKey[string(cs[i].digest)] = cs[i]
	}
	var found []completedRow
	err = l.retry(ctx, func() error {
		found = found[:0]
		return queryEach(ctx, l.pool(), l.bst.ownedMany.get(len(idx)), keys, func(scan func(...any) error) error {
			var (
				key, token, result    []byte
				state, alive, expires int64
			)
			if err := scan(&key, &state, &token, &result, &alive, &expires); err != nil {
				return err
			}
			c := byKey[string(key)]
			if c != nil && state == int64(idem.StateCompleted) && bytes.Equal(token, c.token) && bytes.Equal(result, c.result) {
				found = append(found, completedRow{key: string(key), live: alive != 0, at: expires - c.ttl})
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	changed := changedBy(found, int(n))
	for _, r := range found {
		if r.live || changed[r.key] {
			done[r.key] = true
		}
	}
	return nil
}

// completedRow is a row a batch's completion read found completed by its
// token with its result: live or not, and when it was completed, if by
// this batch (its expiry less the batch's retention, in microseconds).
type completedRow struct {
	key  string
	live bool
	at   int64
}

// changedBy returns the keys of found that a batched UPDATE changing n
// rows changed. Its rows were all completed at the statement's one clock
// reading, so that their expiry less their retention is one instant; a
// row completed earlier carries another (its own clock and retention).
// When n rows, and no others, share one instant, they are the UPDATE's;
// when no instant is shared by exactly n rows alone, it returns nil, and
// only what is live counts as done.
func changedBy(found []completedRow, n int) map[string]bool {
	if n == 0 {
		return nil
	}
	if len(found) == n {
		keys := make(map[string]bool, n)
		for _, r := range found {
			keys[r.key] = true
		}
		return keys
	}
	count := make(map[int64]int, len(found))
	for _, r := range found {
		count[r.at]++
	}
	var (
		at     int64
		shared bool
	)
	for t, c := range count {
		switch {
		case c > n, c == n && shared:
			return nil
		case c == n:
			at, shared = t, true
		}
	}
	if !shared {
		return nil
	}
	keys := make(map[string]bool, n)
	for _, r := range found {
		if r.at == at {
			keys[r.key] = true
		}
	}
	return keys
}
