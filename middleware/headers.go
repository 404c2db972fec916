package middleware

import "net/textproto"

// DefaultReplayHeaders returns the response headers a replay repeats unless
// WithReplayHeaders replaces them: Content-Type, Content-Language,
// Content-Encoding, Content-Disposition, Location, ETag, Last-Modified and
// Link. The slice is a copy; changing it changes nothing.
func DefaultReplayHeaders() []string {
	return []string{
		"Content-Type", "Content-Language", "Content-Encoding", "Content-Disposition",
		"Location", "ETag", "Last-Modified", "Link",
	}
}

// neverStored lists the headers that are never stored, even when an
// allow-list names them: credentials and session state that must not be
// handed to whoever retries with the key, and hop-by-hop headers, which
// describe one connection. Content-Length is not stored either: a replay
// sets it from the stored body.
var neverStored = map[string]bool{
	"Set-Cookie":         true,
	"Authorization":      true,
	"Www-Authenticate":   true,
	"Proxy-Authenticate": true,
	"Connection":         true,
	"Keep-Alive":         true,
	"Transfer-Encoding":  true,
	"Te":                 true,
	"Trailer":            true,
	"Upgrade":            true,
	"Proxy-Connection":   true,
	"Content-Length":     true,
}

// replayNames canonicalizes names and keeps each storable one once, in order.
func replayNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !validToken(n) {
			continue
		}
		n = textproto.CanonicalMIMEHeaderKey(n)
		if neverStored[n] || contains(out, n) {
			continue
		}
		out = append(out, n)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
