package middleware

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestCapture(w http.ResponseWriter, opts ...Option) *capture {
	c := defaults()
	for _, o := range opts {
		o(&c)
	}
	cw := new(capture)
	cw.reset(w, &c)
	return cw
}

func decodeFinished(t *testing.T, cw *capture) (stored, error) {
	t.Helper()
	b, keepErr := cw.finish(DefaultKeep)
	s, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return s, keepErr
}

func TestCaptureRecords(t *testing.T) {
	rec := httptest.NewRecorder()
	cw := newTestCapture(rec, WithReplayHeaders("Location", "Set-Cookie", "X-Custom"))
	h := cw.Header()
	h.Set("Location", "/p/1")
	h.Add("X-Custom", "a")
	h.Add("X-Custom", "bad\r\nInjected: 1") // dropped, never stored
	h.Add("X-Custom", "b")
	h.Set("Set-Cookie", "s=1") // never stored, even allow-listed
	h.Set("X-Other", "x")      // not allow-listed
	cw.WriteHeader(http.StatusCreated)
	cw.WriteHeader(http.StatusAccepted) // superfluous: the first status stays
	io.WriteString(cw, "hello ")
	cw.Write([]byte("world"))
	cw.ReadFrom(strings.NewReader("!"))
	s, err := decodeFinished(t, cw)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Flushed {
		t.Fatalf("the response went out while held: %d %q", rec.Code, rec.Body)
	}
	if s.status != http.StatusCreated || string(s.body) != "hello world!" || s.tombstone() {
		t.Fatalf("recorded %d %q flags %#x", s.status, s.body, s.flags)
	}
	want := []string{"Location", "/p/1", "X-Custom", "a", "X-Custom", "b"}
	if got := fieldsOf(s); !slices.Equal(got, want) {
		t.Fatalf("fields %q, want %q", got, want)
	}
}

// A problem answered in place of a held response gets w's header map as
// the handler found it: what the handler added, changed or deleted is
// undone, and nothing of the handler's stays.
func TestCaptureRestoreHeader(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "outer")
	rec.Header().Add("Vary", "Origin")
	rec.Header().Set("X-Gone", "outer")
	cw := newTestCapture(rec)
	h := cw.Header()
	h.Set("Location", "/p/1")
	h.Set("Set-Cookie", "s=1")
	h.Set("X-Request-Id", "inner")
	h.Add("Vary", "Accept")
	h.Del("X-Gone")
	cw.WriteHeader(http.StatusCreated)
	io.WriteString(cw, "held")
	cw.restoreHeader()
	want := http.Header{"X-Request-Id": {"outer"}, "Vary": {"Origin"}, "X-Gone": {"outer"}}
	if got := rec.Header(); len(got) != len(want) || got.Get("X-Request-Id") != "outer" ||
		!slices.Equal(got.Values("Vary"), want["Vary"]) || got.Get("X-Gone") != "outer" {
		t.Fatalf("restored %v, want %v", got, want)
	}
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Fatalf("the held response went out: %d %q", rec.Code, rec.Body)
	}
}

// A handler that wrote nothing has decided nothing: no stored form, and
// ErrNoResponse, so that the key is released rather than an empty 200
// kept. An explicit WriteHeader(200) is an answer.
func TestCaptureNothingWritten(t *testing.T) {
	rec := httptest.NewRecorder()
	cw := newTestCapture(rec)
	cw.Header().Set("Content-Type", "text/plain")
	if b, err := cw.finish(DefaultKeep); !errors.Is(err, ErrNoResponse) || b != nil {
		t.Fatalf("finish: %q, %v; want ErrNoResponse", b, err)
	}
	cw = newTestCapture(rec)
	cw.Header().Set("Content-Type", "text/plain")
	cw.WriteHeader(http.StatusOK)
	s, err := decodeFinished(t, cw)
	if err != nil || s.status != http.StatusOK || len(s.body) != 0 {
		t.Fatalf("recorded %d %q, %v", s.status, s.body, err)
	}
	if got := fieldsOf(s); !slices.Equal(got, []string{"Content-Type", "text/plain"}) {
		t.Fatalf("fields %q", got)
	}
}

func TestCaptureNotKept(t *testing.T) {
	cw := newTestCapture(httptest.NewRecorder())
	cw.WriteHeader(http.StatusBadGateway)
	s, err := decodeFinished(t, cw)
	if !errors.Is(err, ErrNotKept) || s.status != http.StatusBadGateway {
		t.Fatalf("finish: %d, %v", s.status, err)
	}
}

func TestCaptureFlushIsTombstone(t *testing.T) {
	rec := httptest.NewRecorder()
	cw := newTestCapture(rec)
	io.WriteString(cw, "a")
	if err := http.NewResponseController(cw).Flush(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(cw, "b")
	s, err := decodeFinished(t, cw)
	if err != nil || s.flags != flagStreamed || s.status != http.StatusOK || len(s.body) != 0 {
		t.Fatalf("recorded %d %#x %q, %v", s.status, s.flags, s.body, err)
	}
	if !rec.Flushed || rec.Body.String() != "ab" {
		t.Fatalf("real writer flushed %v, got %q", rec.Flushed, rec.Body)
	}
}

func TestCaptureOversize(t *testing.T) {
	for _, declare := range []bool{false, true} {
		rec := httptest.NewRecorder()
		cw := newTestCapture(rec, WithResponseLimit(4))
		if declare {
			cw.Header().Set("Content-Length", "6")
		}
		io.WriteString(cw, "abc")
		cw.Write([]byte("def"))
		s, err := decodeFinished(t, cw)
		if err != nil || s.flags != flagOversize || s.status != http.StatusOK {
			t.Fatalf("recorded %d %#x, %v", s.status, s.flags, err)
		}
		if rec.Body.String() != "abcdef" {
			t.Fatalf("real writer got %q", rec.Body)
		}
	}
}

// readerFromWriter is a ResponseWriter that counts ReadFrom calls.
type readerFromWriter struct {
	*httptest.ResponseRecorder
	readFrom int
}

func (w *readerFromWriter) ReadFrom(r io.Reader) (int64, error) {
	w.readFrom++
	return io.Copy(w.ResponseRecorder, r)
}

func TestCaptureReadFromAfterLimit(t *testing.T) {
	w := &readerFromWriter{ResponseRecorder: httptest.NewRecorder()}
	cw := newTestCapture(w, WithResponseLimit(2))
	cw.ReadFrom(strings.NewReader("abcd")) // held through Write up to the limit, then live: the rest handed on
	cw.ReadFrom(strings.NewReader("ef"))   // handed to the real writer
	if w.readFrom != 2 || w.Body.String() != "abcdef" {
		t.Fatalf("ReadFrom calls %d, body %q", w.readFrom, w.Body)
	}
}

func TestCaptureUnwrap(t *testing.T) {
	rec := httptest.NewRecorder()
	cw := newTestCapture(rec)
	if cw.Unwrap() != http.ResponseWriter(rec) {
		t.Fatal("Unwrap does not return the real writer")
	}
	// Deadlines reach the real writer through Unwrap: a recorder has none.
	if err := http.NewResponseController(cw).SetWriteDeadline(timeZero); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("SetWriteDeadline: %v", err)
	}
}

func TestCaptureHijack(t *testing.T) {
	var s stored
	var ferr error
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		cw := newTestCapture(w)
		conn, brw, err := http.NewResponseController(cw).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
		brw.Flush()
		var b []byte
		b, ferr = cw.finish(DefaultKeep)
		s, _ = decode(b)
	}))
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "hi" {
		t.Fatalf("client got %q", body)
	}
	<-done
	if ferr != nil || s.flags != flagHijacked || s.status != 0 {
		t.Fatalf("recorded %d %#x, %v", s.status, s.flags, ferr)
	}
}

var timeZero time.Time

func TestCaptureInformational(t *testing.T) {
	var s stored
	h, err := NewHandler(newTestStore(t), WithSingleTenant())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := newTestCapture(w)
		cw.Header().Set("Link", "</style.css>; rel=preload")
		cw.WriteHeader(http.StatusEarlyHints) // passes through, not the final status
		cw.Header().Set("Location", "/p/1")
		cw.WriteHeader(http.StatusCreated)
		io.WriteString(cw, "made")
		b, err := cw.finish(DefaultKeep)
		if err != nil {
			t.Error(err)
		}
		s, _ = decode(b)
		cw.restoreHeader()
		h.replay(w, r, b, false, AnswerExecuted) // the leader's answer: from the stored form
	}))
	defer srv.Close()
	res, err := srv.Client().Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || string(body) != "made" {
		t.Fatalf("client got %d %q", res.StatusCode, body)
	}
	if s.status != http.StatusCreated || string(s.body) != "made" {
		t.Fatalf("recorded %d %q", s.status, s.body)
	}
	want := []string{"Location", "/p/1", "Link", "</style.css>; rel=preload"}
	if got := fieldsOf(s); !slices.Equal(got, want) {
		t.Fatalf("fields %q, want %q", got, want)
	}
}
