package idemgrpc_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/internal/testkit/stacktest"
)

// roundOf reads the round a test request belongs to.
func roundOf(req any) int {
	return int(req.(*structpb.Struct).GetFields()["round"].GetNumberValue())
}

// Three servers, each with a Store of its own over one Redis and one
// database: 20 identical concurrent calls with one key run the handler
// once and get 20 identical answers, for 50 rounds with a new key each.
// The handler returns only once all 20 calls have reached the servers, so
// that every duplicate arrives while the execution is in flight (in its
// own server or another) and must wait for it.
func TestOncePerKeyAcrossServers(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		const servers, callers, rounds = 3, 20, 50
		var (
			arrivals [rounds]atomic.Int32
			allIn    [rounds]chan struct{}
			runs     [rounds]atomic.Int32
			total    atomic.Int32
		)
		for r := range allIn {
			allIn[r] = make(chan struct{})
		}
		// count is outside idem's interceptor: it sees every call arrive.
		count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			r := roundOf(req)
			if arrivals[r].Add(1) == callers {
				close(allIn[r])
			}
			return h(ctx, req)
		}
		conns := make([]*grpc.ClientConn, servers)
		for s := range conns {
			svc := &service{charge: func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
				r := roundOf(req)
				runs[r].Add(1)
				select {
				case <-allIn[r]:
				case <-time.After(20 * time.Second):
					t.Errorf("round %d: only %d calls arrived", r, arrivals[r].Load())
				}
				return structpb.NewStruct(map[string]any{"round": r, "execution": float64(total.Add(1)), "server": s})
			}}
			icpt := must(t, st.Store(t))
			conns[s] = serve(t, svc, count, icpt)
		}
		for r := range rounds {
			k := fmt.Sprintf("round-%d-%s", r, st.Prefix)
			req := msg(t, map[string]any{"round": r, "amount": 100})
			replies := make([]reply, callers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					replies[c] = call(t, conns[c%servers], methodCharge, key(k), req)
				}()
			}
			close(start)
			wg.Wait()
			if n := runs[r].Load(); n != 1 {
				t.Fatalf("round %d: the handler ran %d times", r, n)
			}
			led := 0
			for c, rep := range replies {
				if rep.err != nil {
					t.Fatalf("round %d, caller %d: %v", r, c, rep.err)
				}
				if !proto.Equal(rep.resp, replies[0].resp) {
					t.Fatalf("round %d: caller %d got %v, caller 0 got %v", r, c, rep.resp, replies[0].resp)
				}
				if !rep.replayed {
					led++
				}
			}
			if led != 1 {
				t.Errorf("round %d: %d answers not marked as replays, want 1 (the call that ran the handler)", r, led)
			}
		}
		if n := total.Load(); n != rounds {
			t.Errorf("%d executions in %d rounds", n, rounds)
		}
	})
}
