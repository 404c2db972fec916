//go:build unix

package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
	"github.com/idemkit/idem/reliability/internal/history"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The Redis Cluster soak's parts: service instances in this process, each
// a Store over a cluster client of its own and a pool of its own on
// Postgres, and the load that calls them, recording every call and
// execution in the history's terms.

// errClusterWork is the error of the load's failing work.
var errClusterWork = errors.New("the work failed")

// clusterNode is one service instance of the cluster soak. It is the
// Store's observer: it follows the Store's switches of Redis off and on,
// marks the calls whose Redis call failed, and records when the Store's
// deciding tier accepted or refused an execution's completion.
type clusterNode struct {
	name  string
	store *tiered.Store
	rec   *history.Recorder
	file  string

	off  atomic.Bool  // the Store has switched Redis off (EventFallbackOn until EventFallbackOff)
	offs atomic.Int64 // how many times it has

	mu      sync.Mutex // guards pending
	pending map[*slot]bool
}

// callTrack is what the observer learns of one call.
type callTrack struct{ redisFailed atomic.Bool }

type trackKey struct{}

// Observe implements idem.Observer.
func (n *clusterNode) Observe(ctx context.Context, e idem.Event) {
	switch {
	case e.Kind == idem.EventFallbackOn && e.Tier == idem.TierRedis:
		n.offs.Add(1)
		n.off.Store(true)
	case e.Kind == idem.EventFallbackOff && e.Tier == idem.TierRedis:
		n.off.Store(false)
	case e.Kind == idem.EventTierError && e.Tier == idem.TierRedis:
		if tr, ok := ctx.Value(trackKey{}).(*callTrack); ok {
			tr.redisFailed.Store(true)
		}
	}
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		pending := s.observe(e, false)
		n.mu.Lock()
		if pending {
			n.pending[s] = true
		} else {
			delete(n.pending, s)
		}
		n.mu.Unlock()
	}
}

// flush records the completions still pending (none once the Store has
// retried them all).
func (n *clusterNode) flush() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.pending {
		s.flushPending()
	}
}

// startClusterNodes builds count instances over rc and the records table
// of db's database, each recording to a file of its own under dir.
func startClusterNodes(t *testing.T, set clusterSettings, rc *testenv.RedisCluster, sql *testenv.SQL, prefix, records, dir string, count int) []*clusterNode {
	t.Helper()
	nodes := make([]*clusterNode, count)
	for i := range nodes {
		n := &clusterNode{name: fmt.Sprintf("n%d", i+1), pending: map[*slot]bool{}}
		n.file = filepath.Join(dir, n.name+".jsonl")
		f, err := os.Create(n.file)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		n.rec = history.NewRecorder(f, n.name, nil)
		client := redis.NewClusterClient(rc.ClusterOptions())
		t.Cleanup(func() { _ = client.Close() })
		rl := must.Get(redislayer.New(client, redislayer.WithPrefix(prefix), redislayer.WithTimeout(set.redisTimeout)))(t)
		t.Cleanup(func() { _ = rl.Close() })
		db := sql.Open(t)
		db.SetMaxOpenConns(4) // the server is shared
		sl := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(records)))(t)
		n.store = must.Get(tiered.New(
			tiered.WithRedis(rl), tiered.WithSQL(sl),
			tiered.WithLease(set.lease), tiered.WithWait(set.wait), tiered.WithRetention(time.Hour),
			tiered.WithTimeouts(set.redisTimeout, set.sqlTimeout), tiered.WithObserver(n),
		))(t)
		t.Cleanup(func() { _ = n.store.Close() })
		nodes[i] = n
	}
	return nodes
}

// clusterKey is a key of the load and the fingerprints sent with it, the
// first of which its retries use.
type clusterKey struct {
	name string

	mu  sync.Mutex // guards fps
	fps []string
}

func (k *clusterKey) first() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fps[0]
}

func (k *clusterKey) use(fp string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range k.fps {
		if f == fp {
			return
		}
	}
	k.fps = append(k.fps, fp)
}

// callSpan is when one call ran and whether it fell back to SQL: its Redis
// call failed, or the Store had switched Redis off while it ran.
type callSpan struct {
	invoke, ret int64
	fellBack    bool
}

// clusterLoad calls the nodes: new keys, retries, concurrent duplicates on
// two nodes, retries with another fingerprint, and work that fails.
type clusterLoad struct {
	nodes []*clusterNode
	calls atomic.Int64

	mu    sync.Mutex // guards keys and spans
	keys  []*clusterKey
	spans []callSpan
}

// call makes one call of Do on n for k with fp, and records it.
func (l *clusterLoad) call(ctx context.Context, n *clusterNode, k *clusterKey, fp string, work time.Duration, fail bool) {
	l.calls.Add(1)
	k.use(fp)
	tr, sl := &callTrack{}, &slot{}
	ctx = context.WithValue(context.WithValue(ctx, trackKey{}, tr), slotKey{}, sl)
	offs, off := n.offs.Load(), n.off.Load()
	p := n.rec.Invoke(k.name, fp)
	invoke := time.Now().UnixNano()
	res, err := n.store.Do(ctx, idem.NewKey("", k.name), fp, func(ctx context.Context) ([]byte, error) {
		x := p.ExecStart("")
		x.Watch(ctx, func(cause error) bool { return errors.Is(cause, idem.ErrLeaseLost) })
		sleepCtx(ctx, work)
		if fail {
			x.End(nil, errClusterWork)
			return nil, errClusterWork
		}
		v := []byte(fmt.Sprintf("%s for %s (%s)", x.ID(), k.name, fp))
		sl.started(x)
		x.End(v, nil)
		sl.ended()
		return v, nil
	})
	p.Return(outcomeOfDo(ctx, res, err, errClusterWork), res.Value, err)
	span := callSpan{invoke: invoke, ret: time.Now().UnixNano(),
		fellBack: tr.redisFailed.Load() || off || n.off.Load() || n.offs.Load() != offs}
	l.mu.Lock()
	l.spans = append(l.spans, span)
	l.mu.Unlock()
}

// newKey adds a key to the load.
func (l *clusterLoad) newKey(fp string) *clusterKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := &clusterKey{name: fmt.Sprintf("k%d", len(l.keys)+1), fps: []string{fp}}
	l.keys = append(l.keys, k)
	return k
}

// recent returns one of the last 400 keys, or nil.
func (l *clusterLoad) recent(r *rand.Rand) *clusterKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) == 0 {
		return nil
	}
	return l.keys[len(l.keys)-1-r.IntN(min(len(l.keys), 400))]
}

// run is one worker of the load, until ctx ends: a third of its calls
// take a new key, the rest retry a recent one (a fifth of them as two
// concurrent duplicates on two nodes, one in twenty with another
// fingerprint); one piece of work in twenty-five fails.
func (l *clusterLoad) run(ctx context.Context, r *rand.Rand) {
	for ctx.Err() == nil {
		work := time.Duration(r.IntN(8)) * time.Millisecond
		fail := r.IntN(25) == 0
		n := l.nodes[r.IntN(len(l.nodes))]
		k := l.recent(r)
		if k == nil || r.IntN(3) == 0 {
			l.call(context.WithoutCancel(ctx), n, l.newKey("a"), "a", work, fail)
			continue
		}
		fp := k.first()
		if r.IntN(20) == 0 {
			fp = "b"
		}
		if r.IntN(5) != 0 {
			l.call(context.WithoutCancel(ctx), n, k, fp, work, fail)
			continue
		}
		other := l.nodes[(slicesIndex(l.nodes, n)+1+r.IntN(len(l.nodes)-1))%len(l.nodes)]
		var wg sync.WaitGroup
		wg.Go(func() { l.call(context.WithoutCancel(ctx), other, k, fp, work, false) })
		l.call(context.WithoutCancel(ctx), n, k, fp, work, fail)
		wg.Wait()
	}
}

func slicesIndex(nodes []*clusterNode, n *clusterNode) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return 0
}

// quiet calls every key once more with its first fingerprint, on 8
// workers: each takes a leftover claim over, so that none remains.
func (l *clusterLoad) quiet(ctx context.Context, seed uint64) {
	l.mu.Lock()
	keys := append([]*clusterKey(nil), l.keys...)
	l.mu.Unlock()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		r := rand.New(rand.NewPCG(seed, uint64(100+w)))
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(keys); i = int(next.Add(1)) - 1 {
				l.call(ctx, l.nodes[r.IntN(len(l.nodes))], keys[i], keys[i].first(), 0, false)
			}
		})
	}
	wg.Wait()
}

// clusterFinals reads every key's record from SQL (the table, directly)
// and from Redis (through a layer of its own on a cluster client of its
// own), in the history's terms.
func clusterFinals(t *testing.T, admin *bun.DB, rc *testenv.RedisCluster, prefix, records string, keys []*clusterKey) []history.Final {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows := readRecordRows(ctx, t, admin, "SELECT key_digest, state, fingerprint, result FROM "+records)
	stored := func(state idem.State, fp string, result []byte) history.Stored {
		if state == idem.StateCompleted {
			return history.Stored{State: history.Completed, Fingerprint: fp, Value: result}
		}
		return history.Stored{State: history.InProgress, Fingerprint: fp}
	}
	reader := must.Get(redislayer.New(rc.Client(t), redislayer.WithPrefix(prefix), redislayer.WithTimeout(5*time.Second)))(t)
	defer reader.Close()
	at := time.Now()
	finals := make([]history.Final, len(keys))
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex // guards errs
		errs []error
	)
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(keys); i = int(next.Add(1)) - 1 {
				k := idem.NewKey("", keys[i].name)
				f := history.Final{Key: keys[i].name, At: at.UnixNano(),
					SQL: history.Stored{State: history.Absent}, Redis: history.Stored{State: history.Absent}}
				d := k.Digest()
				if r, ok := rows[string(d[:])]; ok {
					f.SQL = stored(idem.State(r.state), string(r.fp), r.result)
				}
				rec, err := reader.Get(ctx, k)
				switch {
				case errors.Is(err, idem.ErrNotFound):
				case err != nil:
					mu.Lock()
					errs = append(errs, fmt.Errorf("read %s from Redis: %w", keys[i].name, err))
					mu.Unlock()
				case !rec.Completed() && rec.LeaseUntil.Before(at):
					// A claim whose lease has lapsed holds nothing: the
					// next Reserve takes it over.
				default:
					f.Redis = stored(rec.State, rec.Fingerprint, rec.Result)
				}
				finals[i] = f
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return finals
}
