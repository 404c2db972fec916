package idem

// ReserveOrder is the order in which a layer's Reserve asks its store
// whether a key is taken and claims it. Every order makes the same
// decisions; they differ only in what a new key and a duplicate cost. The
// layers that have a choice take it as an option (redislayer and sqllayer
// WithReserveOrder); the default, OrderAdaptive, suits every workload.
type ReserveOrder uint8

const (
	// OrderAdaptive reads first while most keys Reserve sees already exist
	// and claims first while most are new, judged over the last few dozen
	// calls of the layer. The default: each workload pays one round trip
	// for its common case and two for the other.
	OrderAdaptive ReserveOrder = iota
	// OrderReadFirst: a duplicate costs one read (a Redis GET; an SQL
	// primary-key SELECT, which neither writes nor locks); a new key costs
	// that read and the claim.
	OrderReadFirst
	// OrderClaimFirst: a new key costs one claim (SET NX PX GET in Redis,
	// an INSERT in SQL); a duplicate costs the claim that finds the key
	// taken (in SQL the INSERT that does nothing, then the read — on MySQL
	// the INSERT waits for any transaction holding the row).
	OrderClaimFirst
	// OrderOneStatement (Postgres): every Reserve is one statement that
	// inserts or, when the key is taken, returns the existing row — one
	// round trip for new keys and duplicates alike, for a distant database,
	// at a higher server cost than a SELECT or a plain INSERT. Elsewhere it
	// is OrderClaimFirst.
	OrderOneStatement
)

// String returns the order's name.
func (o ReserveOrder) String() string {
	switch o {
	case OrderAdaptive:
		return "adaptive"
	case OrderReadFirst:
		return "read-first"
	case OrderClaimFirst:
		return "claim-first"
	case OrderOneStatement:
		return "one-statement"
	}
	return "unknown"
}
