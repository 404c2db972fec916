package idemtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Cluster sizes: instances behind one "load balancer", and identical
// requests per round.
const (
	clusterInstances = 3
	clusterRequests  = 20
)

// burst starts three instances, each with its own Store (own singleflight
// and cache, own clients and pools) over the stack's tiers, and sends
// rounds of 20 identical concurrent POSTs spread over them. In every round
// the handler must run once and all 20 responses must have the same
// status, body and allowed headers.
func (k *kit) burst(t *testing.T, rounds int) {
	t.Helper()
	app := newCountingApp()
	servers := make([]*server, clusterInstances)
	for i := range servers {
		in := k.open(t, nil)
		// The gate counts arrivals in front of the middleware, so the handler
		// can wait until every copy of the request is in the system.
		mounted, err := k.Mount(in.store, kitOptions(nil), app)
		if err != nil {
			t.Fatalf("mount: %v", err)
		}
		srv := httptest.NewServer(app.gate(mounted))
		t.Cleanup(srv.Close)
		srv.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = clusterRequests
		servers[i] = &server{Server: srv, instance: in}
	}
	for round := range rounds {
		key := newKey()
		q := request{path: "/pay", key: key, body: fmt.Sprintf(`{"amount":%d,"currency":"EUR"}`, round)}
		replies := make([]reply, clusterRequests)
		errs := make([]error, clusterRequests)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range clusterRequests {
			wg.Go(func() {
				<-start
				replies[i], errs[i] = servers[i%clusterInstances].try(t, q)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d request %d: %v", round, i, err)
			}
		}
		if n := app.runs(key); n != 1 {
			t.Fatalf("round %d: the handler ran %d times, want 1", round, n)
		}
		if replies[0].status != http.StatusCreated {
			t.Fatalf("round %d: status %d %q", round, replies[0].status, replies[0].body)
		}
		for i := range replies {
			wantSame(t, replies[0], replies[i])
		}
	}
}

// countingApp answers /pay once all copies of a request arrived (or after a
// bound), counting runs per key.
type countingApp struct {
	mu      sync.Mutex
	run     map[string]int
	arrived map[string]int
	all     map[string]chan struct{}
}

func newCountingApp() *countingApp {
	return &countingApp{run: map[string]int{}, arrived: map[string]int{}, all: map[string]chan struct{}{}}
}

func (a *countingApp) full(key string) chan struct{} {
	ch := a.all[key]
	if ch == nil {
		ch = make(chan struct{})
		a.all[key] = ch
	}
	return ch
}

func (a *countingApp) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		a.mu.Lock()
		a.arrived[key]++
		if a.arrived[key] == clusterRequests {
			close(a.full(key))
		}
		a.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (a *countingApp) runs(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.run[key]
}

func (a *countingApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	a.mu.Lock()
	a.run[key]++
	n := a.run[key]
	all := a.full(key)
	a.mu.Unlock()
	select {
	case <-all:
	case <-time.After(5 * time.Second):
	case <-r.Context().Done():
	}
	w.Header().Set("Location", "/payments/"+key)
	w.Header().Set("ETag", strconv.Quote(key))
	w.Header().Set("Set-Cookie", "session="+strconv.Itoa(n))
	writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"key":%q,"run":%d}`, key, n))
}
