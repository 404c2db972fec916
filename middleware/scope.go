package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
)

// The scope: whose key a request's key is. A stored response is someone's
// data (a payment, a balance), so a key is bound to the principal who sent
// it, and a configuration has to say how to find the principal — or that
// there is only one.

// errNoScope refuses a configuration that names no scope.
var errNoScope = errors.New("WithScope: give the scope of a request, the principal who sent it (for example middleware.ScopeFromContext(key) for the user or tenant your authentication middleware puts in the request's context), or WithSingleTenant() for a service with one principal; without either, one caller's stored response would reach any other caller who sends the same key")

// errScopeMissing is the cause of ProblemScopeMissing.
var errScopeMissing = errors.New("middleware: the scope function named no principal for this request")

// ScopeFromContext returns a scope function for WithScope that reads the
// principal from the request's context under key, where authentication
// middleware that runs before this one put it (context.WithValue). A
// string is the scope as it is; a fmt.Stringer gives its String(); an
// integer its decimal form. Anything else, or no value, names no
// principal, and the request is refused with ProblemScopeMissing. Put a
// stable id there (a user, account or tenant id), never the credential
// itself: a token rotates, and a retry after a refresh is the same
// operation.
func ScopeFromContext(key any) func(r *http.Request) string {
	return func(r *http.Request) string { return ScopeOf(r.Context().Value(key)) }
}

// ScopeOf returns the scope that a principal value stands for, as
// ScopeFromContext reads it: a string as it is, a fmt.Stringer's String(),
// an integer's decimal form, and "" (no principal) for anything else,
// nil included. Adapters use it for the values of their framework's own
// context.
func ScopeOf(v any) string {
	switch p := v.(type) {
	case string:
		return p
	case fmt.Stringer:
		if rv := reflect.ValueOf(p); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return "" // a typed nil: no principal
		}
		return p.String()
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(p)
	}
	return ""
}
