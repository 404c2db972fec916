package sqllayer

// BatchState reports, for claims and completions in turn, whether a
// statement is in flight, how many calls are queued behind it, and how many
// calls went out in batches so far.
func BatchState(l *Layer) (busy [2]bool, queued [2]int, batched [2]int64) {
	if l.claims == nil {
		return
	}
	l.claims.mu.Lock()
	busy[0], queued[0] = l.claims.inflight > 0, len(l.claims.queue)
	l.claims.mu.Unlock()
	l.completions.mu.Lock()
	busy[1], queued[1] = l.completions.inflight > 0, len(l.completions.queue)
	l.completions.mu.Unlock()
	return busy, queued, [2]int64{l.claims.batched.Load(), l.completions.batched.Load()}
}

// BatchPeak reports, for claims and completions in turn, the most
// statements that were in flight at once.
func BatchPeak(l *Layer) (peak [2]int) {
	if l.claims == nil {
		return
	}
	l.claims.mu.Lock()
	peak[0] = l.claims.peak
	l.claims.mu.Unlock()
	l.completions.mu.Lock()
	peak[1] = l.completions.peak
	l.completions.mu.Unlock()
	return peak
}
