package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/janitor"
	"github.com/idemkit/idem/sqllayer"
)

// claim leaves key claimed in both tiers, as an owner that stopped before
// completing leaves it, and returns the two owner tokens.
func (svc *service) claim(t *testing.T, key idem.Key, lease time.Duration) (sqlToken, redisToken string) {
	t.Helper()
	rr, claimed, err := svc.redis.Reserve(testCtx(t), key, "fp-1", lease, time.Hour)
	if err != nil || !claimed {
		t.Fatalf("Redis Reserve: %v %v", claimed, err)
	}
	sr, claimed, err := svc.sql.Reserve(testCtx(t), key, "fp-1", lease, time.Hour)
	if err != nil || !claimed {
		t.Fatalf("SQL Reserve: %v %v", claimed, err)
	}
	return sr.Token, rr.Token
}

// complete completes key in both tiers with result, as its owner does.
func (svc *service) complete(t *testing.T, key idem.Key, sqlToken, redisToken, result string) {
	t.Helper()
	if err := svc.sql.Complete(testCtx(t), key, sqlToken, []byte(result), time.Hour); err != nil {
		t.Fatalf("SQL Complete: %v", err)
	}
	if err := svc.redis.Complete(testCtx(t), key, redisToken, []byte(result), time.Hour); err != nil {
		t.Fatalf("Redis Complete: %v", err)
	}
}

// trail returns the audit rows of key.
func (svc *service) trail(t *testing.T, key idem.Key) []sqllayer.AuditEntry {
	t.Helper()
	return must.Get(svc.sql.Admin().Trail(testCtx(t), key, 10))(t)
}

type releaseJSON struct {
	Results []result `json:"results"`
}

// get, list, release, then the key claims again; the audit rows say who,
// which token and why, in each tier.
func TestReleaseAStuckClaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, svc *service) {
		key := idem.NewKey("tenant-a", "pay-1")
		sqlToken, redisToken := svc.claim(t, key, time.Minute)

		o := svc.idem(t, "", "get", "--scope", "tenant-a", "pay-1", "--json")
		got := jsonOf[lookup](t, o)
		if o.code != exitOK || len(got.Tiers) != 2 || got.Tiers[0].State != "in_progress" || got.Tiers[0].Token != sqlToken ||
			got.Tiers[1].Token != redisToken || *got.Tiers[0].Scope != "tenant-a" || len(got.Disagree) != 0 {
			t.Fatalf("get: %d %+v\n%s", o.code, got, o.stderr)
		}
		if o := svc.idem(t, "", "get", "--digest", key.Hex()); o.code != exitOK || !strings.Contains(o.stdout, "in_progress") {
			t.Fatalf("get --digest: %d\n%s%s", o.code, o.stdout, o.stderr)
		}
		o = svc.idem(t, "", "list", "--in-progress", "--json")
		claims := jsonOf[struct{ Claims []view }](t, o).Claims
		if o.code != exitOK || len(claims) != 1 || claims[0].Digest != key.Hex() || *claims[0].ClientKey != "pay-1" {
			t.Fatalf("list: %d %+v", o.code, claims)
		}
		if o := svc.idem(t, "", "release", "--scope", "tenant-a", "pay-1"); o.code != exitUsage {
			t.Fatalf("release without --reason: %d, want %d", o.code, exitUsage)
		}
		o = svc.idem(t, "", "release", "--scope", "tenant-a", "pay-1", "--reason", "owner cut off, INC-7", "--json")
		res := jsonOf[releaseJSON](t, o).Results
		if o.code != exitOK || len(res) != 2 || res[0].Outcome != "freed" || res[1].Outcome != "freed" {
			t.Fatalf("release: %d %+v\n%s", o.code, res, o.stderr)
		}
		if !strings.Contains(o.stderr, "idem audit") || !strings.Contains(o.stderr, sqlToken) || !strings.Contains(o.stderr, "by=tester") {
			t.Fatalf("release logged no audit line:\n%s", o.stderr)
		}
		rows := svc.trail(t, key)
		if len(rows) != 2 {
			t.Fatalf("audit rows: %+v, want one per tier", rows)
		}
		for _, r := range rows {
			want := map[idem.Tier]string{idem.TierSQL: sqlToken, idem.TierRedis: redisToken}[r.Tier]
			if r.By != "tester" || r.Reason != "owner cut off, INC-7" || r.Action != "release" || r.Outcome != sqllayer.Freed ||
				r.Token != want || r.Scope != "tenant-a" || r.ClientKey != "pay-1" {
				t.Fatalf("audit row %+v", r)
			}
		}
		if _, claimed, err := svc.sql.Reserve(testCtx(t), key, "fp-1", time.Minute, time.Hour); err != nil || !claimed {
			t.Fatalf("SQL Reserve after the release: %v %v", claimed, err)
		}
		if err := svc.redis.Complete(testCtx(t), key, redisToken, []byte("late"), time.Hour); !errors.Is(err, idem.ErrLeaseLost) {
			t.Fatalf("the old owner's Redis Complete: %v, want ErrLeaseLost", err)
		}
		if o := svc.idem(t, "", "get", "--scope", "tenant-a", "nobody"); o.code != exitNotFound {
			t.Fatalf("get of an unknown key: %d, want %d", o.code, exitNotFound)
		}
	})
}

// The owner completes between the command's read and its release: the
// owner's result stands, and the release says it freed nothing.
func TestReleaseRacingTheOwner(t *testing.T) {
	eachBackend(t, func(t *testing.T, svc *service) {
		key := idem.NewKey("tenant-a", "pay-race")
		sqlToken, redisToken := svc.claim(t, key, time.Minute)
		afterRead = func() { svc.complete(t, key, sqlToken, redisToken, "paid") }
		o := svc.idem(t, "", "release", "--scope", "tenant-a", "pay-race", "--reason", "looked stuck", "--json")
		afterRead = nil
		res := jsonOf[releaseJSON](t, o).Results
		if o.code != exitNothing || len(res) != 1 || res[0].Tier != "sql" || res[0].Outcome != "changed" {
			t.Fatalf("release racing the owner: %d %+v\n%s", o.code, res, o.stderr)
		}
		for _, l := range []idem.Layer{svc.sql, svc.redis} {
			if rec, err := l.Get(testCtx(t), key); err != nil || string(rec.Result) != "paid" {
				t.Fatalf("after the release: %+v %v, want the owner's result", rec, err)
			}
		}
		if rows := svc.trail(t, key); len(rows) != 1 || rows[0].Outcome != sqllayer.Changed {
			t.Fatalf("audit rows: %+v, want the attempt that changed nothing", rows)
		}

		// At once: whichever lands first, the owner's result is never
		// replaced, and a release that freed the claim makes its
		// completion fail.
		for i := range 5 {
			key := idem.NewKey("tenant-a", "pay-race-"+string(rune('a'+i)))
			sqlToken, _ := svc.claim(t, key, time.Minute)
			var wg sync.WaitGroup
			var o out
			var cerr error
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				o = svc.idem(t, "", "release", "--scope", "tenant-a", "pay-race-"+string(rune('a'+i)), "--reason", "race")
			})
			wg.Go(func() { <-start; cerr = svc.sql.Complete(testCtx(t), key, sqlToken, []byte("paid"), time.Hour) })
			close(start)
			wg.Wait()
			rec, gerr := svc.sql.Get(testCtx(t), key)
			switch {
			case o.code == exitOK && errors.Is(cerr, idem.ErrLeaseLost) && errors.Is(gerr, idem.ErrNotFound):
			case (o.code == exitNothing || o.code == exitRefused) && cerr == nil && string(rec.Result) == "paid":
				// The completion landed after the read (changed) or before
				// it (a completed record is refused).
			default:
				t.Fatalf("race %d: release %d, complete %v, Get %+v %v\n%s%s", i, o.code, cerr, rec, gerr, o.stdout, o.stderr)
			}
		}
	})
}

// A completed record is refused without --forget; --forget needs its
// confirmation; with it, the record is gone and the key runs again.
func TestReleaseRefusesACompletedRecord(t *testing.T) {
	eachBackend(t, func(t *testing.T, svc *service) {
		key := idem.NewKey("", "done-1")
		sqlToken, redisToken := svc.claim(t, key, time.Minute)
		svc.complete(t, key, sqlToken, redisToken, "paid")
		for _, args := range [][]string{{"release", "done-1", "--reason", "x"}, {"release", "done-1", "--reason", "x", "--yes"}} {
			// --yes confirms a --forget, nothing else.
			if o := svc.idem(t, "done-1\n", args...); o.code != exitRefused || !strings.Contains(o.stderr, "refusing") {
				t.Fatalf("%q of a completed record: %d\n%s", args, o.code, o.stderr)
			}
		}
		if o := svc.idem(t, "not-the-key\n", "release", "done-1", "--reason", "x", "--forget"); o.code != exitRefused {
			t.Fatalf("--forget confirmed with the wrong key: %d\n%s", o.code, o.stderr)
		}
		if rows := svc.trail(t, key); len(rows) != 0 {
			t.Fatalf("refusals wrote audit rows: %+v", rows)
		}
		for _, l := range []idem.Layer{svc.sql, svc.redis} {
			if rec, err := l.Get(testCtx(t), key); err != nil || !rec.Completed() {
				t.Fatalf("after the refusals: %+v %v, want the record completed", rec, err)
			}
		}
		if o := svc.idem(t, "done-1\n", "release", "done-1", "--reason", "refund issued by hand", "--forget"); o.code != exitOK {
			t.Fatalf("--forget confirmed by typing the key: %d\n%s%s", o.code, o.stdout, o.stderr)
		}
		rows := svc.trail(t, key)
		if len(rows) != 2 || rows[0].Action != "forget" || rows[1].Action != "forget" {
			t.Fatalf("audit rows: %+v, want two forgets", rows)
		}
		if _, claimed, err := svc.sql.Reserve(testCtx(t), key, "fp-1", time.Minute, time.Hour); err != nil || !claimed {
			t.Fatalf("Reserve after the forget: %v %v", claimed, err)
		}
		// --yes confirms too.
		key2 := idem.NewKey("", "done-2")
		s2, r2 := svc.claim(t, key2, time.Minute)
		svc.complete(t, key2, s2, r2, "ok")
		if o := svc.idem(t, "", "release", "done-2", "--reason", "x", "--forget", "--yes"); o.code != exitOK {
			t.Fatalf("--forget --yes: %d\n%s", o.code, o.stderr)
		}
	})
}

// list finds a lapsed claim, and an old one with --older-than; stats counts
// the table; check reports the tiers ready, and not ready without the
// table.
func TestListStatsCheck(t *testing.T) {
	eachBackend(t, func(t *testing.T, svc *service) {
		lapsed, live := idem.NewKey("t", "lapsed"), idem.NewKey("t", "live")
		svc.claim(t, lapsed, 20*time.Millisecond)
		svc.claim(t, live, time.Hour)
		deadline := time.Now().Add(30 * time.Second)
		for {
			o := svc.idem(t, "", "list", "--in-progress", "--older-than", "1h", "--tier", "all", "--json")
			claims := jsonOf[struct{ Claims []view }](t, o).Claims
			if o.code != exitOK {
				t.Fatalf("list: %d\n%s", o.code, o.stderr)
			}
			if len(claims) == 2 && claims[0].Digest == lapsed.Hex() && claims[1].Digest == lapsed.Hex() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("list --older-than 1h: %+v, want the lapsed claim in both tiers", claims)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if o := svc.idem(t, "", "list", "--in-progress"); o.code != exitOK || !strings.Contains(o.stdout, live.Hex()) ||
			!strings.Contains(o.stdout, lapsed.Hex()) || !strings.Contains(o.stdout, "lease lapsed") {
			t.Fatalf("list (table): %d\n%s%s", o.code, o.stdout, o.stderr)
		}
		o := svc.idem(t, "", "stats", "--json")
		st := jsonOf[statsView](t, o)
		if o.code != exitOK || st.InProgress != 2 || st.Completed != 0 || st.Bytes <= 0 || st.OldestClaimAgeMS == nil ||
			st.JanitorSweeping == nil {
			t.Fatalf("stats: %d %+v\n%s", o.code, st, o.stderr)
		}
		if o := svc.idem(t, "", "stats"); o.code != exitOK || !strings.Contains(o.stdout, "in progress") {
			t.Fatalf("stats (table): %d\n%s", o.code, o.stdout)
		}
		// The janitor's last run: none recorded before it ran (and before
		// the audit table exists, its runs are not recorded, silently);
		// then the run the audit table holds.
		if st.LastSweep != nil {
			t.Fatalf("stats before any sweep: last run %+v", st.LastSweep)
		}
		var sweepErrs atomic.Int64
		jctx := idem.ContextWithObserver(testCtx(t), idem.ObserverFunc(func(_ context.Context, e idem.Event) {
			if e.Kind == idem.EventTierError {
				sweepErrs.Add(1)
			}
		}))
		j := must.Get(janitor.New(svc.sql))(t)
		if _, _, err := j.Sweep(jctx); err != nil || sweepErrs.Load() != 0 {
			t.Fatalf("a sweep without the audit table: %v, %d errors reported", err, sweepErrs.Load())
		}
		if st := jsonOf[statsView](t, svc.idem(t, "", "stats", "--json")); st.LastSweep != nil {
			t.Fatalf("stats after a sweep with no audit table: last run %+v", st.LastSweep)
		}
		if err := svc.sql.Admin().Init(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := j.Sweep(jctx); err != nil || sweepErrs.Load() != 0 {
			t.Fatalf("a sweep: %v, %d errors reported", err, sweepErrs.Load())
		}
		o = svc.idem(t, "", "stats", "--json")
		if st := jsonOf[statsView](t, o); st.LastSweep == nil || st.LastSweep.Outcome != "swept" ||
			!strings.Contains(st.LastSweep.Reason, "deleted 0 rows") || !strings.HasPrefix(st.LastSweep.By, "janitor") {
			t.Fatalf("stats after a sweep: last run %+v\n%s", st.LastSweep, o.stderr)
		}
		if o := svc.idem(t, "", "stats"); !strings.Contains(o.stdout, "janitor's last run") || !strings.Contains(o.stdout, "swept ") {
			t.Fatalf("stats (table) after a sweep:\n%s", o.stdout)
		}
		if o := svc.idem(t, "", "check"); o.code != exitOK || !strings.Contains(o.stdout, "ready: true") {
			t.Fatalf("check: %d\n%s%s", o.code, o.stdout, o.stderr)
		}
		if o := svc.idem(t, "", "check", "--records-table", "idem_no_such_table"); o.code != exitError || !strings.Contains(o.stdout, "ready: false") {
			t.Fatalf("check without the table: %d\n%s%s", o.code, o.stdout, o.stderr)
		}
	})
}

// Usage mistakes exit 2 before any connection.
func TestUsage(t *testing.T) {
	e := env{getenv: func(string) string { return "" }, stdout: &strings.Builder{}, stderr: &strings.Builder{}}
	for _, args := range [][]string{
		nil, {"frobnicate"}, {"get", "--redis", "redis://127.0.0.1:1"}, {"get", "k"}, {"get", "--postgres", "x", "--mysql", "y", "k"},
		{"get", "--redis", "redis://127.0.0.1:1", "--digest", "zz"}, {"list", "--redis", "redis://127.0.0.1:1"},
	} {
		if code := run(t.Context(), args, e); code != exitUsage {
			t.Errorf("idem %q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
