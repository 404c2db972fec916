package tiered

import "testing"

func TestIsNotReplayable(t *testing.T) {
	if !IsNotReplayable(tooLargeMarker) || !IsNotReplayable(append([]byte(nil), tooLargeMarker...)) {
		t.Fatal("the marker is not recognised")
	}
	for _, b := range [][]byte{nil, {}, []byte("paid"), tooLargeMarker[:len(tooLargeMarker)-1]} {
		if IsNotReplayable(b) {
			t.Fatalf("IsNotReplayable(%q) = true", b)
		}
	}
}
