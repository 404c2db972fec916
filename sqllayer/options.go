package sqllayer

import (
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
	// DefaultRetries is how many times a statement that lost a deadlock or a
	// serialization conflict is run again.
	DefaultRetries = 3
	// DefaultEventRetention is how long a processed-event row is kept: a
	// redelivery within it is a duplicate, one after it runs again.
	DefaultEventRetention = 7 * 24 * time.Hour
)

// OrderOneRoundTrip is an order of Reserve's statements that only this
// layer has, for a database far from the application: every Reserve costs
// one round trip, for a new key and a duplicate alike, at a higher server
// cost than the other orders (on a 2-core machine a duplicate cost about
// twice a SELECT in the server's processor time). It is Postgres's: one
// statement that inserts or, when the key is taken, returns the existing
// row (see the package documentation). On MySQL and SQLite it is
// idem.OrderClaimFirst. Give it to WithReserveOrder.
const OrderOneRoundTrip = idem.OrderClaimFirst + 1

// Option configures a Layer. Options apply in order over the defaults; an
// option given nonsense makes New fail.
//
// The layer has no timeout of its own, nor a result limit of its own: each
// call lasts as long as its caller's context lets it (a tiered.Store bounds
// each call it makes with its WithTimeouts), and a result over
// idem.MaxResult is refused, as by every layer. Nor does it read the
// application's clock: leases and expiries are the database's.
type Option func(*config) error

type config struct {
	names     names
	retries   int
	order     idem.ReserveOrder
	eventTTL  time.Duration
	batchSize int
	audit     string // WithAuditTable
}

func defaults() config {
	return config{
		names:    names{DefaultRecordsTable, DefaultEventsTable, DefaultVersionsTable},
		retries:  DefaultRetries,
		eventTTL: DefaultEventRetention,
		audit:    DefaultAuditTable,
	}
}

// WithRecordsTable names the table of idempotency records. Default
// DefaultRecordsTable. A name is an unquoted identifier of letters, digits and
// underscores, optionally schema-qualified ("billing.idem_records"; not on
// SQLite); any other name, or a name another table has, is an error from
// New.
func WithRecordsTable(name string) Option {
	return func(c *config) error { c.names.records = name; return nil }
}

// WithEventsTable names the table of processed queue events used by InTx and
// MarkProcessed. Default DefaultEventsTable. Same rules as WithRecordsTable.
func WithEventsTable(name string) Option {
	return func(c *config) error { c.names.events = name; return nil }
}

// WithVersionsTable names the table of sync-job versions used by
// AdvanceVersion. Default DefaultVersionsTable. Same rules as
// WithRecordsTable.
func WithVersionsTable(name string) Option {
	return func(c *config) error { c.names.versions = name; return nil }
}

// WithRetries sets how many times a statement the database aborted to resolve
// a deadlock or a serialization conflict is run again, after a short random
// pause, before the call fails with ErrConflict. It applies to the layer's
// own statements and to the transactions of InTx and RunInTx. Default
// DefaultRetries (3). 0 means no retries: the first conflict is the
// caller's. A negative n is an error.
func WithRetries(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("WithRetries: give 0 or more retries, 0 for none (got %d)", n)
		}
		c.retries = n
		return nil
	}
}

// WithReserveOrder sets the order of Reserve's statements. Default
// [idem.OrderAdaptive]: read first while most keys arrive already taken,
// insert first while most are new. SQLite always reads first: a conflicting
// INSERT would take its single write lock. [OrderOneRoundTrip] is this
// layer's own, for a distant Postgres. A value that is none of the
// idem.Order constants nor OrderOneRoundTrip is an error.
func WithReserveOrder(o idem.ReserveOrder) Option {
	return func(c *config) error {
		if o > OrderOneRoundTrip {
			return fmt.Errorf("WithReserveOrder: give idem.OrderAdaptive, idem.OrderReadFirst, idem.OrderClaimFirst or sqllayer.OrderOneRoundTrip (got %d)", o)
		}
		c.order = o
		return nil
	}
}

// WithEventRetention sets how long InTx and MarkProcessed keep a
// processed-event row. Default DefaultEventRetention (7 days). A
// redelivery after the row expired runs again, so this must outlast the
// broker's redelivery window. It cannot be zero: 0 or a negative d is an
// error.
func WithEventRetention(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithEventRetention: give a positive retention, longer than the broker's redelivery window (got %v)", d)
		}
		c.eventTTL = d
		return nil
	}
}
