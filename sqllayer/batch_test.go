package sqllayer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// gate blocks every write to b's records table (on MySQL every access;
// on in-memory SQLite, whose pool is one connection, every statement) until
// open is called, so that a test can hold one statement in flight while
// others queue behind it.
func gate(t *testing.T, b *backend) (open func()) {
	t.Helper()
	db := b.sql.Open(t)
	switch b.sql.Kind {
	case "postgres":
		tx := must.Get(db.BeginTx(ctx(t), nil))(t)
		if _, err := tx.ExecContext(ctx(t), "LOCK TABLE "+b.records+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback() }
	case "mysql":
		conn := must.Get(db.Conn(ctx(t)))(t)
		if _, err := conn.ExecContext(ctx(t), "LOCK TABLES "+b.records+" WRITE"); err != nil {
			t.Fatal(err)
		}
		return func() {
			if _, err := conn.ExecContext(ctx(t), "UNLOCK TABLES"); err != nil {
				t.Error(err)
			}
			_ = conn.Close()
		}
	}
	tx := must.Get(db.BeginTx(ctx(t), nil))(t)
	if _, err := tx.ExecContext(ctx(t), "DELETE FROM "+b.records+" WHERE 1 = 0"); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback() }
}

// reserve claims k and returns the claim, failing the test on an error.
func reserve(c context.Context, t *testing.T, l *sqllayer.Layer, k idem.Key, fp string, lease, ttl time.Duration) idem.Record {
	t.Helper()
	r, _, err := l.Reserve(c, k, fp, lease, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// until polls cond until it holds, failing the test after a minute.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	c := ctx(t)
	for !cond() {
		select {
		case <-c.Done():
			t.Fatalf("waited in vain for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

// inFlight waits until a statement of kind k (0 claims, 1 completions) is in
// flight on l and n calls are queued behind it.
func inFlight(t *testing.T, l *sqllayer.Layer, k, n int) {
	t.Helper()
	until(t, fmt.Sprintf("%d queued calls", n), func() bool {
		busy, queued, _ := sqllayer.BatchState(l)
		return busy[k] && queued[k] == n
	})
}

type claimAnswer struct {
	rec     idem.Record
	claimed bool
	err     error
}

// TestBatchedClaimsMixed sends one batch of claims whose keys are in every
// state a claim can meet and checks that each gets the answer an unbatched
// Reserve gives.
func TestBatchedClaimsMixed(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		prep, _ := b.layer(t, sqllayer.WithBatchSize(0))
		l, _ := b.layer(t, sqllayer.WithBatchSize(64))
		c := ctx(t)
		key := func(name string) idem.Key { return idem.NewKey("mixed", testenv.Name(name)) }
		kDone, kMis, kLive, kGrace, kTake, kNew, kTwice, kLone := key("done"), key("mis"), key("live"), key("grace"), key("take"), key("new"), key("twice"), key("lone")

		rec := reserve(c, t, prep, kDone, "fp", time.Hour, time.Hour)
		if err := prep.Complete(c, kDone, rec.Token, []byte("stored"), time.Hour); err != nil {
			t.Fatal(err)
		}
		reserve(c, t, prep, kMis, "other", time.Hour, time.Hour)
		reserve(c, t, prep, kLive, "fp", time.Hour, time.Hour)
		graceOwner := reserve(c, t, prep, kGrace, "fp", time.Microsecond, time.Hour)
		takeOwner := reserve(c, t, prep, kTake, "fp", 4*time.Microsecond, time.Hour)
		time.Sleep(20 * time.Millisecond) // lapse the leases of a microsecond (SQLite counts milliseconds)
		if r, claimed, err := prep.Reserve(c, kTake, "fp", 4*time.Microsecond, time.Hour); err != nil || claimed || r.State != idem.StateInProgress {
			t.Fatalf("granting the grace: %+v %v %v", r, claimed, err)
		}
		time.Sleep(20 * time.Millisecond) // lapse the grace of a microsecond

		open := gate(t, b)
		lone := make(chan claimAnswer, 1)
		go func() {
			r, claimed, err := l.Reserve(c, kLone, "fp", time.Hour, time.Hour)
			lone <- claimAnswer{r, claimed, err}
		}()
		inFlight(t, l, 0, 0)
		calls := []struct {
			key idem.Key
			fp  string
		}{{kNew, "fp"}, {kTwice, "fp"}, {kTwice, "fp"}, {kDone, "fp"}, {kMis, "fp"}, {kLive, "fp"}, {kGrace, "fp"}, {kTake, "fp"}}
		_, _, before := sqllayer.BatchState(l)
		got := make([]claimAnswer, len(calls))
		var wg sync.WaitGroup
		for i, call := range calls {
			wg.Go(func() {
				r, claimed, err := l.Reserve(c, call.key, call.fp, time.Hour, time.Hour)
				got[i] = claimAnswer{r, claimed, err}
			})
		}
		inFlight(t, l, 0, len(calls))
		open()
		wg.Wait()
		if r := <-lone; r.err != nil || !r.claimed {
			t.Errorf("lone claim: %+v", r)
		}
		if _, _, after := sqllayer.BatchState(l); after[0]-before[0] != int64(len(calls)) {
			t.Errorf("%d calls went out in batches, want %d", after[0]-before[0], len(calls))
		}
		for i, g := range got {
			if g.err != nil {
				t.Fatalf("call %d: %v", i, g.err)
			}
		}
		check := func(name string, ok bool, g claimAnswer) {
			t.Helper()
			if !ok {
				t.Errorf("%s: got claimed=%v %+v", name, g.claimed, g.rec)
			}
		}
		check("new key", got[0].claimed && got[0].rec.Token != "" && got[0].rec.State == idem.StateInProgress, got[0])
		if got[1].claimed == got[2].claimed {
			t.Errorf("a key twice in one batch: claimed %v and %v, want exactly one", got[1].claimed, got[2].claimed)
		}
		for _, g := range got[1:3] {
			check("key twice", g.rec.State == idem.StateInProgress && (g.claimed == (g.rec.Token != "")), g)
		}
		check("completed", !got[3].claimed && got[3].rec.Completed() && string(got[3].rec.Result) == "stored" && got[3].rec.Token == "", got[3])
		check("mismatch", !got[4].claimed && got[4].rec.Fingerprint == "other", got[4])
		check("live lease", !got[5].claimed && got[5].rec.State == idem.StateInProgress && got[5].rec.Token == "", got[5])
		check("lapsed lease: grace", !got[6].claimed && got[6].rec.State == idem.StateInProgress, got[6])
		check("lapsed grace: takeover", got[7].claimed && got[7].rec.Token != takeOwner.Token, got[7])
		// The owner in its grace still completes; the one taken over cannot.
		if err := prep.Complete(c, kGrace, graceOwner.Token, []byte("late"), time.Hour); err != nil {
			t.Errorf("the owner in its grace: %v", err)
		}
		if err := prep.Complete(c, kTake, takeOwner.Token, []byte("late"), time.Hour); !errors.Is(err, idem.ErrLeaseLost) {
			t.Errorf("the owner taken over: %v, want ErrLeaseLost", err)
		}
	})
}

// TestBatchedCompletionsMixed sends one batch of completions in every case
// Complete knows, next to one refused before it is sent.
func TestBatchedCompletionsMixed(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, _ := b.layer(t, sqllayer.WithBatchSize(64))
		c := ctx(t)
		claim := func(name string) (idem.Key, string) {
			k := idem.NewKey("complete", testenv.Name(name))
			r := reserve(c, t, l, k, "fp", time.Hour, time.Hour)
			return k, r.Token
		}
		kLone, tLone := claim("lone")
		k1, t1 := claim("one")
		k2, t2 := claim("two")
		kLost, _ := claim("lost")
		kResent, tResent := claim("resent")
		if err := l.Complete(c, kResent, tResent, []byte("first"), time.Hour); err != nil {
			t.Fatal(err)
		}
		kOther, tOther := claim("other")
		if err := l.Complete(c, kOther, tOther, []byte("first"), time.Hour); err != nil {
			t.Fatal(err)
		}
		kBrief, tBrief := claim("brief")
		kTwice, tTwice := claim("twice")
		kBig, tBig := claim("big")

		open := gate(t, b)
		lone := make(chan error, 1)
		go func() { lone <- l.Complete(c, kLone, tLone, []byte("lone"), time.Hour) }()
		inFlight(t, l, 1, 0)
		calls := []struct {
			key    idem.Key
			token  string
			result []byte
			ttl    time.Duration
			want   error
		}{
			{k1, t1, []byte("one"), time.Hour, nil},
			{k2, t2, nil, time.Hour, nil},
			{kLost, idem.NewToken(), []byte("thief"), time.Hour, idem.ErrLeaseLost},
			{kResent, tResent, []byte("first"), time.Hour, nil},
			// The first completion stands; another result is refused.
			{kOther, tOther, []byte("second"), time.Hour, idem.ErrConfig},
			// Completed, and its retention lapses before any read of it.
			{kBrief, tBrief, []byte("brief"), time.Microsecond, nil},
			{kTwice, tTwice, []byte("twice"), time.Hour, nil},
			{kTwice, tTwice, []byte("twice"), time.Hour, nil},
		}
		errs := make([]error, len(calls))
		var wg sync.WaitGroup
		for i, call := range calls {
			wg.Go(func() { errs[i] = l.Complete(c, call.key, call.token, call.result, call.ttl) })
		}
		inFlight(t, l, 1, len(calls))
		// A result over the limit fails alone, before anything is sent.
		if err := l.Complete(c, kBig, tBig, make([]byte, idem.MaxResult+1), time.Hour); !errors.Is(err, idem.ErrTooLarge) {
			t.Errorf("oversized result: %v, want ErrTooLarge", err)
		}
		open()
		wg.Wait()
		if err := <-lone; err != nil {
			t.Errorf("lone completion: %v", err)
		}
		for i, call := range calls {
			if !errors.Is(errs[i], call.want) || (call.want == nil && errs[i] != nil) {
				t.Errorf("completion %d: %v, want %v", i, errs[i], call.want)
			}
		}
		for _, k := range []struct {
			key    idem.Key
			result string
		}{{k1, "one"}, {k2, ""}, {kResent, "first"}, {kOther, "first"}, {kTwice, "twice"}, {kLone, "lone"}} {
			r, err := l.Get(c, k.key)
			if err != nil || !r.Completed() || !bytes.Equal(r.Result, []byte(k.result)) {
				t.Errorf("after the batch: %+v %v, want completed with %q", r, err, k.result)
			}
		}
		for _, k := range []idem.Key{kLost, kBig} {
			if r, err := l.Get(c, k); err != nil || r.State != idem.StateInProgress {
				t.Errorf("a refused completion changed the record: %+v %v", r, err)
			}
		}
	})
}

// TestBatchedClaimLeaves: a caller whose context ends while its claim is in
// a batch in flight returns at once; the claim the batch then wins is
// released, so the key does not stay held by nobody until the lease lapses.
// Uncommitted rows of other transactions hold the statements in flight.
func TestBatchedClaimLeaves(t *testing.T) {
	b := setup(t, testenv.Postgres(t))
	app := testenv.Name("batch")
	bl := &backend{sql: testenv.WithApplicationName(t, b.sql, app), opts: b.opts, records: b.records}
	l, _ := bl.layer(t, sqllayer.WithBatchSize(64))
	other, _ := b.layer(t, sqllayer.WithBatchSize(0))
	admin := b.sql.Open(t)
	c := ctx(t)
	kLone, kGone, kStay := idem.NewKey("leave", testenv.Name("lone")), idem.NewKey("leave", testenv.Name("gone")), idem.NewKey("leave", testenv.Name("stay"))
	// hold inserts k's row in a transaction of its own, which the returned
	// func rolls back.
	hold := func(k idem.Key) func() {
		tx := must.Get(admin.BeginTx(c, nil))(t)
		d := k.Digest()
		if _, err := tx.ExecContext(c, "INSERT INTO "+b.records+` (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
VALUES (?, '', '', 'fp', 1, 'gate', now(), now(), now() + interval '1 hour')`, d[:]); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback() }
	}

	open1 := hold(kLone)
	lone := make(chan error, 1)
	go func() { _, _, err := l.Reserve(c, kLone, "fp", time.Hour, time.Hour); lone <- err }()
	inFlight(t, l, 0, 0)
	goneCtx, leave := context.WithCancel(c)
	gone, stay := make(chan error, 1), make(chan claimAnswer, 1)
	go func() { _, _, err := l.Reserve(goneCtx, kGone, "fp", time.Hour, time.Hour); gone <- err }()
	go func() {
		r, claimed, err := l.Reserve(c, kStay, "fp", time.Hour, time.Hour)
		stay <- claimAnswer{r, claimed, err}
	}()
	inFlight(t, l, 0, 2)
	open2 := hold(kStay)
	open1()
	if err := <-lone; err != nil {
		t.Fatal(err)
	}
	testenv.WaitPostgresLockWait(t, admin, app, time.Minute) // the batch waits for kStay
	leave()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that left got %v, want context.Canceled", err)
	}
	open2()
	if r := <-stay; r.err != nil || !r.claimed {
		t.Fatalf("its neighbour: %+v", r)
	}
	until(t, "the batcher to go idle", func() bool { busy, _, _ := sqllayer.BatchState(l); return !busy[0] })
	if _, claimed, err := other.Reserve(c, kGone, "fp", time.Hour, time.Hour); err != nil || !claimed {
		t.Errorf("the key of the caller that left is still held: claimed=%v %v", claimed, err)
	}
}
