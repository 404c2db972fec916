package redislayer

// ReserveOrder is the order in which Reserve asks Redis. Every order makes
// the same decisions; they differ in what a new key and a duplicate cost.
type ReserveOrder uint8

const (
	// Adaptive reads first while most keys Reserve sees already exist and
	// claims first while most are new, judged over the last few dozen calls
	// of this Layer. The default. Each workload then pays one round trip
	// for its common case and two for the other.
	Adaptive ReserveOrder = iota
	// ReadFirst: a duplicate costs one GET, Redis's cheapest read; a new key
	// costs that GET and the claim.
	ReadFirst
	// ClaimFirst: a new key costs one SET NX PX GET; a duplicate costs that
	// same command, which writes nothing but carries the claim to the
	// server and back through the write path.
	ClaimFirst
)

// String returns the order's name.
func (o ReserveOrder) String() string {
	switch o {
	case Adaptive:
		return "adaptive"
	case ReadFirst:
		return "read-first"
	case ClaimFirst:
		return "claim-first"
	}
	return "unknown"
}

// readFirst decides the order of one Reserve.
func (l *Layer) readFirst() bool {
	if l.order == Adaptive {
		return l.seen.Mostly()
	}
	return l.order == ReadFirst
}
