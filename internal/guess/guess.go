package guess

import "sync/atomic"

// Counter guesses whether the next event will be of a kind: a saturating
// count of the recent events, up by one for an event of the kind, down by
// one for any other. It is safe for concurrent use.
type Counter struct{ n atomic.Int32 }

const (
	ceiling = 32
	half    = ceiling / 2
)

// New returns a Counter on the edge: it guesses likely as given, and one
// event of the other side turns its guess.
func New(likely bool) *Counter {
	g := &Counter{}
	if likely {
		g.n.Store(half)
	} else {
		g.n.Store(half - 1)
	}
	return g
}

// Likely reports whether the next event is probably of the kind: more of
// the recent events were than were not.
func (g *Counter) Likely() bool { return g.n.Load() >= half }

// Learn records one event, of the kind or not.
func (g *Counter) Learn(ofKind bool) {
	n := g.n.Load()
	switch {
	case ofKind && n < ceiling:
		g.n.Store(n + 1)
	case !ofKind && n > 0:
		g.n.Store(n - 1)
	}
}
