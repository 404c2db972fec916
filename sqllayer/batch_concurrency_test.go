package sqllayer_test

import (
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

// Batches under concurrency: several statements of a kind in flight,
// claims and completions in one batch, rows changed by other transactions
// while a batch is in flight.

// TestBatchedManyInFlight: with batches of 2, the calls of 24 goroutines
// per Layer queue full batches faster than one statement carries them, so
// that several statements of a kind are in flight on a Layer at once.
// Three Layers over pools of their own share the tables, and every key is
// asked for by two goroutines of different Layers: each key is claimed
// once and completed by its claimant, and the other sees the claim or the
// result.
func TestBatchedManyInFlight(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		b.conns = 8
		const layers, perLayer = 3, 24
		perG := 12
		if !b.sql.Real {
			perG = 3 // SQLite is Go code, which the race detector slows tenfold
		}
		ls := make([]*sqllayer.Layer, layers)
		for i := range ls {
			ls[i], _ = b.layer(t, sqllayer.WithBatchSize(2))
		}
		prefix := testenv.Name("inflight")
		goroutines := layers * perLayer
		claims := make([]int, goroutines/2*perG)
		var mu sync.Mutex
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				<-start
				claimShared(t, ls[g%layers], prefix, g, perG, claims, &mu)
			})
		}
		close(start)
		wg.Wait()
		for n, c := range claims {
			if c != 1 {
				t.Fatalf("key %d claimed %d times", n, c)
			}
			r, err := ls[0].Get(ctx(t), idem.NewKey(prefix, fmt.Sprint(n)))
			if err != nil || !r.Completed() || string(r.Result) != fmt.Sprint(n) {
				t.Fatalf("key %d: %+v %v, want completed with its number", n, r, err)
			}
		}
		peak := 0
		for _, l := range ls {
			p := sqllayer.BatchPeak(l)
			peak = max(peak, p[0], p[1])
			until(t, "the batchers to go idle", func() bool {
				busy, queued, _ := sqllayer.BatchState(l)
				return !busy[0] && !busy[1] && queued[0]+queued[1] == 0
			})
		}
		if b.sql.Real && peak < 2 {
			t.Errorf("at most %d statement of a kind was in flight at once, want several", peak)
		}
		t.Logf("at most %d statements of a kind in flight at once", peak)
	})
}

// TestBatchedCompletionOfARowChangedMeanwhile: a batched completion whose
// row another transaction changed after the statement began (a renewal,
// say) skips it in the batch, and its caller's own statements complete
// it; its neighbour completes in the batch.
func TestBatchedCompletionOfARowChangedMeanwhile(t *testing.T) {
	b := setup(t, testenv.Postgres(t))
	app := testenv.Name("batch")
	bl := &backend{sql: testenv.WithApplicationName(t, b.sql, app), opts: b.opts, records: b.records}
	l, _ := bl.layer(t, sqllayer.WithBatchSize(64))
	admin := b.sql.Open(t)
	c := ctx(t)
	claim := func(name string) (idem.Key, string) {
		k := idem.NewKey("changed", testenv.Name(name))
		return k, reserve(c, t, l, k, "fp", time.Hour, time.Hour).Token
	}
	kLone, tLone := claim("lone")
	k1, t1 := claim("one")
	k2, t2 := claim("two")
	// hold changes k's row in a transaction of its own, as a renewal
	// would, and returns the commit.
	hold := func(k idem.Key) func() {
		tx := must.Get(admin.BeginTx(c, nil))(t)
		d := k.Digest()
		if _, err := tx.ExecContext(c, "UPDATE "+b.records+" SET lease_until = lease_until + interval '1 second' WHERE key_digest = ?", d[:]); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := tx.Commit(); err != nil {
				t.Error(err)
			}
		}
	}
	commitLone := hold(kLone)
	lone := make(chan error, 1)
	go func() { lone <- l.Complete(c, kLone, tLone, []byte("lone"), time.Hour) }()
	inFlight(t, l, 1, 0)
	commit1 := hold(k1)
	errs := make(chan error, 2)
	go func() { errs <- l.Complete(c, k1, t1, []byte("one"), time.Hour) }()
	go func() { errs <- l.Complete(c, k2, t2, []byte("two"), time.Hour) }()
	inFlight(t, l, 1, 2)
	_, _, before := sqllayer.BatchState(l)
	commitLone()
	if err := <-lone; err != nil {
		t.Fatal(err)
	}
	testenv.WaitPostgresLockWait(t, admin, app, time.Minute) // the batch waits for k1's row
	commit1()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Complete: %v", err)
		}
	}
	if _, _, after := sqllayer.BatchState(l); after[1]-before[1] != 2 {
		t.Errorf("%d completions went out in a batch, want 2", after[1]-before[1])
	}
	for k, want := range map[idem.Key]string{kLone: "lone", k1: "one", k2: "two"} {
		if r, err := l.Get(c, k); err != nil || !r.Completed() || string(r.Result) != want {
			t.Errorf("after the batch: %+v %v, want completed with %q", r, err, want)
		}
	}
}

// TestMarkProcessedBatchWaitsForAConcurrentMark: an event another
// transaction marked and had not committed when the batch's INSERT met it
// is a duplicate once that transaction commits, although the batch's
// snapshot cannot see its row; the batch's other events are new.
func TestMarkProcessedBatchWaitsForAConcurrentMark(t *testing.T) {
	b := setup(t, testenv.Postgres(t))
	app := testenv.Name("mark")
	bl := &backend{sql: testenv.WithApplicationName(t, b.sql, app), opts: b.opts, records: b.records}
	l, db := bl.layer(t)
	other, otherDB := b.layer(t)
	admin := b.sql.Open(t)
	c := ctx(t)
	consumer := testenv.Name("consumer")
	first := must.Get(otherDB.BeginTx(c, nil))(t)
	defer func() { _ = first.Rollback() }()
	if dup, err := other.MarkProcessed(c, first, consumer, "x"); err != nil || dup {
		t.Fatalf("the first mark: %v %v", dup, err)
	}
	got := make(chan []bool, 1)
	go func() {
		tx := must.Get(db.BeginTx(c, nil))(t)
		defer func() { _ = tx.Rollback() }()
		dups, err := l.MarkProcessedBatch(c, tx, consumer, []string{"y", "x", "z"})
		if err != nil {
			t.Error(err)
		}
		got <- dups
	}()
	testenv.WaitPostgresLockWait(t, admin, app, time.Minute)
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	if dups := <-got; fmt.Sprint(dups) != "[false true false]" {
		t.Errorf("the batch after the concurrent mark committed: %v, want [false true false]", dups)
	}
}

// TestBatchedClaimsAndCompletionsTogether: claims and completions queued
// behind a statement go out together (on Postgres in one statement; on
// the others each kind has its own batches), and each gets the answer it
// would have had alone.
func TestBatchedClaimsAndCompletionsTogether(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, _ := b.layer(t, sqllayer.WithBatchSize(64))
		c := ctx(t)
		key := func(name string) idem.Key { return idem.NewKey("together", testenv.Name(name)) }
		kLone, kNew, kDone, kOwned, kLost, kSame := key("lone"), key("new"), key("done"), key("owned"), key("lost"), key("same")
		rec := reserve(c, t, l, kDone, "fp", time.Hour, time.Hour)
		if err := l.Complete(c, kDone, rec.Token, []byte("stored"), time.Hour); err != nil {
			t.Fatal(err)
		}
		owned := reserve(c, t, l, kOwned, "fp", time.Hour, time.Hour)
		reserve(c, t, l, kLost, "fp", time.Hour, time.Hour)
		same := reserve(c, t, l, kSame, "fp", time.Hour, time.Hour)

		open := gate(t, b)
		lone := make(chan error, 1)
		go func() { _, _, err := l.Reserve(c, kLone, "fp", time.Hour, time.Hour); lone <- err }()
		inFlight(t, l, 0, 0)
		var (
			wg                sync.WaitGroup
			newAns, doneAns   claimAnswer
			sameAns           claimAnswer
			ownedErr, lostErr error
			sameErr           error
		)
		wg.Go(func() { r, ok, err := l.Reserve(c, kNew, "fp", time.Hour, time.Hour); newAns = claimAnswer{r, ok, err} })
		wg.Go(func() {
			r, ok, err := l.Reserve(c, kDone, "fp", time.Hour, time.Hour)
			doneAns = claimAnswer{r, ok, err}
		})
		wg.Go(func() { ownedErr = l.Complete(c, kOwned, owned.Token, []byte("owned"), time.Hour) })
		wg.Go(func() { lostErr = l.Complete(c, kLost, idem.NewToken(), []byte("thief"), time.Hour) })
		// A claim and the completion of one key, in one batch.
		wg.Go(func() {
			r, ok, err := l.Reserve(c, kSame, "fp", time.Hour, time.Hour)
			sameAns = claimAnswer{r, ok, err}
		})
		wg.Go(func() { sameErr = l.Complete(c, kSame, same.Token, []byte("same"), time.Hour) })
		until(t, "the calls to queue", func() bool {
			busy, queued, _ := sqllayer.BatchState(l)
			if s.Kind == "postgres" { // one batcher for both
				return queued[0] == 6
			}
			// A batcher each: one completion went out alone, behind the gate.
			return queued[0] == 3 && busy[1] && queued[1] == 2
		})
		open()
		wg.Wait()
		if err := <-lone; err != nil {
			t.Fatal(err)
		}
		if newAns.err != nil || !newAns.claimed || newAns.rec.Token == "" {
			t.Errorf("new key: %+v", newAns)
		}
		if doneAns.err != nil || doneAns.claimed || !doneAns.rec.Completed() || string(doneAns.rec.Result) != "stored" {
			t.Errorf("completed key: %+v", doneAns)
		}
		if ownedErr != nil {
			t.Errorf("the owner's completion: %v", ownedErr)
		}
		if !errors.Is(lostErr, idem.ErrLeaseLost) {
			t.Errorf("a completion with another token: %v, want ErrLeaseLost", lostErr)
		}
		if sameErr != nil {
			t.Errorf("the completion next to a claim of its key: %v", sameErr)
		}
		if sameAns.err != nil || sameAns.claimed || sameAns.rec.Token != "" ||
			(sameAns.rec.State != idem.StateInProgress && !sameAns.rec.Completed()) {
			t.Errorf("the claim next to a completion of its key: %+v", sameAns)
		}
		for k, want := range map[idem.Key]string{kOwned: "owned", kSame: "same", kDone: "stored"} {
			if r, err := l.Get(c, k); err != nil || !r.Completed() || string(r.Result) != want {
				t.Errorf("after the batch: %+v %v, want completed with %q", r, err, want)
			}
		}
		if r, err := l.Get(c, kLost); err != nil || r.State != idem.StateInProgress {
			t.Errorf("a refused completion changed the record: %+v %v", r, err)
		}
	})
}
