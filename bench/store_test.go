package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// stack is a Redis+SQL Store and the raw clients beneath it.
type stack struct {
	rdb    *redis.Client
	db     *bun.DB
	raw    *rawSQL
	prefix string
	store  func(b *testing.B, opts ...tiered.Option) *tiered.Store
	// sqlOnly is the same Store without its Redis tier.
	sqlOnly func(b *testing.B, opts ...tiered.Option) *tiered.Store
}

func newStack(b *testing.B) *stack {
	b.Helper()
	st := &stack{}
	st.rdb, st.prefix = redisFor(b)
	db, table := dbFor(b)
	st.db, st.raw = db, newRawSQL(db, table)
	sqlOpts := []sqllayer.Option{sqllayer.WithRecordsTable(table), sqllayer.WithEventsTable(testenv.Name("e")), sqllayer.WithVersionsTable(testenv.Name("v"))}
	st.store = func(b *testing.B, opts ...tiered.Option) *tiered.Store {
		rl := must.Get(redislayer.New(st.rdb, redislayer.WithPrefix(st.prefix), redislayer.WithTimeout(2*time.Second)))(b)
		s, err := tiered.New(append([]tiered.Option{
			tiered.WithRedis(rl), tiered.WithSQL(must.Get(sqllayer.New(db, sqlOpts...))(b)),
			tiered.WithRetention(retention), tiered.WithTimeouts(2*time.Second, 10*time.Second),
		}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close(); _ = rl.Close() })
		return s
	}
	st.sqlOnly = func(b *testing.B, opts ...tiered.Option) *tiered.Store {
		s, err := tiered.New(append([]tiered.Option{
			tiered.WithSQL(must.Get(sqllayer.New(db, sqlOpts...))(b)),
			tiered.WithRetention(retention), tiered.WithTimeouts(2*time.Second, 10*time.Second),
		}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	return st
}

// newKeyBaseline is what a hand-written Redis+SQL guard costs for a new key:
// SET NX PX, INSERT … ON CONFLICT DO NOTHING, UPDATE … WHERE key AND token,
// SET of the result — four round trips on the same pools.
func (st *stack) newKeyBaseline(ctx context.Context, token []byte) error {
	k := freshKey()
	rk := st.prefix + "raw:" + k.Hex()
	if err := st.rdb.SetNX(ctx, rk, token, lease).Err(); err != nil {
		return err
	}
	if err := st.raw.newKey(ctx, k, token); err != nil {
		return err
	}
	return st.rdb.Set(ctx, rk, result, retention).Err()
}

// redisNewKey is the Redis work of a new key written by hand: a claim
// that answers what was there (SET NX GET, with the PTTL, in one round
// trip), then the result stored over it.
func (st *stack) redisNewKey(ctx context.Context, k idem.Key, token []byte) error {
	rk := st.prefix + "floor:" + k.Hex()
	pipe := st.rdb.Pipeline()
	set := pipe.SetArgs(ctx, rk, token, redis.SetArgs{Mode: "NX", Get: true, TTL: retention})
	pipe.PTTL(ctx, rk)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if set.Val() != "" {
		return fmt.Errorf("floor: key %s existed", rk)
	}
	return st.rdb.Set(ctx, rk, result, retention).Err()
}

func work(context.Context) ([]byte, error) { return result, nil }

// BenchmarkStore puts the tiered Store (Redis + SQL) next to hand-written
// baselines on the same Redis client and database pool.
//
//	op=new             baseline: SET NX PX, INSERT, UPDATE, SET (newKeyBaseline)
//	                   idem:     Do on a fresh key
//	op=duplicate-cold  baseline: GET of a stored value
//	                   idem:     Do on a completed key, local cache off: a Redis replay, SQL untouched
//	op=hot-replay      baseline: GET of a stored value
//	                   idem:     Do on a completed key with the local cache on: no I/O
//	op=burst20         idem only: 20 concurrent Do calls on one fresh key, one execution
//	op=new-tiers       baseline: Do on a fresh key, the same Store without Redis (SQL only)
//	                   idem:     Do on a fresh key with Redis + SQL: what the Redis tier
//	                             costs a first execution
//	                   floor:    the baseline's Do while, on a goroutine of its own,
//	                             the two Redis round trips any Redis tier sends for a
//	                             new key (a claim, SET NX GET with PTTL, and a SET of
//	                             the result) are written by hand and joined before it
//	                             returns: the least the Redis tier can cost on this
//	                             machine, where Redis, Postgres and the client share
//	                             the cores
func BenchmarkStore(b *testing.B) {
	st := newStack(b)
	ctx := context.Background()
	withCache := st.store(b)
	cold := st.store(b, tiered.WithLocalCache(0, 0, 0))
	sqlOnly := st.sqlOnly(b, tiered.WithLocalCache(0, 0, 0))
	// Completed keys, so that concurrent duplicates are of different keys
	// (the same key would be collapsed by singleflight, which is no I/O).
	done := make([]idem.Key, 256)
	rawDone := make([]string, len(done))
	for i := range done {
		done[i] = freshKey()
		if _, err := withCache.Do(ctx, done[i], fp, work); err != nil {
			b.Fatal(err)
		}
		rawDone[i] = st.prefix + "raw:" + done[i].Hex()
		if err := st.rdb.Set(ctx, rawDone[i], result, retention).Err(); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	pick := func() int { return int(next.Add(1)) % len(done) }
	token := []byte(idem.NewToken())
	get := func() {
		if err := st.rdb.Get(ctx, rawDone[pick()]).Err(); err != nil {
			b.Error(err)
		}
	}
	do := func(s *tiered.Store, k idem.Key) {
		if _, err := s.Do(ctx, k, fp, work); err != nil {
			b.Error(err)
		}
	}
	for _, n := range goroutines {
		b.Run(name("new", n, "baseline"), func(b *testing.B) {
			parallel(b, n, func() {
				if err := st.newKeyBaseline(ctx, token); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("new", n, "idem"), func(b *testing.B) { parallel(b, n, func() { do(cold, freshKey()) }) })
		b.Run(name("new-tiers", n, "baseline"), func(b *testing.B) { parallel(b, n, func() { do(sqlOnly, freshKey()) }) })
		b.Run(name("new-tiers", n, "idem"), func(b *testing.B) { parallel(b, n, func() { do(cold, freshKey()) }) })
		b.Run(name("new-tiers", n, "floor"), func(b *testing.B) {
			parallel(b, n, func() {
				k := freshKey()
				done := make(chan error, 1)
				go func() { done <- st.redisNewKey(ctx, k, token) }()
				do(sqlOnly, k)
				if err := <-done; err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("duplicate-cold", n, "baseline"), func(b *testing.B) { parallel(b, n, get) })
		b.Run(name("duplicate-cold", n, "idem"), func(b *testing.B) { parallel(b, n, func() { do(cold, done[pick()]) }) })
		b.Run(name("hot-replay", n, "baseline"), func(b *testing.B) { parallel(b, n, get) })
		b.Run(name("hot-replay", n, "idem"), func(b *testing.B) { parallel(b, n, func() { do(withCache, done[pick()]) }) })
	}
	b.Run("op=burst20/goroutines=20/impl=idem", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			k := freshKey()
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() { do(withCache, k) })
			}
			wg.Wait()
		}
	})
}
