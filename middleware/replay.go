package middleware

import (
	"net/http"
	"strconv"
)

// replay writes a response from its stored form: its status, its allowed
// headers and its body, byte for byte, with Content-Length. Every answer
// that carries a handler's response goes through it — the leader's own
// (kind AnswerExecuted) and every replay (AnswerReplayed, with the replay
// marker when one is configured) — so that they cannot differ. A tombstone
// is answered ProblemNotReplayable; released tells that the response was
// not kept (the requests that shared a failed execution), in which case a
// tombstone keeps its original status, so that they too see the failure the
// leader saw.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request, val []byte, released bool, kind AnswerKind) {
	s, err := decode(val)
	if err != nil {
		h.fail(w, r, problemFailed, err)
		return
	}
	hdr := w.Header()
	if h.c.marker != "" && kind == AnswerReplayed {
		hdr[h.c.marker] = []string{"true"}
	}
	if s.tombstone() {
		status := h.status(problemNotReplayable)
		if released && s.status >= 400 {
			status = s.status
		}
		h.write(w, r, problemNotReplayable, status, s.status, nil)
		return
	}
	if s.fields > 0 {
		vals := make([]string, 0, s.fields)
		last := ""
		from := 0
		s.eachField(func(name, value string) {
			if name != last {
				h.setField(hdr, last, vals[from:len(vals):len(vals)])
				last, from = name, len(vals)
			}
			vals = append(vals, value)
		})
		h.setField(hdr, last, vals[from:len(vals):len(vals)])
	}
	if bodyAllowed(s.status) {
		hdr["Content-Length"] = []string{strconv.Itoa(len(s.body))}
	}
	w.WriteHeader(s.status)
	if len(s.body) > 0 && bodyAllowed(s.status) {
		_, _ = w.Write(s.body)
	}
	h.answered(r, kind, s.status, 0)
}

// setField sets a stored header on the replay when the current
// configuration still allows it.
func (h *Handler) setField(hdr http.Header, name string, vals []string) {
	if name == "" || len(vals) == 0 || !contains(h.c.replay, name) {
		return
	}
	hdr[name] = vals
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
