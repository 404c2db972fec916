package bench

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/redislayer"
)

const (
	lease     = 30 * time.Second
	retention = 5 * time.Minute // long enough for a run, short enough to leave nothing behind
	fp        = "f1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// BenchmarkRedis puts the Redis layer next to raw go-redis commands on the
// same client and concurrency.
//
//	op=new        baseline: one SET NX PX of a fresh key (one round trip)
//	              idem:     Reserve + Complete of a fresh key (two round trips)
//	op=duplicate  baseline: GET of an existing value of the result's size
//	              idem:     Reserve on a completed key (claim-or-read, one round trip)
func BenchmarkRedis(b *testing.B) {
	rdb := redisFor(b)
	prefix := testenv.Prefix()
	l := redislayer.New(rdb, redislayer.WithPrefix(prefix), redislayer.WithTimeout(2*time.Second))
	b.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()

	dup := freshKey()
	rec, _, err := l.Reserve(ctx, dup, fp, lease, retention)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Complete(ctx, dup, rec.Token, result, retention); err != nil {
		b.Fatal(err)
	}
	rawDup := prefix + "raw:" + dup.Hex()
	if err := rdb.Set(ctx, rawDup, result, retention).Err(); err != nil {
		b.Fatal(err)
	}
	token := idem.NewToken()

	for _, n := range goroutines {
		b.Run(name("new", n, "baseline"), func(b *testing.B) {
			parallel(b, n, func() {
				if err := rdb.SetNX(ctx, prefix+"raw:"+freshKey().Hex(), token, retention).Err(); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("new", n, "idem"), func(b *testing.B) {
			parallel(b, n, func() {
				k := freshKey()
				rec, claimed, err := l.Reserve(ctx, k, fp, lease, retention)
				if err != nil || !claimed {
					b.Error(claimed, err)
					return
				}
				if err := l.Complete(ctx, k, rec.Token, result, retention); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("duplicate", n, "baseline"), func(b *testing.B) {
			parallel(b, n, func() {
				if err := rdb.Get(ctx, rawDup).Err(); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("duplicate", n, "idem"), func(b *testing.B) {
			parallel(b, n, func() {
				if rec, _, err := l.Reserve(ctx, dup, fp, lease, retention); err != nil || !rec.Completed() {
					b.Error(rec.State, err)
				}
			})
		})
	}
}
