package sqllayer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// Atomic executions. A tiered.Store made WithAtomic runs each execution it
// leads through RunAtomic: one transaction holds the claim, the work's own
// rows and the completion, and one COMMIT makes them durable together. An
// open transaction is the lease: no other caller sees the claim until it
// commits, and a concurrent claim of the same key waits on the unique
// index until the transaction ends — then it finds the completed record
// (a replay), or no record (the owner rolled back: it claims the key
// itself) — or until its lock timeout, the Store's wait.

// atomicTx is one atomic execution's transaction.
type atomicTx struct {
	l       *Layer
	ctx     context.Context         // the transaction's
	end     context.CancelCauseFunc // ends ctx, once the transaction did
	conn    bun.Conn                // the pool's connection the transaction holds
	server  int64                   // the server's id of conn's session; 0: none (see watch)
	tx      bun.Tx
	q       querier
	key     idem.Key
	claim   *claim // what the transaction claimed
	token   string
	ttl     time.Duration
	timeout time.Duration

	// completed and result are the work goroutine's: set by complete,
	// read once work returned.
	completed bool
	result    []byte

	mu      sync.Mutex
	refused error // a completion in another transaction, refused; guarded by mu
}

// atomicKey is the context key of the transaction TxFrom returns.
type atomicKey struct{}

// TxFrom returns the transaction of the atomic execution ctx belongs to:
// the context a tiered.Store made WithAtomic gives its function (a handler
// behind the HTTP middleware, a gRPC handler behind idemgrpc, a Do or Once
// function), or one derived from it. Write the work's rows in it: they
// commit with the claim and the completion, in one COMMIT, or not at all.
// The Store commits and rolls back: do neither. ok is false outside an
// atomic execution.
func TxFrom(ctx context.Context) (tx bun.Tx, ok bool) {
	a, ok := ctx.Value(atomicKey{}).(*atomicTx)
	if !ok || a == nil {
		return bun.Tx{}, false
	}
	return a.tx, true
}

// RunAtomic runs one execution of key in a transaction of the layer's
// database; tiered.Store calls it when made WithAtomic (it is the
// tiered.AtomicLayer the Store needs). It begins the transaction and
// claims the key in it for fingerprint (lease and ttl as Reserve takes
// them), waiting at most wait for a concurrent claim whose transaction is
// still open: through lock_timeout on Postgres (SET LOCAL, in the claim's
// own statement), the session's innodb_lock_wait_timeout on MySQL and
// MariaDB (whole seconds, at least one), and the busy timeout of the DSN on
// SQLite, where one writer at a time holds the database and atomic
// executions run one after another. Each statement of its own is bounded by
// timeout (0: no bound), the claim by wait and timeout.
//
// When the key is claimed, work runs with a context that carries the
// transaction (TxFrom) and the claimed record; it calls complete to write
// the completion in the transaction, and when it returns nil with a
// completion written the layer commits. An error from work, a completion
// refused (see CompleteReservation), no completion, a panic or a
// runtime.Goexit roll everything back: nothing is committed, no claim is
// left, and a retry runs without waiting out a lease. ctx is the
// transaction's: when it ends before the commit, database/sql rolls back.
//
// It returns claimed false with the record that holds the key (completed,
// of another fingerprint, or in progress under a claim committed outside
// an atomic execution), or with an error: idem.ErrInFlight when the wait
// ran out, the error of a failed claim otherwise. With claimed true it
// returns the completed record and nil once the commit succeeded; work's
// own error as work returned it; an error wrapping idem.ErrConfig for a
// refused completion; or the commit's error, after which the caller does
// not know whether the transaction committed and reads the record back.
func (l *Layer) RunAtomic(ctx context.Context, key idem.Key, fingerprint string, lease, ttl, wait, timeout time.Duration,
	work func(ctx context.Context, rec idem.Record, complete func(result []byte) error) error) (idem.Record, bool, error) {
	if err := l.check(ctx, key); err != nil {
		return idem.Record{}, false, err
	}
	switch {
	case lease <= 0 || ttl <= 0:
		return idem.Record{}, false, fmt.Errorf("sqllayer: lease and ttl must be positive (lease %v, ttl %v)", lease, ttl)
	case wait < 0 || timeout < 0:
		return idem.Record{}, false, fmt.Errorf("sqllayer: wait and timeout must not be negative (wait %v, timeout %v)", wait, timeout)
	case len(fingerprint) > maxFingerprint:
		return idem.Record{}, false, fmt.Errorf("sqllayer: fingerprint of %d bytes, limit %d", len(fingerprint), maxFingerprint)
	case work == nil:
		return idem.Record{}, false, fmt.Errorf("%w: sqllayer: RunAtomic with a nil work", idem.ErrConfig)
	}
	d := key.Digest()
	c := &claim{
		key:    key,
		digest: d[:],
		scope:  l.text(label(key.Scope())),
		client: l.text(label(key.ClientKey())),
		fp:     bin(fingerprint),
		lease:  micros(lease),
		expiry: claimLife(micros(lease), micros(ttl)),
	}
	until := time.Now().Add(wait)
	a, rec, err := l.claimAtomic(ctx, c, until, timeout)
	if err != nil || a == nil {
		return rec, false, err
	}
	a.ttl = ttl
	return l.runClaimed(a, rec, lease, work)
}

// runClaimed runs work in the claimed transaction a, watched for the
// lease, and commits or rolls back.
func (l *Layer) runClaimed(a *atomicTx, rec idem.Record, lease time.Duration,
	work func(ctx context.Context, rec idem.Record, complete func(result []byte) error) error) (idem.Record, bool, error) {
	l.atomics.Store(a.token, a)
	workCtx, lost := context.WithCancelCause(context.WithValue(a.ctx, atomicKey{}, a))
	stopWatch := a.watch(lease, lost)
	ended := false
	defer func() {
		if !ended {
			// work panicked or called runtime.Goexit: nothing commits.
			stopWatch()
			lost(nil)
			rollback(a.tx, a.end, a.timeout)
			l.disconnect(a.conn)
			l.atomics.Delete(a.token)
		}
	}()
	err := work(workCtx, rec, a.complete)
	ended = true
	stopWatch()
	if err == nil && workCtx.Err() != nil {
		// The watch found the transaction gone: the work may not have
		// noticed, and a commit could only fail.
		err = context.Cause(workCtx)
	}
	lost(nil)
	l.atomics.Delete(a.token)
	a.mu.Lock()
	refused := a.refused
	a.mu.Unlock()
	switch {
	case err != nil:
	case refused != nil:
		err = refused
	case !a.completed:
		err = fmt.Errorf("%w: sqllayer: an atomic execution returned without writing its completion", idem.ErrConfig)
	}
	if err != nil {
		rollback(a.tx, a.end, a.timeout)
		l.disconnect(a.conn)
		return rec, true, err
	}
	err = a.commit()
	a.end(nil)
	l.disconnect(a.conn)
	if err != nil {
		return rec, true, l.wrap("commit", err)
	}
	rec.State, rec.Result, rec.Token = idem.StateCompleted, a.result, ""
	rec.LeaseUntil = time.Time{}
	rec.ExpiresIn = max(a.ttl-l.resolution, 0)
	return rec, true, nil
}

// complete writes the completion in the transaction: the Store's own, once
// its function returned.
func (a *atomicTx) complete(result []byte) error {
	l := a.l
	ctx := a.ctx
	if err := l.checkComplete(ctx, a.key, result, a.ttl); err != nil {
		return err
	}
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	if result == nil {
		result = []byte{}
	}
	err := l.complete(ctx, a.q, a.key, a.token, result, a.ttl)
	if errors.Is(err, idem.ErrLeaseLost) {
		// The claim's own expiry passed while the work ran longer than the
		// lease and the retention together. No one else saw or could take
		// the row: the transaction holds it (an insert not yet committed,
		// or a row it updated). Claim it anew under the same token, then
		// complete.
		_, ok, terr := l.takeover(ctx, a.q, a.claim, a.token, bin(a.token))
		switch {
		case terr != nil:
			err = terr
		case ok:
			err = l.complete(ctx, a.q, a.key, a.token, result, a.ttl)
		}
	}
	if err != nil {
		return l.wrap("complete", err)
	}
	a.completed, a.result = true, result
	return nil
}

// refuse records and returns the refusal of a completion the function of
// an atomic execution tried itself: its transaction is the Store's.
func (a *atomicTx) refuse() error {
	err := fmt.Errorf("%w: sqllayer: this execution is atomic (tiered.WithAtomic): the Store completes the key in its own transaction, which sqllayer.TxFrom(ctx) returns; write the rows there and return the result instead of completing the reservation", idem.ErrConfig)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused == nil {
		a.refused = err
	}
	return err
}

// atomicFor returns the atomic execution that holds token, or nil.
func (l *Layer) atomicFor(token string) *atomicTx {
	if a, ok := l.atomics.Load(token); ok {
		return a.(*atomicTx)
	}
	return nil
}

// claimAtomic begins transactions until one claims the key (a is its
// transaction), the key is found held (a is nil, rec what holds it), or an
// error: a conflict or a broken connection before the work begins starts
// over in a new transaction, up to the layer's retries. The whole claim —
// connections, BEGINs, statements and retries — takes at most the wait
// and the timeout together (with a timeout; else it is bounded by ctx).
func (l *Layer) claimAtomic(ctx context.Context, c *claim, until time.Time, timeout time.Duration) (*atomicTx, idem.Record, error) {
	var bound time.Time
	if timeout > 0 {
		bound = until.Add(timeout)
	}
	retries := 0
	for round := 0; ; round++ {
		if round >= maxRounds {
			return nil, idem.Record{}, l.wrap("reserve", errRounds)
		}
		if !bound.IsZero() && !time.Now().Before(bound) {
			return nil, idem.Record{}, l.wrap("reserve", fmt.Errorf("sqllayer: the claim took longer than the wait and the timeout together: %w", context.DeadlineExceeded))
		}
		a, rec, next, err := l.claimOnce(ctx, c, until, bound, timeout)
		switch {
		case err == nil && next == claimGrace:
			// A lapsed lease of a claim committed outside an atomic
			// execution got its grace, as Reserve grants it: the key is
			// held, in progress.
			return nil, rec, nil
		case err == nil && next == claimAgain:
			continue
		case err == nil:
			return a, rec, nil
		case lockWait(err, l.dialect):
			return nil, idem.Record{}, fmt.Errorf("%w: sqllayer: the key's claim is held by a transaction still open after the wait: %w", idem.ErrInFlight, err)
		}
		if retries >= l.retries || ctx.Err() != nil || (!l.conflict(err) && classify(err, l.dialect) != kindBroken) {
			return nil, idem.Record{}, l.wrap("reserve", err)
		}
		retries++
		if perr := pause(ctx, retries); perr != nil {
			return nil, idem.Record{}, l.wrap("reserve", err)
		}
	}
}

// What one claim attempt leaves to do.
const (
	claimDone  = iota // claimed, or found the key held
	claimAgain        // the row changed between statements: start over
	claimGrace        // granted a lapsed lease its grace: the key is held
)

// claimOnce begins a transaction and claims the key in it: an insert
// first, which waits for a concurrent claim's transaction; then, when the
// key is taken, a read in a new statement (which sees what that
// transaction committed) and a takeover of an expired record or a lapsed
// lease past its grace. A transaction that claims nothing is rolled back.
func (l *Layer) claimOnce(ctx context.Context, c *claim, until, bound time.Time, timeout time.Duration) (a *atomicTx, rec idem.Record, next int, err error) {
	wait := max(time.Until(until), 0)
	stmtCtx, step := ctx, timeout
	if !bound.IsZero() {
		var cancel context.CancelFunc
		stmtCtx, cancel = context.WithDeadline(ctx, bound)
		defer cancel()
		// Each step gets the timeout, and no more than the claim has left.
		step = max(min(timeout, time.Until(bound)), time.Millisecond)
	}
	// The connection is taken under the claim's bound (a pool whose
	// connections all wait for open transactions waits no longer); the
	// transaction lives in ctx.
	conn, err := l.connect(ctx, wait, step)
	if err != nil {
		return nil, idem.Record{}, 0, err
	}
	server := l.serverID(stmtCtx, conn, step)
	txCtx, end := context.WithCancelCause(ctx)
	tx, err := beginBounded(txCtx, end, conn, step)
	if err != nil {
		end(nil)
		l.disconnect(conn)
		return nil, idem.Record{}, 0, err
	}
	claimed, released := false, false
	defer func() {
		if !claimed && !released {
			rollback(tx, end, step)
			l.disconnect(conn)
		}
	}()
	q, err := l.on(tx)
	if err != nil {
		return nil, idem.Record{}, 0, err
	}
	token := idem.NewToken()
	var ok bool
	switch l.dialect {
	case dialect.PG:
		// At least a millisecond: 0 would turn the timeout off.
		// A statement without rows: the driver may send it in one round
		// trip (pgx sends a query whose text it has not prepared in two).
		// The claim's times are then the client's: nothing of an atomic
		// execution's lease rests on them (the open transaction is the
		// lease, and the completion sets the record's expiry from the
		// server's clock).
		ms := strconv.FormatInt(max(wait.Milliseconds(), 1), 10) + "ms"
		now := time.Now()
		var n int64
		n, err = affected(stmtCtx, q, l.st.atomicInsert, append(c.args(token, nil), ms)...)
		if err == nil && n == 1 {
			rec, ok = c.owner(token, now.Add(time.Duration(c.lease)*time.Microsecond), now.Add(time.Duration(c.expiry)*time.Microsecond), l.resolution), true
		}
	case dialect.MySQL:
		secs := max((wait+time.Second-1)/time.Second, 1)
		if _, err = q.ExecContext(stmtCtx, "SET SESSION innodb_lock_wait_timeout = "+strconv.FormatInt(int64(secs), 10)); err == nil {
			rec, ok, err = l.insertMySQL(stmtCtx, q, c, token)
		}
	default:
		rec, ok, err = l.insertReturning(stmtCtx, q, c, token)
	}
	if err != nil {
		return nil, idem.Record{}, 0, err
	}
	if !ok {
		r := l.newRow()
		found, err := l.readRow(stmtCtx, q, c.digest, &r)
		switch {
		case err != nil:
			return nil, idem.Record{}, 0, err
		case !found:
			return nil, idem.Record{}, claimAgain, nil // released between the statements
		case !r.takeable(c.fp):
			return nil, r.record(c.key, l.resolution), claimDone, nil
		case r.state == stateInProgress && !r.expired():
			// Grant the grace outside this transaction, which holds
			// nothing: the grace must commit to count.
			rollback(tx, end, step)
			l.disconnect(conn)
			released = true
			rec, ok, err = l.grace(stmtCtx, l.pool(), c, &r)
			if err != nil || !ok {
				return nil, idem.Record{}, claimAgain, err
			}
			l.observe(ctx, idem.Event{Kind: idem.EventGrace, Key: c.key})
			return nil, rec, claimGrace, nil
		}
		if rec, ok, err = l.takeover(stmtCtx, q, c, token, r.token); err != nil || !ok {
			return nil, idem.Record{}, claimAgain, err
		}
		rec.TookOver = inProgress(r.state)
		l.observe(ctx, idem.Event{Kind: idem.EventTakeover, Key: c.key})
	}
	claimed = true
	return &atomicTx{l: l, ctx: txCtx, end: end, conn: conn, server: server, tx: tx, q: q, key: c.key, claim: c, token: token, timeout: timeout}, rec, claimDone, nil
}
