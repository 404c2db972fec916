package reliability_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/middleware"
)

// httpRig is an HTTP service instance: a node's Store behind the
// middleware, in front of a handler that counts its runs.
type httpRig struct {
	node *node
	srv  *httptest.Server
	runs *atomic.Int64
}

const bodyLimit = 1 << 10

// newHTTPRig serves a handler that answers 201 with the tenant and the run
// number, guarded by the middleware with a 1 KiB body limit and the
// X-Tenant header as scope. runs counts the handler's runs across rigs
// that share it.
func newHTTPRig(t *testing.T, b *backend, runs *atomic.Int64) *httpRig {
	t.Helper()
	n := b.node(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		run := runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"tenant":%q,"run":%d,"body":%q}`, r.Header.Get("X-Tenant"), run, body)
	})
	mw := must.Get(middleware.New(n.Store, middleware.WithBodyLimit(bodyLimit),
		middleware.WithScope(tenantOf)))(t)
	srv := httptest.NewServer(mw(h))
	t.Cleanup(srv.Close)
	return &httpRig{node: n, srv: srv, runs: runs}
}

// tenantOf is the rig's scope: the X-Tenant header, and one tenant for
// the requests that name none.
func tenantOf(r *http.Request) string {
	if t := r.Header.Get("X-Tenant"); t != "" {
		return t
	}
	return "no-tenant"
}

// raw sends req, bytes as they go on the wire, and returns the status and
// the body of the answer.
func (r *httpRig) raw(t *testing.T, req string) (int, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", r.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", req, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// post builds a raw POST with the given extra header lines and body.
func post(headers, body string) string {
	return "POST /charges HTTP/1.1\r\nHost: idem.test\r\nConnection: close\r\nContent-Type: application/json\r\n" +
		headers + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// TestHTTPRejectsBadRequestsBeforeAnyClaim sends what broken or hostile
// clients send: malformed keys, bodies over the limit, broken JSON, and
// CR, LF or NUL bytes inside header lines (written raw on a TCP
// connection, since no client library would). Each gets its documented 4xx
// — the middleware's problem+json where the request reaches it, the HTTP
// server's own 400 where it does not — and none takes a claim: the handler
// does not run, the SQL table and the Redis prefix stay empty.
func TestHTTPRejectsBadRequestsBeforeAnyClaim(t *testing.T) {
	const good = `{"amount":4200}`
	cases := []struct {
		name    string
		req     string
		status  int
		problem string // "" when the HTTP server answers before the middleware
	}{
		{"EmptyKey", post("Idempotency-Key: \r\n", good), 400, middleware.ProblemKeyMalformed},
		{"KeyOf256Bytes", post("Idempotency-Key: "+strings.Repeat("k", 256)+"\r\n", good), 400, middleware.ProblemKeyMalformed},
		{"TwoKeyLines", post("Idempotency-Key: a\r\nIdempotency-Key: b\r\n", good), 400, middleware.ProblemKeyMalformed},
		{"CommaInBareKey", post("Idempotency-Key: a,b\r\n", good), 400, middleware.ProblemKeyMalformed},
		{"NonASCIIKey", post("Idempotency-Key: caf\xc3\xa9\r\n", good), 400, middleware.ProblemKeyMalformed},
		{"UnterminatedQuotedKey", post("Idempotency-Key: \"abc\r\n", good), 400, middleware.ProblemKeyMalformed},
		{"DataAfterQuotedKey", post("Idempotency-Key: \"abc\";x\r\n", good), 400, middleware.ProblemKeyMalformed},
		{"BodyOverLimitByLength", post("Idempotency-Key: big-1\r\n", `{"pad":"`+strings.Repeat("x", bodyLimit)+`"}`), 413, middleware.ProblemBodyTooLarge},
		{"BodyOverLimitChunked", "POST /charges HTTP/1.1\r\nHost: idem.test\r\nConnection: close\r\nContent-Type: application/json\r\nIdempotency-Key: big-2\r\nTransfer-Encoding: chunked\r\n\r\n" +
			chunked(`{"pad":"`+strings.Repeat("x", 2*bodyLimit)+`"}`), 413, middleware.ProblemBodyTooLarge},
		{"BrokenJSON", post("Idempotency-Key: json-1\r\n", `{"amount":`), 400, middleware.ProblemBodyInvalid},
		{"DuplicateJSONMember", post("Idempotency-Key: json-2\r\n", `{"amount":1,"amount":2}`), 400, middleware.ProblemBodyInvalid},
		{"CRInKey", post("Idempotency-Key: ab\rc\r\n", good), 400, ""},
		{"NULInKey", post("Idempotency-Key: ab\x00c\r\n", good), 400, ""},
		{"ControlByteInKey", post("Idempotency-Key: ab\x01c\r\n", good), 400, ""},
	}
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		var runs atomic.Int64
		rig := newHTTPRig(t, b, &runs)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				status, body := rig.raw(t, tc.req)
				if status != tc.status {
					t.Fatalf("status %d (%s), want %d", status, body, tc.status)
				}
				if tc.problem != "" {
					var p struct{ Type string }
					if err := json.Unmarshal(body, &p); err != nil || p.Type != tc.problem {
						t.Fatalf("problem %s, want type %s", body, tc.problem)
					}
				}
				if n := runs.Load(); n != 0 {
					t.Fatalf("the handler ran %d times", n)
				}
				if n := b.sqlCount(t, ""); n != 0 {
					t.Fatalf("%d rows in the records table", n)
				}
				if n := b.redisKeys(t); n != 0 {
					t.Fatalf("%d Redis keys under the prefix", n)
				}
			})
		}
		// The control: a good request is claimed and stored where the checks
		// above looked.
		status, body := rig.raw(t, post("Idempotency-Key: good-1\r\n", good))
		if status != http.StatusCreated || runs.Load() != 1 || b.sqlCount(t, "") != 1 || b.redisKeys(t) == 0 {
			t.Fatalf("control request: %d %s, runs %d, rows %d, redis keys %d", status, body, runs.Load(), b.sqlCount(t, ""), b.redisKeys(t))
		}
		status2, body2 := rig.raw(t, post("Idempotency-Key: \"good-1\"\r\n", good))
		if status2 != status || string(body2) != string(body) || runs.Load() != 1 {
			t.Fatalf("quoted form of the same key: %d %s, runs %d; want the replay", status2, body2, runs.Load())
		}

		// What the HTTP server itself rewrites reaches the middleware as an
		// ordinary key: a bare LF ends the header line (the rest becomes a
		// header of its own) and a folded line is joined with a space. Such
		// a request is the request for that key, replayed as such.
		for _, re := range []struct{ name, sent, means string }{
			{"BareLFEndsTheKeyLine", "Idempotency-Key: lf-1\nX-Injected: 1\r\n", "Idempotency-Key: lf-1\r\n"},
			{"FoldedLineIsJoined", "Idempotency-Key: fold\r\n 1\r\n", "Idempotency-Key: fold 1\r\n"},
		} {
			before := runs.Load()
			st1, b1 := rig.raw(t, post(re.sent, good))
			st2, b2 := rig.raw(t, post(re.means, good))
			if st1 != http.StatusCreated || st2 != st1 || string(b2) != string(b1) || runs.Load() != before+1 {
				t.Fatalf("%s: %d %s then %d %s, runs +%d; want one run, replayed for the key the server read", re.name, st1, b1, st2, b2, runs.Load()-before)
			}
		}
	})
}

// chunked encodes body as one chunk and the last chunk.
func chunked(body string) string {
	return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}
