package sqllayer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"

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
	session *session                // the pool's connection the transaction holds
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
//
// It is a *sql.Tx, whatever runs on it: sqlc's database/sql mode
// (queries.WithTx(tx)), sqlx (tx is what a *sqlx.Tx holds) or bun, whose
// queries take it through Conn (db.NewInsert().Conn(tx)…). A Store on a pgx
// pool hands its function a pgx.Tx instead (package idempgx's TxFrom).
func TxFrom(ctx context.Context) (tx *sql.Tx, ok bool) {
	a, ok := ctx.Value(atomicKey{}).(*atomicTx)
	if !ok || a == nil {
		return nil, false
	}
	return a.tx.Tx, true
}

// RawFrom calls f with the driver's connection beneath the transaction of
// the atomic execution ctx belongs to, as database/sql's Conn.Raw does: for
// the modules that hand the work a driver's own transaction type (package
// idempgx's TxFrom). The connection is the execution's until it ends; the
// Store alone commits and rolls back. Outside an atomic execution it
// returns an error wrapping idem.ErrConfig.
func RawFrom(ctx context.Context, f func(driverConn any) error) error {
	a, ok := ctx.Value(atomicKey{}).(*atomicTx)
	if !ok || a == nil {
		return fmt.Errorf("%w: sqllayer: not in an atomic execution: call RawFrom in the function a tiered.Store made WithAtomic runs", idem.ErrConfig)
	}
	return a.session.conn.Raw(f)
}

// RunAtomic runs one execution of key in a transaction of the layer's
// database; tiered.Store calls it when made WithAtomic (it is the
// tiered.AtomicLayer the Store needs). It begins the transaction and
// claims the key in it for fingerprint (lease and ttl as Reserve takes
// them), waiting at most wait for a concurrent claim whose transaction is
// still open: through lock_timeout on Postgres (set and put back in the
// claim's own statement), innodb_lock_wait_timeout on MySQL and MariaDB
// (whole seconds, at least one; MariaDB in the claim statement itself,
// MySQL for the session and put back after the claim). On SQLite, where
// one writer at a time holds the database and atomic executions run one
// after another, the claim reads the key first, outside any transaction,
// and waits for the writer for wait and timeout together (the busy
// timeout, the DSN's again once claimed). The work's own statements wait
// for their locks under the session's settings, never the claim's bound;
// they run with autocommit off on MySQL and MariaDB, and on SQLite under a
// commit hook that refuses any commit but the execution's, so that a
// transaction the database rolled back whole (a deadlock victim) never
// lets them commit on their own. Each statement of its own is bounded by
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
// ran out (on SQLite, unless an atomic execution of this process holds the
// key, idem.ErrUnavailable once the wait and the timeout ran out: the
// writer's lock does not say whose key it holds), the error of a failed
// claim otherwise. With claimed true it
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
			a.session.ended = rollback(a.tx, a.end, a.timeout) == nil
			l.disconnect(a.session)
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
		a.session.ended = rollback(a.tx, a.end, a.timeout) == nil
		l.disconnect(a.session)
		return rec, true, err
	}
	err = a.commit()
	a.session.ended = err == nil
	a.end(nil)
	l.disconnect(a.session)
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
