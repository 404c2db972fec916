package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/tiered"
)

// A handler that commits its charge and idem's completion in one
// transaction: when its answer is lost after the commit, the retry on
// another server replays the committed response and the handler never
// runs again; when it rolls back, the retry runs once more and commits
// once. Two servers with Stores of their own over one Redis and one
// database, on the real stack and the embedded one.
func TestCompleteInHandlerTransaction(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		db := st.DB(t)
		table := testenv.Name("grpc_charges")
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+table+" (id VARCHAR(64) PRIMARY KEY, amount INTEGER NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
		charges := func(id string) int {
			n, err := db.NewSelect().Table(table).Where("id = ?", id).Count(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
		var runs atomic.Int32
		committed := make(chan struct{}, 1)
		var rollback, dies atomic.Bool
		var conns []*grpc.ClientConn
		var stores []*tiered.Store
		var dying *faultlayer.Layer
		for i := range 2 {
			layer := st.SQLLayer(t)
			var decider idem.Layer = layer
			if i == 0 {
				// The server that dies never gets to complete the key
				// itself: only what its handler committed can stand.
				dying = faultlayer.New(layer)
				decider = dying
			}
			store, err := tiered.New(tiered.WithRedis(st.RedisLayer(t)), tiered.WithSQL(decider),
				tiered.WithTimeouts(2*time.Second, 10*time.Second), tiered.WithWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			stores = append(stores, store)
			svc := &service{charge: func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
				runs.Add(1)
				res, ok := idem.ReservationFrom(ctx)
				if !ok {
					return nil, status.Error(codes.Internal, "no reservation")
				}
				id := req.GetFields()["id"].GetStringValue()
				resp, _ := structpb.NewStruct(map[string]any{"charge": id, "run": float64(runs.Load())})
				err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (id, amount) VALUES (?, ?)", id, 100); err != nil {
						return err
					}
					v, err := idemgrpc.Completion(ctx, resp)
					if err != nil {
						return err
					}
					if err := layer.CompleteReservation(ctx, tx, res, v); err != nil {
						return err
					}
					if rollback.Load() {
						return errors.New("the provider declined after all")
					}
					return nil
				})
				if err != nil {
					return nil, status.Error(codes.Unavailable, err.Error())
				}
				if dies.Load() {
					committed <- struct{}{}
					<-ctx.Done() // the server is going away: its Store closes
				}
				return resp, nil
			}}
			conns = append(conns, guarded(t, store, svc))
		}
		req := func(id string) *structpb.Struct { return msg(t, map[string]any{"id": id}) }

		// The server dies right after the commit: its Store closes before it
		// could complete the key itself, and the client never gets the
		// answer. What committed is all there is.
		dies.Store(true)
		dying.Fail(fmt.Errorf("%w: the process is dying", idem.ErrUnavailable), faultlayer.Complete)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan reply, 1)
		go func() { done <- callCtx(ctx, conns[0], methodCharge, key("lost"), req("ch-1")) }()
		<-committed
		closed := make(chan struct{})
		go func() { _ = stores[0].Close(); close(closed) }()
		cancel()
		<-done
		<-closed
		dies.Store(false)
		for i := range 2 {
			r := call(t, conns[1], methodCharge, key("lost"), req("ch-1"))
			if r.err != nil || !r.replayed || r.resp.GetFields()["run"].GetNumberValue() != 1 {
				t.Fatalf("retry %d after the lost answer: %+v", i, r)
			}
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times, want 1", n)
		}
		if n := charges("ch-1"); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}

		// A rollback releases the key: the retry runs again, and commits once.
		rollback.Store(true)
		if r := call(t, conns[1], methodCharge, key("rolled"), req("ch-2")); r.code() != codes.Unavailable {
			t.Fatalf("rolled back: %v, want the handler's Unavailable", r.err)
		}
		if n := charges("ch-2"); n != 0 {
			t.Fatalf("%d charges after the rollback", n)
		}
		rollback.Store(false)
		r := call(t, conns[1], methodCharge, key("rolled"), req("ch-2"))
		if r.err != nil || r.replayed {
			t.Fatalf("retry after the rollback: %+v", r)
		}
		if again := call(t, conns[1], methodCharge, key("rolled"), req("ch-2")); again.err != nil || !again.replayed {
			t.Fatalf("replay after the retry committed: %+v", again)
		}
		if n := runs.Load(); n != 3 {
			t.Fatalf("the handler ran %d times, want 3 (once, then the rollback and its retry)", n)
		}
		if n := charges("ch-2"); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

// Completion refuses what is not a message.
func TestCompletionRefusesNonMessages(t *testing.T) {
	if _, err := idemgrpc.Completion(t.Context(), nil); err == nil {
		t.Fatal("Completion(nil) succeeded")
	}
	var typedNil *structpb.Struct
	if _, err := idemgrpc.Completion(t.Context(), typedNil); err == nil {
		t.Fatal("Completion of a typed nil succeeded")
	}
}
