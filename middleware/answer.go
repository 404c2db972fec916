package middleware

import (
	"errors"
	"net/http"
	"strings"
)

// AnswerKind says how the middleware answered one request.
type AnswerKind uint8

const (
	// AnswerPassed: the request was passed to the handler untouched (it has
	// no key, or its method is not guarded). Status is 0: the middleware
	// does not see the handler's answer.
	AnswerPassed AnswerKind = iota + 1
	// AnswerExecuted: the handler ran for this request's key and its own
	// response was sent (Status: the handler's).
	AnswerExecuted
	// AnswerReplayed: the stored response of the key's execution was sent,
	// or the response of an execution this request shared (Status: the
	// stored one).
	AnswerReplayed
	// AnswerProblem: the middleware answered a problem of its own (Problem
	// names which; Status: the status it was given).
	AnswerProblem
)

// String returns the kind's snake_case name, suitable as a metric label.
func (k AnswerKind) String() string {
	switch k {
	case AnswerPassed:
		return "passed"
	case AnswerExecuted:
		return "executed"
	case AnswerReplayed:
		return "replayed"
	case AnswerProblem:
		return "problem"
	}
	return "unknown"
}

// Answer is what the middleware answered one request.
type Answer struct {
	Kind   AnswerKind
	Status int
	// Problem is, for AnswerProblem, the problem's snake_case name
	// ("key_missing", "key_malformed", "body_invalid", "body_too_large",
	// "in_flight", "mismatch", "unavailable", "not_replayable", "scope_missing", "failed"):
	// the last part of its Problem* type. It is "" for the other kinds.
	Problem string
}

// AnswerObserver hears how the middleware answered each request, once per
// request, after the answer was written (idemprom's Collector counts them).
// It is called on the request's goroutine: it must be fast and safe for
// concurrent use. r is the request as the middleware received it.
type AnswerObserver interface {
	ObserveAnswer(r *http.Request, a Answer)
}

// AnswerObserverFunc adapts a function to AnswerObserver.
type AnswerObserverFunc func(r *http.Request, a Answer)

// ObserveAnswer calls f(r, a).
func (f AnswerObserverFunc) ObserveAnswer(r *http.Request, a Answer) { f(r, a) }

// WithAnswerObserver sets who hears each answer. Default none. nil is an
// error (leave the option out for none).
func WithAnswerObserver(o AnswerObserver) Option {
	return func(c *config) error {
		if o == nil {
			return errors.New("WithAnswerObserver: give an observer, or leave the option out for none (got nil)")
		}
		c.answers = o
		return nil
	}
}

// answered tells the answer observer, if any.
func (h *Handler) answered(r *http.Request, kind AnswerKind, status int, k problemKind) {
	if h.c.answers == nil {
		return
	}
	a := Answer{Kind: kind, Status: status}
	if kind == AnswerProblem {
		a.Problem = problemNames[k]
	}
	h.c.answers.ObserveAnswer(r, a)
}

// problemNames are the snake_case names of the problems, from their types.
var problemNames = func() (names [len(problems)]string) {
	for i, p := range problems {
		name := strings.TrimPrefix(p.typ, problemBase+"Problem")
		var b strings.Builder
		for j, c := range name {
			if 'A' <= c && c <= 'Z' {
				if j > 0 {
					b.WriteByte('_')
				}
				c += 'a' - 'A'
			}
			b.WriteRune(c)
		}
		names[i] = b.String()
	}
	return names
}()
