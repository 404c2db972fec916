package middleware

import (
	"errors"
	"net/http"
	"time"
)

// abort ends a response that began and must not complete: it cuts the
// connection under w, unless the handler took it over (hijacked), then
// panics with http.ErrAbortHandler for the server's sake.
//
// The panic alone is not enough: recovery middleware outside the core may
// swallow it (gin.Recovery takes it for a broken pipe), and the framework
// then ends the response normally, so that a truncated body reaches the
// client as complete. Once the connection is cut, nothing can finish it.
func abort(w http.ResponseWriter, hijacked bool) {
	if !hijacked {
		_ = cut(w)
	}
	panic(http.ErrAbortHandler)
}

// aLongTimeAgo is a write deadline that has passed, as net/http uses.
var aLongTimeAgo = time.Unix(1, 0)

// errCannotCut reports a writer that offers no way to cut its connection.
var errCannotCut = errors.New("middleware: the response writer cannot cut its connection")

// cut makes sure the client of w never sees its response complete.
//
// It goes down w's Unwrap chain to the server's own writer first: a wrapper
// may refuse what the server allows (gin's writer refuses a hijack once the
// body began, and panics on one over HTTP/2). Over HTTP/1.x it hijacks the
// connection and closes it: the client, which was promised a chunked body
// or a Content-Length, reads an unexpected EOF. Over HTTP/2, where there is
// nothing to hijack, a write deadline in the past resets the stream at once
// (RST_STREAM): the client reads a stream error. Any other writer that
// honours a write deadline fails every later write, so that the response
// cannot end properly. It returns errCannotCut when w supports none of
// these (httptest.ResponseRecorder).
func cut(w http.ResponseWriter) error {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		inner := u.Unwrap()
		if inner == nil {
			break
		}
		w = inner
	}
	rc := http.NewResponseController(w)
	conn, _, err := rc.Hijack()
	switch {
	case err == nil:
		return conn.Close()
	case errors.Is(err, http.ErrHijacked):
		return nil // someone else owns the connection now
	}
	if err := rc.SetWriteDeadline(aLongTimeAgo); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			return errCannotCut
		}
		return err
	}
	return nil
}
