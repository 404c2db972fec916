package client_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemkit/idem/client"
	"github.com/idemkit/idem/middleware"
)

// The client reads every problem the middleware writes, in both shapes it
// writes them (RFC 9457 and Stripe's), as the code the middleware gives
// it: the client's table of problem types is a copy (the client links no
// middleware), and this holds the two together.
func TestClientReadsEveryMiddlewareProblem(t *testing.T) {
	for _, typ := range []string{
		middleware.ProblemKeyMissing, middleware.ProblemKeyMalformed, middleware.ProblemBodyInvalid,
		middleware.ProblemBodyTooLarge, middleware.ProblemInFlight, middleware.ProblemMismatch,
		middleware.ProblemUnavailable, middleware.ProblemNotReplayable, middleware.ProblemScopeMissing,
		middleware.ProblemFailed,
	} {
		p := middleware.Problem{Type: typ, Title: "t", Status: http.StatusConflict, Detail: "d"}
		if p.Code() == "" {
			t.Fatalf("%s has no code in the middleware", typ)
		}
		for name, write := range map[string]middleware.ErrorWriter{"problem+json": middleware.WriteProblem, "stripe": middleware.WriteStripeError} {
			rec := httptest.NewRecorder()
			write(rec, httptest.NewRequest(http.MethodPost, "/", nil), p)
			var got *client.Problem
			if err := client.Check(rec.Result()); err != nil {
				got, _ = err.(*client.Problem)
			}
			if got == nil || got.Code != p.Code() {
				t.Errorf("%s written as %s: the client read %+v, want code %q", typ, name, got, p.Code())
			}
		}
	}
}
