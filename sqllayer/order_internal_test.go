package sqllayer

import (
	"testing"

	"github.com/idemkit/idem"
)

func TestAdaptiveOrderFollowsTheWorkload(t *testing.T) {
	l := &Layer{order: idem.OrderAdaptive}
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
		{&Layer{order: idem.OrderReadFirst}, true},
		{&Layer{order: idem.OrderClaimFirst}, false},
		{&Layer{order: OrderOneRoundTrip}, false},
		{&Layer{order: idem.OrderClaimFirst, sqlite: true}, true},
	} {
		if got := tc.l.readFirst(); got != tc.want {
			t.Errorf("%v (sqlite %v): readFirst = %v", tc.l.order, tc.l.sqlite, got)
		}
	}
}
