package sqllayer

import "github.com/idemkit/idem"

// readFirst decides the order of one Reserve.
func (l *Layer) readFirst() bool {
	switch {
	case l.sqlite:
		// A conflicting INSERT would take SQLite's single write lock.
		return true
	case l.order == idem.OrderAdaptive:
		return l.seen.Mostly()
	}
	return l.order == idem.OrderReadFirst
}
