// Package guess guesses whether the next event will be of one kind, from
// the events before it: a saturating counter, as a processor's branch
// predictor keeps one per branch.
//
// The counter goes up by one for an event of the kind and down by one for
// any other, between 0 and a ceiling, and guesses the kind while it is in
// the upper half: it follows a workload that changes within a few dozen
// events and ignores the odd event that does not fit. Updates are plain
// loads and stores; racing updates lose a step now and then, which a guess
// can afford, and a steady workload writes no shared memory at all.
package guess
