package redislayer

// Script replies arrive from go-redis as []any of int64, string and nil.

func replyInt(v any) (int64, bool) {
	n, ok := v.(int64)
	return n, ok
}

// replyString returns a string element; a nil element (Lua false) is "" and
// not ok.
func replyString(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// replyBytes copies a string element into a fresh slice, non-nil even when
// empty (a completed record's result may be empty but is never nil).
func replyBytes(v any) ([]byte, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, false
	}
	return append(make([]byte, 0, len(s)), s...), true
}
