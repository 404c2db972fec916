package redislayer

import "github.com/idemkit/idem"

// readFirst decides the order of one Reserve.
func (l *Layer) readFirst() bool {
	if l.order == idem.OrderAdaptive {
		return l.seen.Mostly()
	}
	return l.order == idem.OrderReadFirst
}
