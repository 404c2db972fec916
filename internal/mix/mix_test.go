package mix

import "testing"

func TestExistingFollowsTheWorkload(t *testing.T) {
	var e Existing
	if e.Mostly() {
		t.Fatal("a fresh estimate expects existing keys; it should expect new ones")
	}
	calls := 0
	for !e.Mostly() {
		e.Learn(true)
		if calls++; calls > 100 {
			t.Fatal("duplicates never turned the estimate")
		}
	}
	if calls > 40 {
		t.Fatalf("%d duplicates in a row before the switch, want a few dozen at most", calls)
	}
	for range 100 {
		e.Learn(true)
	}
	for range 5 {
		e.Learn(false)
	}
	if !e.Mostly() {
		t.Fatal("a few new keys among many duplicates flipped the estimate")
	}
	for range 100 {
		e.Learn(false)
	}
	if e.Mostly() {
		t.Fatal("a run of new keys did not turn the estimate back")
	}
}
