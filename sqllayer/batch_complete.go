package sqllayer

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// completion is one Complete's arguments in the form the statements take.
type completion struct {
	key    idem.Key
	digest []byte
	token  []byte
	result []byte
	ttl    int64 // microseconds
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
	if l.completions == nil || len(result) > maxBatchResult {
		return alone().err
	}
	if result == nil {
		result = []byte{}
	}
	d := key.Digest()
	c := &completion{key: key, digest: d[:], token: bin(token), result: result, ttl: micros(ttl)}
	out, ok := l.completions.do(ctx, c, alone)
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
	out := make([]completeOut, len(cs))
	if len(cs) == 1 {
		out[0].again = true
		return out
	}
	todo := make([]int, 0, len(cs))
	seen := make(map[string]bool, len(cs))
	for i, c := range cs {
		if seen[string(c.digest)] {
			out[i].again = true
			continue
		}
		seen[string(c.digest)] = true
		todo = append(todo, i)
	}
	slices.SortFunc(todo, func(a, b int) int { return bytes.Compare(cs[a].digest, cs[b].digest) })
	args := l.completionArgs(cs, todo)
	q := l.bst.complete.get(len(todo))
	done := make(map[string]bool, len(todo))
	var err error
	if l.dialect == dialect.MySQL {
		err = l.completeMySQL(ctx, cs, todo, q, args, done)
	} else {
		err = l.retry(ctx, func() error {
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
	if err != nil {
		l.failed(ctx, "complete", err, todo, func(i int, err error) { out[i].err = err }, func(i int) { out[i].again = true })
		return out
	}
	for _, i := range todo {
		if !done[string(cs[i].digest)] {
			out[i].again = true
		}
	}
	return out
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

// completeMySQL runs the batched UPDATE, which returns no rows: when it
// changed fewer rows than it carried, one read finds the keys whose live
// record this token holds completed (by this statement or an earlier one
// with the same token, which Complete treats alike).
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
	tokens := make(map[string][]byte, len(idx))
	for j, i := range idx {
		keys[j] = cs[i].digest
		tokens[string(cs[i].digest)] = cs[i].token
	}
	return l.retry(ctx, func() error {
		clear(done)
		return queryEach(ctx, l.pool(), l.bst.ownedMany.get(len(idx)), keys, func(scan func(...any) error) error {
			var (
				key, token []byte
				state      int64
			)
			if err := scan(&key, &state, &token); err != nil {
				return err
			}
			if state == int64(idem.StateCompleted) && bytes.Equal(token, tokens[string(key)]) {
				done[string(key)] = true
			}
			return nil
		})
	})
}
