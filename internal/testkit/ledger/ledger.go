package ledger

import "sync"

// Ledger is safe for concurrent use.
type Ledger[T any] struct {
	mu      sync.Mutex // guards runs and answers
	runs    map[string]int
	answers map[string]T
}

// New returns an empty ledger.
func New[T any]() *Ledger[T] {
	return &Ledger[T]{runs: map[string]int{}, answers: map[string]T{}}
}

// Begin counts an execution of key and reports whether it is the first.
func (l *Ledger[T]) Begin(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[key]++
	return l.runs[key] == 1
}

// Answer keeps v as key's answer when first (Begin's result) says so.
func (l *Ledger[T]) Answer(key string, v T, first bool) {
	if !first {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers[key] = v
}

// Of returns how many times key ran, and its first execution's answer.
func (l *Ledger[T]) Of(key string) (runs int, answer T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[key], l.answers[key]
}

// Totals returns the executions of every key together, and how many keys
// have an answer.
func (l *Ledger[T]) Totals() (executions, answers int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.runs {
		executions += n
	}
	return executions, len(l.answers)
}
