package tiered

import (
	"testing"
	"unsafe"
)

// TestCallFitsItsSizeClass guards what an execution allocates: its call,
// which holds its flight entry, hold, renewal and first contexts so that
// they cost one allocation. On 64-bit platforms an object of this size
// carries an 8-byte header, and 632 + 8 bytes fill the 640-byte size
// class; a field more moves every execution to 704 bytes (BenchmarkDo's
// B/op of path=first shows it).
func TestCallFitsItsSizeClass(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the bound is for 64-bit platforms")
	}
	if n := unsafe.Sizeof(call{}); n > 632 {
		t.Fatalf("a call is %d bytes, more than the 632 that fit the 640-byte size class with its header", n)
	}
}
