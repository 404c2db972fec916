package sqllayer

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/idemkit/idem/internal/lockwait"
)

// A claim outside an atomic execution waits for a lock on its key only
// while an atomic execution's claim holds it, uncommitted in its open
// transaction (a Store of the other mode on the same table). It waits no
// longer than the Store's wait and three quarters of its SQL timeout (see
// lockwait.Bound): then Reserve answers with an error wrapping
// idem.ErrInFlight, and the Store waits on as for an owner in progress,
// asking again, until the transaction commits (a replay) or rolls back
// (a claim) — instead of a statement cut off by its timeout, which could
// not tell whether it claimed. SQLite has one writer: its claims wait for
// the database under the DSN's busy timeout, as every statement does.

// pgLockBound is the lock_timeout of a Postgres claim made in ctx: "0"
// (none) when ctx bounds nothing, else at least a millisecond.
func pgLockBound(ctx context.Context) string {
	wait, ok := lockwait.Bound(ctx)
	if !ok {
		return "0"
	}
	return strconv.FormatInt(max(wait.Milliseconds(), 1), 10) + "ms"
}

// mysqlClaimSecs is how many whole seconds of lock wait have a claim
// statement of their own, cached (see mysqlClaim).
const mysqlClaimSecs = 64

// mysqlClaims caches MariaDB's bounded claim statements, by seconds.
type mysqlClaims struct {
	once  sync.Once
	stmts [mysqlClaimSecs]string
}

// mysqlClaim returns the claim statement for ctx: on MariaDB bounded by
// the whole seconds ctx leaves for a lock (0: no wait at all; see
// lockwait.Bound), in the statement itself (SET STATEMENT … FOR); on MySQL,
// and without a bound, the plain insert.
func (l *Layer) mysqlClaim(ctx context.Context) (string, error) {
	wait, ok := lockwait.Bound(ctx)
	if !ok {
		return l.st.insert, nil
	}
	maria, err := l.isMariaDB(ctx, l.db)
	if err != nil || !maria {
		return l.st.insert, err
	}
	secs := int64(wait / time.Second)
	if secs >= mysqlClaimSecs {
		return mysqlBounded(l.st.insert, secs), nil
	}
	l.mysqlBound.once.Do(func() {
		for i := range l.mysqlBound.stmts {
			l.mysqlBound.stmts[i] = mysqlBounded(l.st.insert, int64(i))
		}
	})
	return l.mysqlBound.stmts[secs], nil
}
