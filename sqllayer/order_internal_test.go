package sqllayer

import "testing"

func TestAdaptiveOrderFollowsTheWorkload(t *testing.T) {
	l := &Layer{order: Adaptive}
	if l.readFirst() {
		t.Fatal("a fresh layer reads first; it should expect new keys")
	}
	for range 100 {
		l.seen.Learn(true)
	}
	if !l.readFirst() {
		t.Fatal("a run of duplicates did not turn the order to read-first")
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
