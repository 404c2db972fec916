package tiered

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// With both tiers, a new key used to pay a Redis round trip before its SQL
// claim and another after its SQL completion, on the caller's time: the
// Redis tier, which exists to make duplicates cheap, cost every first
// execution two round trips. Two things take them off the critical path:
//
//   - While most keys need SQL (new keys, and keys Redis reports in
//     progress: SQL decides both), the SQL claim is sent at the same time as
//     the Redis claim, on a goroutine of its own, and the call goes on once
//     both have answered. SQL decides as before; Redis only supplies its
//     claim, whose completion wakes waiters on other instances. When Redis
//     answers on its own (a completed record: a replay or a mismatch), the
//     SQL answer is dropped, and a claim it won is released.
//   - The result SQL accepted reaches Redis on a goroutine of its own (see
//     publishLater): the caller is answered once SQL committed it.
//
// While most keys are duplicates Redis answers alone, the claims stay in
// order (Redis, then SQL only when needed), so that a duplicate does not
// cost the database a statement for nothing. The Store learns which case
// holds from Redis's answers (sqlGuess).

// sqlGuess guesses whether the next call will need SQL, from the Redis
// answers of the calls before it: a saturating count, up by one for an
// answer that left the decision to SQL (a claim won, a key in progress) and
// down by one for one that decided (a completed record). It overlaps the
// claims while more recent calls needed SQL than not. Racy updates lose a
// step now and then; a guess needs no more.
type sqlGuess struct{ n atomic.Int32 }

const (
	guessMax  = 32
	guessHalf = guessMax / 2
)

func newSQLGuess() *sqlGuess {
	g := &sqlGuess{}
	// A new Store expects duplicates, so that its first ones (a restart
	// amid retries) cost the database nothing; the first call that needs
	// SQL turns overlapping on.
	g.n.Store(guessHalf - 1)
	return g
}

// likely reports whether the next call probably needs SQL.
func (g *sqlGuess) likely() bool { return g.n.Load() >= guessHalf }

// learn records whether a call's Redis answer left the decision to SQL.
func (g *sqlGuess) learn(neededSQL bool) {
	n := g.n.Load()
	switch {
	case neededSQL && n < guessMax:
		g.n.Store(n + 1)
	case !neededSQL && n > 0:
		g.n.Store(n - 1)
	}
}

// sqlAnswer is the answer of one SQL Reserve sent at sent.
type sqlAnswer struct {
	rec     idem.Record
	claimed bool
	err     error
	sent    time.Time
}

// reserveSQL sends one SQL Reserve for the call.
func (c *call) reserveSQL() (a sqlAnswer) {
	s := c.s
	a.sent = time.Now()
	ctx, cancel := s.sqlBounds.call(c.ctx, a.sent)
	a.rec, a.claimed, a.err = s.sql.Reserve(ctx, c.key, c.fp(), s.cfg.lease, s.cfg.retention)
	cancel()
	c.tierCall(idem.TierSQL, a.sent, a.err)
	return a
}

// Hand-off states of a sqlAsk.
const (
	askRunning int32 = iota
	askAnswered
	askDropped
)

// sqlAsk is an SQL Reserve sent ahead, while Redis is asked.
type sqlAsk struct {
	c     *call
	done  chan struct{} // closed when ans is set
	ans   sqlAnswer
	state atomic.Int32 // askRunning, then askAnswered or askDropped, once
}

// askSQLAhead sends the call's SQL Reserve on a goroutine of its own, or
// returns nil when the Store is closing.
func (c *call) askSQLAhead() *sqlAsk {
	if !c.s.track() {
		return nil
	}
	a := &sqlAsk{c: c, done: make(chan struct{})}
	go func() {
		defer c.s.wg.Done()
		a.ans = c.reserveSQL()
		close(a.done)
		if !a.state.CompareAndSwap(askRunning, askAnswered) {
			a.release() // dropped while it ran: nobody else will
		}
	}()
	return a
}

// answer waits for the SQL answer.
func (a *sqlAsk) answer() *sqlAnswer {
	<-a.done
	return &a.ans
}

// drop says the call does not need the SQL answer: Redis answered. A claim
// SQL granted is released, here when the answer is in already, else by the
// goroutine when it comes.
func (a *sqlAsk) drop() {
	if !a.state.CompareAndSwap(askRunning, askDropped) {
		a.release()
	}
}

// release gives up a claim the dropped answer won, so that the key is not
// held by nobody until the lease lapses.
func (a *sqlAsk) release() {
	if a.ans.err != nil || !a.ans.claimed {
		return
	}
	c, s := a.c, a.c.s
	ctx, cancel := s.sqlBounds.call(c.ctx, time.Now())
	defer cancel()
	if err := s.sql.Release(ctx, c.key, a.ans.rec.Token); err != nil && !errors.Is(err, idem.ErrLeaseLost) {
		c.observe(idem.EventTierError, idem.TierSQL, 0, err)
	}
}
