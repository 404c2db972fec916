package reliability_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// TestTenantsNeverShareAResult: two tenants send the same client key at the
// same moment, with the same body and with different bodies, to three
// instances. Each tenant's request runs once; every response a tenant gets
// is its own (never the other tenant's replay, never a mismatch caused by
// the other tenant's body).
func TestTenantsNeverShareAResult(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		var runs atomic.Int64
		rigs := []*httpRig{newHTTPRig(t, b, &runs), newHTTPRig(t, b, &runs), newHTTPRig(t, b, &runs)}
		bodies := map[string]string{"acme": `{"amount":4200}`, "globex": `{"amount":4200}`, "initech": `{"amount":9900}`}
		type reply struct {
			tenant string
			status int
			body   string
		}
		var mu sync.Mutex
		var replies []reply
		var wg sync.WaitGroup
		start := make(chan struct{})
		i := 0
		for tenant, body := range bodies {
			for range 6 {
				rig := rigs[i%len(rigs)]
				i++
				wg.Go(func() {
					<-start
					st, got := rig.raw(t, post("X-Tenant: "+tenant+"\r\nIdempotency-Key: order-1001\r\n", body))
					mu.Lock()
					replies = append(replies, reply{tenant, st, string(got)})
					mu.Unlock()
				})
			}
		}
		close(start)
		wg.Wait()
		first := map[string]string{}
		for _, r := range replies {
			var got struct{ Tenant string }
			if r.status != http.StatusCreated || json.Unmarshal([]byte(r.body), &got) != nil || got.Tenant != r.tenant {
				t.Fatalf("tenant %s got %d %s", r.tenant, r.status, r.body)
			}
			if f, ok := first[r.tenant]; ok && f != r.body {
				t.Fatalf("tenant %s got two different responses: %s and %s", r.tenant, f, r.body)
			}
			first[r.tenant] = r.body
		}
		if n := runs.Load(); n != int64(len(bodies)) {
			t.Fatalf("handler ran %d times for %d tenants", n, len(bodies))
		}
		if n := b.sqlCount(t, "client_key = ?", "order-1001"); n != len(bodies) {
			t.Fatalf("%d SQL rows for the shared client key, want one per tenant", n)
		}
		t.Logf("%s: %d concurrent requests from %d tenants with one client key: %d runs, each tenant its own response", b.name, len(replies), len(bodies), runs.Load())
	})
}

// TestScopesAreSeparateKeys: keys built by idem.NewKey from different
// scopes never meet in any tier, including scopes and client keys that
// concatenate to the same bytes.
func TestScopesAreSeparateKeys(t *testing.T) {
	pairs := []struct {
		name string
		a, b [2]string // scope, client key
	}{
		{"TwoTenants", [2]string{"tenant-a", "k1"}, [2]string{"tenant-b", "k1"}},
		{"SameConcatenation", [2]string{"ab", "c"}, [2]string{"a", "bc"}},
		{"NoScopeAndScope", [2]string{"", "tenant-z:k9"}, [2]string{"tenant-z", "k9"}},
		{"SeparatorInScope", [2]string{"a:b", "c"}, [2]string{"a", "b:c"}},
		{"LongScopes", [2]string{strings.Repeat("s", 300) + "1", "k"}, [2]string{strings.Repeat("s", 300) + "2", "k"}},
	}
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		nodes := []*node{b.node(t), b.node(t), b.node(t, withStore(tiered.WithLocalCache(0, 0, 0)))}
		for _, p := range pairs {
			t.Run(p.name, func(t *testing.T) {
				// The tables and the Redis prefix are this test's own, so
				// these fixed keys meet no other test's.
				ka, kb := idem.NewKey(p.a[0], p.a[1]), idem.NewKey(p.b[0], p.b[1])
				wa, wb := newWork("A's result"), newWork("B's result")
				for round := range 2 {
					for i, n := range nodes {
						ra, err := n.Do(t.Context(), ka, "fp", wa.fn)
						if err != nil || string(ra.Value) != "A's result" {
							t.Fatalf("round %d node %d, key A: %+v, %v", round, i, ra, err)
						}
						rb, err := n.Do(t.Context(), kb, "fp", wb.fn)
						if err != nil || string(rb.Value) != "B's result" {
							t.Fatalf("round %d node %d, key B: %+v, %v", round, i, rb, err)
						}
					}
				}
				if wa.runs.Load() != 1 || wb.runs.Load() != 1 {
					t.Fatalf("runs A %d, B %d; want 1 each", wa.runs.Load(), wb.runs.Load())
				}
				b.requireCompleted(t, ka, "A's result")
				b.requireCompleted(t, kb, "B's result")
				if ra, rb := b.redisRecord(t, ka), b.redisRecord(t, kb); string(ra.result) != "A's result" || string(rb.result) != "B's result" {
					t.Fatalf("Redis: A %+v, B %+v", ra, rb)
				}
			})
		}
	})
}
