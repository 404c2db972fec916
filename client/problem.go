package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// The codes of idem's own answers, as Problem.Code holds them and as
// middleware.WriteStripeError writes them in error.code.
const (
	CodeKeyMissing    = "key_missing"    // 400: the server requires a key
	CodeKeyMalformed  = "key_malformed"  // 400: the server refused the key
	CodeBodyInvalid   = "body_invalid"   // 400: the body cannot be fingerprinted
	CodeBodyTooLarge  = "body_too_large" // 413
	CodeInFlight      = "in_flight"      // 409: retried, after Retry-After
	CodeMismatch      = "mismatch"       // 422: the key was used with another payload
	CodeUnavailable   = "unavailable"    // 503: retried, after Retry-After
	CodeNotReplayable = "not_replayable" // 409: executed, but its answer was not stored
	CodeScopeMissing  = "scope_missing"  // 401: the server found no caller to bind the key to
	CodeFailed        = "failed"         // 500
)

// ErrNotReplayable is wrapped by the Problem of CodeNotReplayable: the
// operation was executed, but its answer was streamed or too large to be
// stored, so no retry can receive it.
var ErrNotReplayable = errors.New("client: answer not replayable")

// problemTypes maps the fragment of the middleware's problem types
// (https://pkg.go.dev/github.com/idemkit/idem/middleware#ProblemInFlight)
// to codes.
var problemTypes = map[string]string{
	"ProblemKeyMissing":    CodeKeyMissing,
	"ProblemKeyMalformed":  CodeKeyMalformed,
	"ProblemBodyInvalid":   CodeBodyInvalid,
	"ProblemBodyTooLarge":  CodeBodyTooLarge,
	"ProblemInFlight":      CodeInFlight,
	"ProblemMismatch":      CodeMismatch,
	"ProblemUnavailable":   CodeUnavailable,
	"ProblemNotReplayable": CodeNotReplayable,
	"ProblemScopeMissing":  CodeScopeMissing,
	"ProblemFailed":        CodeFailed,
}

// Problem is one of idem's own answers, read from its body.
type Problem struct {
	// Code is one of the Code constants.
	Code string
	// Status is the answer's HTTP status.
	Status int
	// Detail is the server's explanation, possibly empty.
	Detail string
	// RetryAfter is the answer's Retry-After, 0 when it had none.
	RetryAfter time.Duration
}

// Error describes p.
func (p *Problem) Error() string {
	if p.Detail != "" {
		return fmt.Sprintf("client: %s (%d): %s", p.Code, p.Status, p.Detail)
	}
	return fmt.Sprintf("client: %s (%d)", p.Code, p.Status)
}

// Unwrap returns the sentinel of p's code: idem.ErrInFlight,
// idem.ErrMismatch, idem.ErrUnavailable or ErrNotReplayable; nil for the
// others.
func (p *Problem) Unwrap() error {
	switch p.Code {
	case CodeInFlight:
		return idem.ErrInFlight
	case CodeMismatch:
		return idem.ErrMismatch
	case CodeUnavailable:
		return idem.ErrUnavailable
	case CodeNotReplayable:
		return ErrNotReplayable
	}
	return nil
}

// maxProblem bounds the bytes of a body read to find a problem in it.
const maxProblem = 64 << 10

// Check returns the *Problem that resp carries when it is one of idem's
// own answers (application/problem+json from the middleware, or the
// Stripe-shaped body of middleware.WriteStripeError), and nil for every
// other answer, the handler's own errors included. It reads at most 64 KiB
// of the body and leaves resp.Body readable from its start.
func Check(resp *http.Response) error {
	if p := problemOf(resp); p != nil {
		return p
	}
	return nil
}

// problemOf reads resp's problem, or returns nil.
func problemOf(resp *http.Response) *Problem {
	if resp == nil || resp.StatusCode < 400 || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/problem+json" && mt != "application/json" {
		return nil
	}
	body := peek(resp, maxProblem)
	code, detail := "", ""
	if mt == "application/problem+json" {
		var pj struct {
			Type   string `json:"type"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(body, &pj) != nil {
			return nil
		}
		_, frag, _ := strings.Cut(pj.Type, "#")
		code, detail = problemTypes[frag], pj.Detail
	} else {
		var se struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				DocURL  string `json:"doc_url"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &se) != nil || !strings.Contains(se.Error.DocURL, "idemkit/idem") {
			return nil
		}
		code, detail = se.Error.Code, se.Error.Message
		if _, ok := codes[code]; !ok {
			code = ""
		}
	}
	if code == "" {
		return nil
	}
	ra, _ := retryAfter(resp.Header, time.Now())
	return &Problem{Code: code, Status: resp.StatusCode, Detail: detail, RetryAfter: ra}
}

var codes = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, c := range problemTypes {
		m[c] = struct{}{}
	}
	return m
}()

// peek reads up to n bytes of resp.Body and puts them back in front of the
// rest, so that the caller reads the whole body.
func peek(resp *http.Response, n int64) []byte {
	b, err := io.ReadAll(io.LimitReader(resp.Body, n))
	rest := resp.Body
	if err != nil {
		rest = errReader{err: err, c: rest}
	}
	resp.Body = &peeked{Reader: io.MultiReader(bytes.NewReader(b), rest), c: resp.Body}
	return b
}

type peeked struct {
	io.Reader
	c io.Closer
}

func (p *peeked) Close() error { return p.c.Close() }

type errReader struct {
	err error
	c   io.Closer
}

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
func (e errReader) Close() error             { return e.c.Close() }
