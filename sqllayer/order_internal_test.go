package sqllayer

import "testing"

func TestAdaptiveOrderFollowsTheWorkload(t *testing.T) {
	l := &Layer{order: Adaptive}
	if l.readFirst() {
		t.Fatal("a fresh layer reads first; it should expect new keys")
	}
	calls := 0
	for !l.readFirst() {
		l.seen.learn(true)
		if calls++; calls > 100 {
			t.Fatal("duplicates never turned the order to read-first")
		}
	}
	if calls > 40 {
		t.Fatalf("%d duplicates in a row before reading first, want a few dozen at most", calls)
	}
	for range 100 {
		l.seen.learn(true)
	}
	for range 5 {
		l.seen.learn(false)
	}
	if !l.readFirst() {
		t.Fatal("a few new keys among many duplicates flipped the order")
	}
	for range 100 {
		l.seen.learn(false)
	}
	if l.readFirst() {
		t.Fatal("a run of new keys did not turn the order back to insert-first")
	}
	for _, tc := range []struct {
		l    *Layer
		want bool
	}{
		{&Layer{order: ReadFirst}, true},
		{&Layer{order: InsertFirst}, false},
		{&Layer{order: OneStatement}, false},
		{&Layer{order: InsertFirst, sqlite: true}, true},
	} {
		if got := tc.l.readFirst(); got != tc.want {
			t.Errorf("%v (sqlite %v): readFirst = %v", tc.l.order, tc.l.sqlite, got)
		}
	}
}
