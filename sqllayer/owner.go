package sqllayer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Complete implements idem.Layer: one UPDATE guarded by the token, the
// in-progress state and the record's expiry. When it changes no row, a read
// tells a re-sent Complete of a record this token already completed (nil)
// from a lost lease (idem.ErrLeaseLost).
func (l *Layer) Complete(ctx context.Context, key idem.Key, token string, result []byte, ttl time.Duration) error {
	if err := l.checkComplete(ctx, key, result, ttl); err != nil {
		return err
	}
	return l.wrap("complete", l.completeKey(ctx, key, token, result, ttl))
}

// CompleteTx completes the record like Complete, inside the caller's
// transaction: the completion commits or rolls back with the handler's own
// writes, so a crash between the two can neither keep the writes without the
// result nor the result without the writes. The row stays locked until tx
// ends. A deadlock or serialization failure gives ErrConflict (run the
// transaction again); nothing is retried inside tx.
func (l *Layer) CompleteTx(ctx context.Context, tx Tx, key idem.Key, token string, result []byte, ttl time.Duration) error {
	if err := l.checkComplete(ctx, key, result, ttl); err != nil {
		return err
	}
	q, err := l.inTx(tx)
	if err != nil {
		return err
	}
	err = l.complete(ctx, q, key, token, result, ttl)
	if errors.Is(err, idem.ErrLeaseLost) {
		err = l.unseen(ctx, q, key, err)
	}
	return l.wrap("complete", txDone(err))
}

// unseen explains a completion in a caller's transaction that found no
// record of its token: when the transaction sees no live record of the key
// at all, while its execution still holds it, the transaction is most
// likely on another database than the tier's. It costs a read on this
// failure path only.
func (l *Layer) unseen(ctx context.Context, q querier, key idem.Key, lost error) error {
	d := key.Digest()
	var one int64
	found, err := queryOne(ctx, q, l.st.live, []any{d[:]}, &one)
	if err != nil || found {
		return lost
	}
	return fmt.Errorf("%w: sqllayer: the transaction sees no record of the key: is it a transaction on another database than the tier's? (%w)", idem.ErrConfig, lost)
}

func (l *Layer) checkComplete(ctx context.Context, key idem.Key, result []byte, ttl time.Duration) error {
	if err := l.check(ctx, key); err != nil {
		return err
	}
	if len(result) > idem.MaxResult {
		return fmt.Errorf("%w: %d bytes, limit idem.MaxResult (%d)", idem.ErrTooLarge, len(result), idem.MaxResult)
	}
	if ttl <= 0 {
		return fmt.Errorf("sqllayer: ttl must be positive (%v)", ttl)
	}
	return nil
}

func (l *Layer) complete(ctx context.Context, q querier, key idem.Key, token string, result []byte, ttl time.Duration) error {
	if result == nil {
		result = []byte{}
	}
	d := key.Digest()
	n, err := affected(ctx, q, l.st.complete, d[:], bin(token), result, micros(ttl))
	if err != nil || n == 1 {
		return err
	}
	state, stored, err := l.owned(ctx, q, d[:], token)
	switch {
	case err != nil:
		return err
	case state != idem.StateCompleted:
		return idem.ErrLeaseLost
	case !bytes.Equal(stored, result):
		// This token completed the key already, with other bytes: in the
		// same transaction, or in one that committed. The first
		// completion stands; a second with another result is a mistake
		// of the caller's.
		return errCompletedOtherwise
	}
	return nil // re-sent by the owner after success
}

// errCompletedOtherwise is a completion's answer when its token completed
// the key already with another result.
var errCompletedOtherwise = fmt.Errorf("%w: sqllayer: this execution completed the key already, with another result: complete a reservation once per execution, with one result (the first completion stands)", idem.ErrConfig)

// owned returns the state and result of the live record token holds, or
// 0.
func (l *Layer) owned(ctx context.Context, q querier, digest []byte, token string) (idem.State, []byte, error) {
	var state int64
	var result []byte
	found, err := queryOne(ctx, q, l.st.owned, []any{digest, bin(token)}, &state, &result)
	if err != nil || !found {
		return 0, nil, err
	}
	if state == stateGrace {
		return idem.StateInProgress, nil, nil
	}
	return idem.State(state), result, nil
}

// Release implements idem.Layer: a DELETE guarded by the token and the
// in-progress state. When it deletes nothing, a read tells a missing or
// expired record (nil) from one another token or a completion holds
// (idem.ErrLeaseLost).
func (l *Layer) Release(ctx context.Context, key idem.Key, token string) error {
	if err := l.check(ctx, key); err != nil {
		return err
	}
	d := key.Digest()
	err := l.retry(ctx, func() error {
		n, err := affected(ctx, l.pool(), l.st.release, d[:], bin(token))
		if err != nil || n == 1 {
			return err
		}
		var one int64
		found, err := queryOne(ctx, l.pool(), l.st.live, []any{d[:]}, &one)
		if err != nil || !found {
			return err
		}
		return idem.ErrLeaseLost
	})
	return l.wrap("release", err)
}

// Renew implements idem.Layer: an UPDATE guarded like Complete's that sets
// the lease to lease from the database's now and moves the expiry along if
// the lease and its grace (lease/4) would outlive it, so that work running
// past the retention keeps its grace.
func (l *Layer) Renew(ctx context.Context, key idem.Key, token string, lease time.Duration) error {
	if err := l.check(ctx, key); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("sqllayer: lease must be positive (%v)", lease)
	}
	d := key.Digest()
	us := micros(lease)
	err := l.retry(ctx, func() error {
		n, err := affected(ctx, l.pool(), l.st.renew, d[:], bin(token), us, us+graceOf(us))
		if err != nil || n == 1 {
			return err
		}
		// MySQL counts only changed rows: a renewal within the same
		// microsecond changes nothing and still holds the lease.
		state, _, err := l.owned(ctx, l.pool(), d[:], token)
		if err != nil || state == idem.StateInProgress {
			return err
		}
		return idem.ErrLeaseLost
	})
	return l.wrap("renew", err)
}

// Get implements idem.Layer: a primary-key read of the live record.
func (l *Layer) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if err := l.check(ctx, key); err != nil {
		return idem.Record{}, err
	}
	d := key.Digest()
	r := l.newRow()
	var found bool
	err := l.retry(ctx, func() (err error) {
		found, err = queryOne(ctx, l.pool(), l.st.get, []any{d[:]},
			&r.fingerprint, &r.state, &r.result, &r.leaseUntil, &r.expiresAt, &r.left)
		return err
	})
	if err != nil {
		return idem.Record{}, l.wrap("get", err)
	}
	if !found {
		return idem.Record{}, idem.ErrNotFound
	}
	return r.record(key, l.resolution), nil
}
