//go:build unix

package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/reliability/internal/history"
)

// nemesis injects the soak's faults, each recorded as a history Fault
// whose span covers it (started before the fault, ended after it was
// lifted). Three tracks run side by side, each one fault at a time on a
// schedule drawn from the seed, so that every kind comes the same number
// of times: Redis (pause, flush, restart, Sentinel failover), Postgres
// (backends killed, connections black-holed) and the processes (an owner
// paused past its lease, an application clock skewed, slow completions).
// Slow, failing and panicking handlers are the load's behaviours.
type nemesis struct {
	t     *testing.T
	set   soakSettings
	rec   *history.Recorder
	rs    *testenv.RedisSentinel
	admin *bun.DB           // the database, directly
	proxy *faultproxy.Proxy // in front of the database, for the children
	apps  string            // the children's application_name prefix
	procs *procSet
	load  *load
	dir   string // where the children's files go

	mu      sync.Mutex // guards errs and spawned
	errs    []error
	spawned int // children started in place of killed ones
}

// times is how often each kind comes in a run of dur: once per 12 s, at
// least once.
func times(dur time.Duration) int { return max(1, int((dur+11*time.Second)/(12*time.Second))) }

func (n *nemesis) fail(err error) {
	if err == nil {
		return
	}
	n.mu.Lock()
	n.errs = append(n.errs, err)
	n.mu.Unlock()
}

// schedule runs do for each fault of plan, the i-th at start + i*slot plus
// a jitter within the first part of its slot, until ctx ends.
func schedule(ctx context.Context, r *rand.Rand, start time.Time, dur time.Duration, plan []history.FaultKind, do func(i int, k history.FaultKind)) {
	if len(plan) == 0 {
		return
	}
	slot := dur / time.Duration(len(plan))
	for i, k := range plan {
		at := start.Add(time.Duration(i)*slot + time.Duration(r.Int64N(int64(slot/4)+1)))
		sleepCtx(ctx, time.Until(at))
		if ctx.Err() != nil {
			return
		}
		do(i, k)
	}
}

// repeat is n rounds of kinds, less those IDEM_SOAK_FAULTS leaves out
// when it lists the only kinds to inject (to tell one fault's trouble
// from another's).
func repeat(n int, kinds ...history.FaultKind) []history.FaultKind {
	only := os.Getenv("IDEM_SOAK_FAULTS")
	var plan []history.FaultKind
	for range n {
		for _, k := range kinds {
			if only == "" || slices.Contains(strings.Split(only, ","), string(k)) {
				plan = append(plan, k)
			}
		}
	}
	return plan
}

// redisTrack runs on the test's goroutine: the Sentinel helpers fail the
// test themselves when a server does not come back.
func (n *nemesis) redisTrack(ctx context.Context, start time.Time) {
	r := rand.New(rand.NewPCG(n.set.seed, 1))
	plan := repeat(times(n.set.dur), history.SentinelFailover, history.RedisPause, history.RedisFlush, history.RedisRestart)
	schedule(ctx, r, start, n.set.dur, plan, func(_ int, kind history.FaultKind) {
		m := n.rs.Master(n.t)
		switch kind {
		case history.SentinelFailover:
			f := n.rec.Fault(kind, "", "from "+m.Addr())
			n.rs.Failover(n.t)
			time.Sleep(time.Second) // the clients hear of the switch a moment later
			f.End()
		case history.RedisPause:
			// Shorter than Sentinel's down-after: a pause, not a failover.
			d := time.Duration(400+r.IntN(800)) * time.Millisecond
			f := n.rec.Fault(kind, "", fmt.Sprintf("%s for %v", m.Addr(), d))
			m.Pause()
			time.Sleep(d)
			m.Resume()
			f.End()
		case history.RedisFlush:
			f := n.rec.Fault(kind, "", m.Addr())
			n.fail(withRedis(m.Options(), func(c *redis.Client) error { return c.FlushAll(context.Background()).Err() }))
			f.End()
		case history.RedisRestart:
			f := n.rec.Fault(kind, "", m.Addr())
			m.Restart() // empty; with the arguments it first had
			// It was master: it comes back master, as an operator restarts
			// one (a server first started as a replica would not).
			n.fail(withRedis(m.Options(), func(c *redis.Client) error {
				return c.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err()
			}))
			f.End()
		}
	})
}

// withRedis runs fn on a client of its own to the server of o.
func withRedis(o *redis.Options, fn func(*redis.Client) error) error {
	o.MaxRetries = 2
	c := redis.NewClient(o)
	defer c.Close()
	return fn(c)
}

// postgresTrack kills the children's backends and black-holes their
// connections in turn.
func (n *nemesis) postgresTrack(ctx context.Context, start time.Time) {
	if n.set.pgaf != nil {
		n.pgafTrack(ctx, start)
		return
	}
	r := rand.New(rand.NewPCG(n.set.seed, 2))
	plan := repeat(times(n.set.dur), history.PostgresKill, history.PostgresBlackhole)
	schedule(ctx, r, start, n.set.dur, plan, func(_ int, kind history.FaultKind) {
		switch kind {
		case history.PostgresKill:
			f := n.rec.Fault(kind, "", "application_name "+n.apps+"*")
			kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var killed int
			err := n.admin.NewRaw("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE ? AND pid <> pg_backend_pid()",
				n.apps+"%").Scan(kctx, &killed)
			cancel()
			n.fail(err)
			f.End()
		case history.PostgresBlackhole:
			// Sometimes longer than the lease: an owner cannot renew nor
			// complete, and duplicates wait for it.
			d := time.Duration(float64(n.set.lease) * (0.4 + 1.2*r.Float64()))
			f := n.rec.Fault(kind, "", fmt.Sprintf("for %v", d.Round(time.Millisecond)))
			n.proxy.BlackHole(true)
			time.Sleep(d)
			n.proxy.BlackHole(false)
			f.End()
		}
	})
}

// processTrack pauses an owner past its lease, skews a child's clock and
// slows a child's completions in turn, on each child by turns; in the
// atomic mode it also kills an owner's process mid-transaction.
func (n *nemesis) processTrack(ctx context.Context, start time.Time) {
	r := rand.New(rand.NewPCG(n.set.seed, 3))
	kinds := []history.FaultKind{history.ProcessPause, history.ClockSkew, history.SlowCompletion}
	if n.set.atomic {
		kinds = append(kinds, history.ProcessKill)
	}
	plan := repeat(times(n.set.dur), kinds...)
	// A skew or slow completions last up to one and a half leases, but no
	// more than half their slot: the track keeps to its schedule.
	slot := n.set.dur / time.Duration(max(len(plan), 1))
	hold := func() time.Duration {
		return max(n.set.lease/2, min(time.Duration(float64(n.set.lease)*(0.75+0.75*r.Float64())), slot/2))
	}
	schedule(ctx, r, start, n.set.dur, plan, func(i int, kind history.FaultKind) {
		p := n.procs.at(i / len(kinds))
		switch kind {
		case history.ProcessPause:
			n.pauseOwner(ctx, r, p)
		case history.ProcessKill:
			n.killOwner(ctx, r, p)
		case history.ClockSkew:
			d := maxSkew
			if r.IntN(2) == 0 {
				d = -d
			}
			f := n.rec.Fault(kind, p.node, d.String())
			_, err := p.command(context.Background(), "POST", "/skew?d="+d.String())
			n.fail(err)
			time.Sleep(hold())
			_, err = p.command(context.Background(), "POST", "/skew?d=0s")
			n.fail(err)
			f.End()
		case history.SlowCompletion:
			// From a sixteenth of the lease, which a completion survives,
			// to past the SQL timeout, which none does.
			lo, hi := n.set.lease/16, n.set.sqlTimeout+n.set.sqlTimeout/2
			d := lo + time.Duration(r.Int64N(int64(hi-lo)))
			f := n.rec.Fault(kind, p.node, d.Round(time.Millisecond).String())
			_, err := p.command(context.Background(), "POST", "/slow-completions?d="+d.String())
			n.fail(err)
			time.Sleep(hold())
			_, err = p.command(context.Background(), "POST", "/slow-completions?d=0s")
			n.fail(err)
			f.End()
		}
	})
}

// pauseOwner stops p while it runs an execution, for longer than the
// lease: a request of its own, slow, is sent to p; once its handler runs,
// p is stopped. Meanwhile its duplicates go to the other children, and
// once the lease has lapsed one of them takes the key over. Then p
// continues, and must find itself fenced. A request whose handler does
// not start (the stores could not decide, say) is replaced by another,
// for at least five attempts and four leases: a Postgres fault on the
// other track may hold every claim for more than a lease.
func (n *nemesis) pauseOwner(ctx context.Context, r *rand.Rand, p *proc) {
	var wg sync.WaitGroup
	defer wg.Wait()
	k := n.owning(ctx, r, p, &wg)
	if k == nil {
		return
	}
	d := time.Duration(float64(n.set.lease) * (1.5 + 0.5*r.Float64()))
	f := n.rec.Fault(history.ProcessPause, p.node, fmt.Sprintf("for %v, owning %s", d.Round(time.Millisecond), k.name))
	if err := p.pause(); err != nil {
		n.fail(err)
		f.End()
		return
	}
	until := time.Now().Add(d)
	// Duplicates on the other children, from when the lease may lapse.
	time.Sleep(n.set.lease + n.set.lease/4)
	for time.Now().Before(until) {
		other := n.procs.pick(r)
		if other != p {
			wg.Go(func() { n.load.call(context.WithoutCancel(ctx), k, 0, other, behaveOK) })
		}
		time.Sleep(min(300*time.Millisecond, time.Until(until)))
	}
	n.fail(p.resume())
	f.End()
}

// killOwner kills p (SIGKILL) while it runs an execution — in the atomic
// mode, with the execution's charge written in its open transaction —
// and starts a child of a new name in its place. Duplicates of the key go
// to the other children at once: the database rolled the transaction back
// when the connection closed, so one of them runs the key again, and the
// dead execution's charge must never appear.
func (n *nemesis) killOwner(ctx context.Context, r *rand.Rand, p *proc) {
	var wg sync.WaitGroup
	defer wg.Wait()
	k := n.owning(ctx, r, p, &wg)
	if k == nil {
		return
	}
	p.paused.Store(true) // the load routes around it from now on
	p.kill()
	// Recorded once the process is reaped: everything of it happened
	// before the fault's start, which is what the checker takes for the
	// moment it died.
	n.rec.Fault(history.ProcessKill, p.node, "owning "+k.name)
	cfg := p.cfg
	n.mu.Lock()
	n.spawned++
	cfg.Node = fmt.Sprintf("%sk%d", p.cfg.Framework, n.spawned)
	n.mu.Unlock()
	cfg.History = filepath.Join(n.dir, cfg.Node+".jsonl")
	cfg.DSN = strings.Replace(p.cfg.DSN, "_"+p.cfg.Node, "_"+cfg.Node, 1)
	next, err := launch(n.t, n.dir, cfg)
	if err == nil {
		err = next.serving()
	}
	if err != nil {
		n.fail(fmt.Errorf("nemesis: restart after killing %s: %w", p.node, err))
		return
	}
	n.procs.replace(p, next)
	for range 3 {
		other := n.procs.pick(r)
		if other != next {
			wg.Go(func() { n.load.call(context.WithoutCancel(ctx), k, 0, other, behaveOK) })
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// owning sends a slow request of a new key to p and returns the key once
// its handler runs there. A request whose handler does not start (the
// stores could not decide, say) is replaced by another, for at least five
// attempts and four leases (and pgafOutage more on a formation): a
// Postgres fault on the other track may hold every claim for more than a
// lease. nil: none started.
func (n *nemesis) owning(ctx context.Context, r *rand.Rand, p *proc, wg *sync.WaitGroup) *soakKey {
	var k *soakKey
	giveUp := time.Now().Add(4 * n.set.lease)
	if n.set.pgaf != nil {
		giveUp = giveUp.Add(pgafOutage) // a promotion holds every claim longer
	}
	for attempt := 0; k == nil; attempt++ {
		if (attempt >= 5 && time.Now().After(giveUp)) || ctx.Err() != nil {
			n.fail(fmt.Errorf("nemesis: no handler of an owner started on %s in %d attempts", p.node, attempt))
			return nil
		}
		try := n.load.newKey(r, routeLong, "p")
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			n.load.call(context.WithoutCancel(ctx), try, 0, p, behaveSlow)
		})
		for k == nil {
			ok, err := p.running(ctx, try.name)
			if err != nil {
				n.fail(err)
				return nil
			}
			if ok {
				k = try
				break
			}
			select {
			case <-done: // answered without running: try again
			case <-time.After(10 * time.Millisecond): // until the handler starts
				continue
			}
			break
		}
	}
	return k
}

// err returns what went wrong in the tracks.
func (n *nemesis) err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return errors.Join(n.errs...)
}
