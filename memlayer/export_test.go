package memlayer

// Sweep runs the layer's lazy sweep over every entry of every shard now,
// as enough successive sweeps during Reserve calls would.
func Sweep(l *Layer) {
	now := l.clock()
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for range (s.used + sweepVisit - 1) / sweepVisit {
			s.sweep(now)
		}
		s.mu.Unlock()
	}
}
