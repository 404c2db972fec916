package sqllayer

import (
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

// Option configures a Layer. Options are applied by New after the defaults.
type Option func(*Layer)

// WithRecordsTable names the table of idempotency records. Default
// DefaultRecordsTable. A name is an unquoted identifier of letters, digits and
// underscores, optionally schema-qualified ("billing.idem_records"); an
// invalid one makes every method of the Layer return an error.
func WithRecordsTable(name string) Option { return func(l *Layer) { l.names.records = name } }

// WithEventsTable names the table of processed queue events used by InTx and
// MarkProcessed. Default DefaultEventsTable. Same rules as WithRecordsTable.
func WithEventsTable(name string) Option { return func(l *Layer) { l.names.events = name } }

// WithVersionsTable names the table of sync-job versions used by
// AdvanceVersion. Default DefaultVersionsTable. Same rules as
// WithRecordsTable.
func WithVersionsTable(name string) Option { return func(l *Layer) { l.names.versions = name } }

// WithMaxResult sets the largest result Complete and CompleteTx accept; a
// larger one gives idem.ErrTooLarge before anything is sent. Default
// DefaultMaxResult; n <= 0 means no limit of the layer's own (the server's
// limits still apply). On MySQL a result travels as a hexadecimal literal, so
// the server's max_allowed_packet must exceed twice this limit.
func WithMaxResult(n int) Option { return func(l *Layer) { l.maxResult = n } }

// WithRetries sets how many times a statement the database aborted to resolve
// a deadlock or a serialization conflict is run again, after a short random
// pause, before the call fails with ErrConflict. It applies to the layer's
// own statements and to the transactions of InTx and RunInTx. Default
// DefaultRetries; n < 0 counts as 0.
func WithRetries(n int) Option { return func(l *Layer) { l.retries = max(n, 0) } }

// WithClock sets the application clock. Default time.Now. The layer uses it
// only to measure durations it reports to the Observer: every lease and
// expiry is decided by the database's clock, so an application clock that is
// off changes no decision.
func WithClock(now func() time.Time) Option { return func(l *Layer) { l.now = now } }

// WithObserver sets an observer of the layer's own events: EventTakeover when
// Reserve takes over an expired claim, EventGrace when it gives a lapsed one
// its grace, EventTierError when the janitor fails. Default none: the layer
// reports to the observer of each call's context, which is how a
// tiered.Store hands down its own (tiered.WithObserver); set this only for
// a layer used without a Store.
func WithObserver(o idem.Observer) Option { return func(l *Layer) { l.obs = o } }

// WithReserveOrder sets the order of Reserve's statements. Default
// [idem.OrderAdaptive]: read first while most keys arrive already taken,
// insert first while most are new. SQLite always reads first: a conflicting
// INSERT would take its single write lock. [idem.OrderOneStatement] is
// Postgres's claim-or-read in one statement (see the package documentation).
func WithReserveOrder(o idem.ReserveOrder) Option { return func(l *Layer) { l.order = o } }

// WithEventRetention sets how long InTx and MarkProcessed keep a
// processed-event row. Default DefaultEventRetention. A redelivery after the
// row expired runs again, so this must outlast the broker's redelivery
// window. d <= 0 keeps the default.
func WithEventRetention(d time.Duration) Option {
	return func(l *Layer) {
		if d > 0 {
			l.eventTTL = d
		}
	}
}
