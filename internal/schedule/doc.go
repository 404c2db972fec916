// Package schedule starts work when it falls due, with one timer for a
// whole queue of it rather than a timer per item.
//
// A [Queue] keeps its items in due order and arms its one timer for the
// earliest. Items join it mostly in the order they fall due and most leave
// before (the work they would start was not needed: a renewal of a lease
// whose work ended first), so an item costs a place in a list, where a
// timer started and stopped per item costs three allocations and the
// runtime's timer heap twice.
//
// The timer holds nothing of the queue's owner once the queue is stopped,
// so that a timer the runtime keeps until the time it was armed for does
// not keep a closed owner, and all it holds, alive.
package schedule
