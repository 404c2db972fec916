package sqllayer

// state reports whether a statement is in flight, how many calls are
// queued, how many went out in batches so far, and the most statements in
// flight at once so far.
func (b *batcher[In, Out]) state() (busy bool, queued int, batched int64, peak int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight > 0, len(b.queue), b.batched.Load(), b.peak
}

// batchStates returns the states of the batcher of claims and of the one
// of completions: on Postgres, where one batcher carries both, its state
// twice.
func batchStates(l *Layer) (s [2]struct {
	busy    bool
	queued  int
	batched int64
	peak    int
}) {
	var f [2]func() (bool, int, int64, int)
	switch {
	case l.writes != nil:
		f[0], f[1] = l.writes.state, l.writes.state
	case l.claims != nil:
		f[0], f[1] = l.claims.state, l.completions.state
	default:
		return s
	}
	for i := range s {
		s[i].busy, s[i].queued, s[i].batched, s[i].peak = f[i]()
	}
	return s
}

// BatchState reports, for claims and completions in turn, whether a
// statement is in flight, how many calls are queued behind it, and how many
// calls went out in batches so far. On Postgres, where claims and
// completions share one batcher, both report it.
func BatchState(l *Layer) (busy [2]bool, queued [2]int, batched [2]int64) {
	for i, s := range batchStates(l) {
		busy[i], queued[i], batched[i] = s.busy, s.queued, s.batched
	}
	return busy, queued, batched
}

// BatchPeak reports, for claims and completions in turn, the most
// statements that were in flight at once.
func BatchPeak(l *Layer) (peak [2]int) {
	for i, s := range batchStates(l) {
		peak[i] = s.peak
	}
	return peak
}
