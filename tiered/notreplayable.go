package tiered

// IsNotReplayable reports whether a record's stored result is the marker
// the Store keeps in place of a result too large for its deciding tier:
// the work ran once and its callers get ErrNotReplayable. It is for
// operators' tools (the idem command's get), which read records without a
// Store.
func IsNotReplayable(result []byte) bool { return isTooLargeMarker(result) }
