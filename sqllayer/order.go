package sqllayer

// ReserveOrder is the order in which Reserve sends its statements. Every
// order makes the same decisions; they differ in what a new key and a
// duplicate cost.
type ReserveOrder uint8

const (
	// Adaptive reads first while most keys Reserve sees already exist and
	// inserts first while most are new, judged over the last few dozen
	// calls of this Layer. The default. Each workload then pays one
	// statement for its common case and two for the other.
	Adaptive ReserveOrder = iota
	// ReadFirst: a duplicate costs one primary-key SELECT, which neither
	// writes nor locks; a new key costs that read and the INSERT.
	ReadFirst
	// InsertFirst: a new key costs one INSERT; a duplicate costs the INSERT
	// that does nothing (on MySQL it waits for any transaction holding the
	// row) and the read.
	InsertFirst
	// OneStatement (Postgres): every Reserve is one statement that inserts
	// or, when the key is taken, returns the existing row. One round trip
	// for new keys and duplicates alike, for a distant database, at a higher
	// server cost than a SELECT or a plain INSERT. Elsewhere it is
	// InsertFirst.
	OneStatement
)

// String returns the order's name.
func (o ReserveOrder) String() string {
	switch o {
	case Adaptive:
		return "adaptive"
	case ReadFirst:
		return "read-first"
	case InsertFirst:
		return "insert-first"
	case OneStatement:
		return "one-statement"
	}
	return "unknown"
}

// readFirst decides the order of one Reserve.
func (l *Layer) readFirst() bool {
	switch {
	case l.sqlite:
		// A conflicting INSERT would take SQLite's single write lock.
		return true
	case l.order == Adaptive:
		return l.seen.Mostly()
	}
	return l.order == ReadFirst
}
