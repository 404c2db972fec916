package bench

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
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
	rdb, prefix := redisFor(b)
	l := must.Get(redislayer.New(rdb, redislayer.WithPrefix(prefix), redislayer.WithTimeout(2*time.Second)))(b)
	b.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	dup := completedKey(b, l)
	rawDup := prefix + "raw:" + dup.Hex()
	if err := rdb.Set(ctx, rawDup, result, retention).Err(); err != nil {
		b.Fatal(err)
	}
	token := idem.NewToken()
	benchLayer(b, l, dup,
		func(ctx context.Context) error {
			return rdb.SetNX(ctx, prefix+"raw:"+freshKey().Hex(), token, retention).Err()
		},
		func(ctx context.Context) error { return rdb.Get(ctx, rawDup).Err() })
}
