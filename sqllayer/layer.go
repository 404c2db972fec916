package sqllayer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/mix"
	"github.com/idemkit/idem/internal/option"
)

var _ idem.Layer = (*Layer)(nil)

// maxFingerprint is the longest fingerprint a record stores: the MySQL
// column is VARBINARY(idem.MaxFingerprint).
const maxFingerprint = idem.MaxFingerprint

// maxID is the longest consumer, event ID, source or external ID (the MySQL
// columns are VARBINARY(255)).
const maxID = 255

// Layer is the SQL tier of idem: an idem.Layer over a *bun.DB, plus the
// processed-event (InTx, MarkProcessed), in-transaction completion
// (CompleteTx), sync-version (AdvanceVersion) and sweeping (DeleteExpired,
// which package janitor runs) APIs. It is safe for concurrent use and holds no resources of
// its own: closing the *bun.DB is the caller's business.
type Layer struct {
	db      *bun.DB
	q       querier // the pool's, for the layer's own statements
	dialect dialect.Name
	sqlite  bool
	native  bool // statements go to the driver beneath bun, with $N arguments
	slices  bool // Postgres: the driver binds Go slices as arrays (pgx)
	order   idem.ReserveOrder
	seen    mix.Existing // the share of Reserve calls that found their key taken
	st      stmts
	schema  []string
	// resolution is the database clock's: a microsecond, a millisecond on
	// SQLite. ExpiresIn is rounded down by it.
	resolution time.Duration

	names    names
	retries  int
	eventTTL time.Duration
	audit    string // the Admin's audit table

	// batchSize is the most calls one batched statement carries; 0: off.
	batchSize   int
	bst         batchStmts
	claims      *batcher[*claim, claimOut]         // nil when batching is off, and on Postgres
	completions *batcher[*completion, completeOut] // nil when batching is off, and on Postgres
	writes      *batcher[*writeOp, writeOut]       // Postgres: claims and completions together; nil when off

	// atomics holds the atomic executions running now, by token (see
	// RunAtomic), so that CompleteReservation can refuse theirs.
	atomics sync.Map
	// busy is the busy timeout of the SQLite DSN, in milliseconds, as an
	// atomic execution's connection had it (see connect).
	busy atomic.Int64
	// maria is what the MySQL server is, asked once: 0 not yet known, 1
	// MariaDB, 2 MySQL (see isMariaDB).
	maria atomic.Int32
	// galera is whether the MariaDB server is a Galera node, asked once:
	// 0 not yet known, 1 yes, 2 no (see isGalera).
	galera atomic.Int32
	// file is the SQLite database's file, a string once known ("" in
	// memory; see sqliteFile).
	file atomic.Value
	// mysqlBound holds MariaDB's claim statements bounded by each whole
	// second of lock wait (see mysqlClaim).
	mysqlBound mysqlClaims
	// servers holds the server's session id of the pool's connections, by
	// driver connection, for the watch of atomic executions (see
	// serverID); serverCount counts its entries.
	servers     sync.Map
	serverCount atomic.Int64
}

// New returns a Layer over db, whose dialect (pgdialect, mysqldialect or
// sqlitedialect) chooses the SQL, configured by opts over the defaults. It
// does no I/O: call Init to create the tables, or apply the DDL yourself. A
// nil db, an unsupported dialect and options given nonsense (an invalid
// table name, a negative limit…) make New fail with one error that names
// each fault and wraps idem.ErrConfig.
func New(db *bun.DB, opts ...Option) (*Layer, error) {
	c := defaults()
	errs := option.Apply(&c, opts)
	l := &Layer{db: db, names: c.names, retries: c.retries, order: c.order, eventTTL: c.eventTTL, batchSize: c.batchSize, audit: c.audit}
	var st stmts
	if db == nil {
		errs = append(errs, errors.New("New: give a *bun.DB (got nil)"))
	} else {
		l.dialect = db.Dialect().Name()
		switch l.dialect {
		case dialect.PG:
			st, l.native, l.resolution = pgStmts, true, time.Microsecond
			l.slices = bindsSlices(db.DB)
		case dialect.SQLite:
			st, l.native, l.sqlite, l.resolution = sqliteStmts, true, true, time.Millisecond
		case dialect.MySQL:
			// bun formats MySQL arguments into the text, which the server
			// runs in one round trip; arguments passed to
			// go-sql-driver/mysql would cost a prepare, an execute and a
			// close unless the DSN sets interpolateParams.
			st, l.resolution = mysqlStmts, time.Microsecond
		default:
			errs = append(errs, fmt.Errorf("New: give a *bun.DB of dialect pg, mysql or sqlite (got %s)", l.dialect))
		}
	}
	errs = append(errs, l.names.validate(l.sqlite), l.validateAudit())
	if err := option.Refuse("sqllayer", errs...); err != nil {
		return nil, err
	}
	l.st = st.build(l.names, l.native)
	if l.native {
		l.q = direct{db.DB}
	} else {
		l.q = direct{db}
	}
	l.bst = newBatchStmts(l.dialect, l.names, l.native)
	switch {
	case l.batchSize > 1 && l.dialect == dialect.PG:
		l.writes = &batcher[*writeOp, writeOut]{max: l.batchSize, slots: batchSlots, run: l.writeMany, orphan: l.orphanWrite,
			weight: (*writeOp).weight}
	case l.batchSize > 1:
		l.claims = &batcher[*claim, claimOut]{max: l.batchSize, slots: batchSlots, run: l.reserveMany, orphan: l.releaseOrphan,
			weight: func(*claim) int { return 0 }}
		l.completions = &batcher[*completion, completeOut]{max: l.batchSize, slots: batchSlots, run: l.completeMany,
			weight: func(c *completion) int { return len(c.result) }}
	}
	var err error
	if l.schema, err = schema(l.dialect, l.names); err != nil {
		return nil, option.Refuse("sqllayer", err)
	}
	return l, nil
}

// check validates what every record method receives.
func (l *Layer) check(ctx context.Context, key idem.Key) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	return ctx.Err()
}

// checkID validates a consumer, event ID, source or external ID: stored as
// text on Postgres, it must be UTF-8 without NUL, and at most maxID bytes.
func checkID(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", idem.ErrInvalidKey, what)
	case len(s) > maxID:
		return fmt.Errorf("%w: %s of %d bytes, limit %d", idem.ErrInvalidKey, what, len(s), maxID)
	case !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s is not UTF-8 text without NUL", idem.ErrInvalidKey, what)
	}
	return nil
}

// micros converts a duration to whole microseconds, rounding up so that a
// positive duration never becomes zero.
func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

// bin returns s as non-nil bytes: bun writes a nil slice as NULL.
func bin(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// label makes a key's scope or client key storable as text: valid UTF-8
// without NUL. Labels are for operators; the digest is the key.
func label(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// text returns a label argument: bytes on MySQL, where bun would rewrite
// some strings, a string elsewhere.
func (l *Layer) text(s string) any {
	if l.native {
		return s
	}
	return bin(s)
}

// id returns a consumer, event or source ID argument in the column's type:
// bytes on MySQL (VARBINARY), text elsewhere.
func (l *Layer) id(s string) any { return l.text(s) }

// retry runs fn, and runs it again, up to the layer's retry count, while it
// fails with a deadlock or a serialization conflict, or on a connection that
// broke (the pool then dials a new one). Only the layer's own statements,
// each a whole transaction, are retried, and each is safe to run again after
// an answer was lost: a claim that committed unseen reads as in progress
// until its lease lapses; a completion, release or renewal that committed
// unseen is recognised by its token.
func (l *Layer) retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		err = fn()
		if err == nil || attempt >= l.retries || ctx.Err() != nil {
			return err
		}
		if !l.conflict(err) && classify(err, l.dialect) != kindBroken {
			return err
		}
		if perr := pause(ctx, attempt+1); perr != nil {
			return err
		}
	}
}

// conflict reports a deadlock or serialization failure, which running the
// whole transaction again may get through.
func (l *Layer) conflict(err error) bool {
	return errors.Is(err, ErrConflict) || classify(err, l.dialect) == kindConflict
}

// pause waits a short random time that grows with the attempt, or until ctx
// ends.
func pause(ctx context.Context, attempt int) error {
	d := time.Duration(attempt) * (time.Millisecond + rand.N(4*time.Millisecond))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// observe reports e to the observer of the call's context: the Store's,
// handed down with each call it makes, or the one a caller of the layer
// itself puts there.
func (l *Layer) observe(ctx context.Context, e idem.Event) {
	if o := idem.ObserverFrom(ctx); o != nil {
		e.Tier = idem.TierSQL
		o.Observe(ctx, e)
	}
}
