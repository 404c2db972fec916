package idemtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// unreleased is how long a /slow handler waits for its row to release it.
// A row releases it at once when the middleware works; a stack that lets a
// duplicate reach the handler then fails the row instead of hanging.
const unreleased = 10 * time.Second

// app is the handler behind the middleware in every row. Each endpoint
// counts its runs, so a row can tell an execution from a replay: every
// response body carries the run number.
type app struct {
	runs    atomic.Int64
	release chan struct{} // closed to let /slow finish
	once    sync.Once
	started chan struct{} // receives once per /slow run, when it started
}

// newApp returns an app whose /slow handlers wait until Release.
func newApp() *app {
	return &app{release: make(chan struct{}), started: make(chan struct{}, 64)}
}

// Runs returns how many times any endpoint ran.
func (a *app) Runs() int64 { return a.runs.Load() }

// Release lets every /slow handler, running or to come, finish.
func (a *app) Release() { a.once.Do(func() { close(a.release) }) }

// Started waits until a /slow handler started, or fails after d.
func (a *app) Started(d time.Duration) bool {
	select {
	case <-a.started:
		return true
	case <-time.After(d):
		return false
	}
}

type payment struct {
	Amount   json.Number `json:"amount"`
	Currency string      `json:"currency"`
}

// ServeHTTP routes to the endpoints:
//
//	POST /pay, PATCH /pay  201, Location, ETag, Set-Cookie, X-Internal, JSON body
//	GET  /pay              200 JSON
//	POST /other            200 JSON (another route for mismatch rows)
//	POST /status/{code}    that status, JSON body
//	POST /panic            panics before writing; /panic?late=1 after writing
//	POST /flush            sets a write deadline, writes, flushes, writes
//	POST /hijack           hijacks the connection and answers on it
//	POST /big?size=n       n bytes; &cl=1 declares Content-Length first
//	POST /slow             waits for Release (or the context, or unreleased), then as /pay
//	POST /end/{ending}     ends as the handler-ending row says (see end)
func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.runs.Add(1)
	path := r.URL.Path
	switch {
	case path == "/pay" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, fmt.Sprintf(`{"get":%d}`, n))
	case path == "/pay":
		a.pay(w, r, n)
	case path == "/other":
		writeJSON(w, http.StatusOK, fmt.Sprintf(`{"route":"other","run":%d}`, n))
	case strings.HasPrefix(path, "/status/"):
		code, _ := strconv.Atoi(strings.TrimPrefix(path, "/status/"))
		writeJSON(w, code, fmt.Sprintf(`{"status":%d,"run":%d}`, code, n))
	case path == "/panic":
		if r.URL.Query().Get("late") != "" {
			writeJSON(w, http.StatusOK, `{"partial":`)
			http.NewResponseController(w).Flush()
		}
		panic("idemtest: handler panic")
	case path == "/flush":
		rc := http.NewResponseController(w)
		// Deadlines reach the server's writer only if every wrapper unwraps.
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			writeJSON(w, http.StatusInternalServerError, fmt.Sprintf(`{"deadline":%q}`, err))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "part1;")
		if err := rc.Flush(); err != nil {
			panic(err)
		}
		fmt.Fprintf(w, "part2;run=%d", n)
	case path == "/hijack":
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, fmt.Sprintf(`{"hijack":%q}`, err))
			return
		}
		defer conn.Close()
		body := fmt.Sprintf("hijacked;run=%d", n)
		fmt.Fprintf(brw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		brw.Flush()
	case path == "/big":
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		w.Header().Set("Content-Type", "application/octet-stream")
		if r.URL.Query().Get("cl") != "" {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(strings.Repeat("x", size)))
	case strings.HasPrefix(path, "/end/"):
		a.end(w, r, n, strings.TrimPrefix(path, "/end/"))
	case path == "/slow":
		a.started <- struct{}{}
		select {
		case <-a.release:
		case <-r.Context().Done():
			writeJSON(w, http.StatusServiceUnavailable, `{"cancelled":true}`)
			return
		case <-time.After(unreleased):
			writeJSON(w, http.StatusServiceUnavailable, `{"unreleased":true}`)
			return
		}
		a.pay(w, r, n)
	default:
		http.NotFound(w, r)
	}
}

func (a *app) pay(w http.ResponseWriter, r *http.Request, n int64) {
	var p payment
	body, err := io.ReadAll(r.Body)
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &p)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, `{"error":"bad payment"}`)
		return
	}
	h := w.Header()
	h.Set("Location", fmt.Sprintf("/payments/%d", n))
	h.Set("ETag", fmt.Sprintf(`"%d"`, n))
	h.Set("Link", `</payments>; rel="collection"`)
	h.Add("Set-Cookie", fmt.Sprintf("session=s%d", n))
	h.Set("X-Internal", "secret")
	tenant, _ := json.Marshal(r.Header.Get("X-Tenant"))
	writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"run":%d,"tenant":%s,"amount":%q,"currency":%q}`, n, tenant, p.Amount, p.Currency))
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// end ends a handler in one of the ways of the handler-ending table.
func (a *app) end(w http.ResponseWriter, r *http.Request, n int64, how string) {
	switch how {
	case "nothing":
		// Returns without writing: it logged an error and returned, say.
		w.Header().Set("X-Internal", "secret")
	case "empty":
		// An empty 200, on purpose.
		w.WriteHeader(http.StatusOK)
	case "late-headers":
		// Changes headers through a map taken before WriteHeader, after it.
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", fmt.Sprintf("/orders/%d", n))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, n)
		h.Set("Location", "/orders/changed")
		h.Set("Content-Type", "text/plain")
		h.Set("ETag", `"late"`)
	case "headers-after-write":
		// Sets headers on w.Header() after the body began.
		writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"order":%d}`, n))
		w.Header().Set("Location", "/orders/changed")
		w.Header().Set("Link", "</late>; rel=late")
	case "write-then-panic":
		// Writes a whole response (held), then panics.
		writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"order":%d}`, n))
		panic("idemtest: handler panic after writing")
	case "key-only":
		// Reads its key, for a downstream service's idempotency key, and
		// answers as usual: nothing is taken.
		k, ok := idem.KeyFrom(r.Context())
		writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"order":%d,"downstream_key":%q,"ok":%v}`, n, k.Hex()[:8], ok))
	case "goexit":
		// Ends its goroutine: neither a return nor a panic.
		runtime.Goexit()
	case "write-then-goexit":
		writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"order":%d}`, n))
		runtime.Goexit()
	case "slow":
		// Works until the row releases it (past the lease, the retention).
		a.started <- struct{}{}
		select {
		case <-a.release:
		case <-time.After(unreleased):
			writeJSON(w, http.StatusServiceUnavailable, `{"unreleased":true}`)
			return
		}
		writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"order":%d}`, n))
	default:
		http.NotFound(w, r)
	}
}
