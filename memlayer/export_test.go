package memlayer

// Sweep runs the layer's lazy sweep over every entry now, as enough
// successive sweeps during Reserve calls would.
func Sweep(l *Layer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	for range (l.used + sweepVisit - 1) / sweepVisit {
		l.sweep(now)
	}
}
