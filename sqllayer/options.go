package sqllayer

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Defaults of a Layer.
const (
	// DefaultRecordsTable is the table of idempotency records.
	DefaultRecordsTable = "idempotency_records"
	// DefaultEventsTable is the table of processed queue events.
	DefaultEventsTable = "processed_events"
	// DefaultVersionsTable is the table of sync-job versions.
	DefaultVersionsTable = "sync_versions"
	// DefaultMaxResult is the largest result Complete accepts: 4 MiB.
	DefaultMaxResult = 4 << 20
	// DefaultRetries is how many times a statement that lost a deadlock or a
	// serialization conflict is run again.
	DefaultRetries = 3
	// DefaultEventRetention is how long a processed-event row is kept: a
	// redelivery within it is a duplicate, one after it runs again.
	DefaultEventRetention = 7 * 24 * time.Hour
)

// Option configures a Layer. Options are applied by New after the defaults;
// an option given nonsense makes New fail.
type Option func(*Layer) error

// WithRecordsTable names the table of idempotency records. Default
// DefaultRecordsTable. A name is an unquoted identifier of letters, digits and
// underscores, optionally schema-qualified ("billing.idem_records"; not on
// SQLite); any other name, or a name another table has, is an error from
// New.
func WithRecordsTable(name string) Option {
	return func(l *Layer) error { l.names.records = name; return nil }
}

// WithEventsTable names the table of processed queue events used by InTx and
// MarkProcessed. Default DefaultEventsTable. Same rules as WithRecordsTable.
func WithEventsTable(name string) Option {
	return func(l *Layer) error { l.names.events = name; return nil }
}

// WithVersionsTable names the table of sync-job versions used by
// AdvanceVersion. Default DefaultVersionsTable. Same rules as
// WithRecordsTable.
func WithVersionsTable(name string) Option {
	return func(l *Layer) error { l.names.versions = name; return nil }
}

// WithMaxResult sets the largest result Complete and CompleteTx accept, in
// bytes; a larger one gives idem.ErrTooLarge before anything is sent.
// Default DefaultMaxResult (4 MiB). 0 means no limit of the layer's own (the
// server's limits still apply); a negative n is an error. On MySQL a result
// travels as a hexadecimal literal, so the server's max_allowed_packet must
// exceed twice this limit.
func WithMaxResult(n int) Option {
	return func(l *Layer) error {
		if n < 0 {
			return fmt.Errorf("WithMaxResult(%d): negative (0 means no limit)", n)
		}
		l.maxResult = n
		return nil
	}
}

// WithRetries sets how many times a statement the database aborted to resolve
// a deadlock or a serialization conflict is run again, after a short random
// pause, before the call fails with ErrConflict. It applies to the layer's
// own statements and to the transactions of InTx and RunInTx. Default
// DefaultRetries (3). 0 means no retries: the first conflict is the
// caller's. A negative n is an error.
func WithRetries(n int) Option {
	return func(l *Layer) error {
		if n < 0 {
			return fmt.Errorf("WithRetries(%d): negative (0 means no retries)", n)
		}
		l.retries = n
		return nil
	}
}

// WithClock sets the application clock. Default time.Now; nil is an error.
// The layer uses it only to measure durations it reports to the Observer:
// every lease and expiry is decided by the database's clock, so an
// application clock that is off changes no decision.
func WithClock(now func() time.Time) Option {
	return func(l *Layer) error {
		if now == nil {
			return errors.New("WithClock(nil): a layer needs a clock")
		}
		l.now = now
		return nil
	}
}

// WithObserver sets an observer of the layer's own events: EventTakeover when
// Reserve takes over an expired claim, EventGrace when it gives a lapsed one
// its grace, EventTierError when the janitor fails. Default none, and nil is
// none: the layer reports to the observer of each call's context, which is
// how a tiered.Store hands down its own (tiered.WithObserver); set this only
// for a layer used without a Store.
func WithObserver(o idem.Observer) Option {
	return func(l *Layer) error { l.obs = o; return nil }
}

// WithReserveOrder sets the order of Reserve's statements. Default
// [idem.OrderAdaptive]: read first while most keys arrive already taken,
// insert first while most are new. SQLite always reads first: a conflicting
// INSERT would take its single write lock. [idem.OrderOneStatement] is
// Postgres's claim-or-read in one statement (see the package documentation).
// A value that is none of the idem.Order constants is an error.
func WithReserveOrder(o idem.ReserveOrder) Option {
	return func(l *Layer) error {
		if o > idem.OrderOneStatement {
			return fmt.Errorf("WithReserveOrder(%d): not an idem.ReserveOrder", o)
		}
		l.order = o
		return nil
	}
}

// WithEventRetention sets how long InTx and MarkProcessed keep a
// processed-event row. Default DefaultEventRetention (7 days). A
// redelivery after the row expired runs again, so this must outlast the
// broker's redelivery window. It cannot be zero: 0 or a negative d is an
// error.
func WithEventRetention(d time.Duration) Option {
	return func(l *Layer) error {
		if d <= 0 {
			return fmt.Errorf("WithEventRetention(%v): must be positive", d)
		}
		l.eventTTL = d
		return nil
	}
}
