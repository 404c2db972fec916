package idem

import "strconv"

// ReserveOrder is the order in which a layer's Reserve asks its store
// whether a key is taken and claims it. Every order makes the same
// decisions; they differ only in what a new key and a duplicate cost. The
// layers that have a choice take it as an option (redislayer and sqllayer
// WithReserveOrder); the default, OrderAdaptive, suits every workload. A
// layer may have orders of its own, numbered after OrderClaimFirst
// (sqllayer.OrderOneRoundTrip, for a distant Postgres).
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
)

// String returns the order's name: "adaptive", "read-first",
// "claim-first", or "order N" for an order of a layer's own.
func (o ReserveOrder) String() string {
	switch o {
	case OrderAdaptive:
		return "adaptive"
	case OrderReadFirst:
		return "read-first"
	case OrderClaimFirst:
		return "claim-first"
	}
	return "order " + strconv.Itoa(int(o))
}
