package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// How the endings table runs a row over gRPC, and checks what each
// client got and what the Store kept.

func runEndings(t *testing.T, s *endingStack) {
	if s.st != nil {
		s.createTables(t)
	}
	for i, e := range endings {
		if e.inTx && s.st == nil {
			continue // the memory layer has no transaction to complete in
		}
		if !e.atomic.same && e.atomic.runs == 0 {
			t.Fatalf("%s: the row states no atomic outcome", e.name)
		}
		t.Run(e.name, func(t *testing.T) { s.run(t, i, e.inMode(s.atomic)) })
	}
}

func (s *endingStack) run(t *testing.T, i int, e ending) {
	var inner idem.Layer
	var sqlLayer *sqllayer.Layer
	if s.st == nil {
		inner = s.decider(t)
	} else if s.atomic {
		// The Store's transaction runs on the business pool, which checks
		// foreign keys.
		l, err := sqllayer.New(s.db, sqllayer.WithRecordsTable(s.st.Records), sqllayer.WithEventsTable(s.st.Events),
			sqllayer.WithVersionsTable(s.st.Versions))
		if err != nil {
			t.Fatal(err)
		}
		sqlLayer, inner = l, l
	} else {
		sqlLayer = s.st.SQLLayer(t)
		inner = sqlLayer
	}
	decider := faultlayer.New(inner)
	var deciding idem.Layer = decider
	if s.atomic {
		a, ok := decider.Atomic()
		if !ok {
			t.Fatalf("%T runs no atomic executions", inner)
		}
		deciding = a
	}
	renewals := make(chan struct{}, 64)
	decider.Hook(faultlayer.Renew, func(context.Context) error {
		select {
		case renewals <- struct{}{}:
		default:
		}
		return nil
	})
	if e.renewLost {
		decider.Fail(fmt.Errorf("%w: another owner took the key over", idem.ErrLeaseLost), faultlayer.Renew)
	}
	store := func(opts ...tiered.Option) *tiered.Store {
		base := []tiered.Option{tiered.WithSQL(deciding), tiered.WithAtomic(s.atomic)}
		if s.st != nil {
			base = append(base, tiered.WithRedis(s.st.RedisLayer(t)), tiered.WithTimeouts(2*time.Second, 10*time.Second))
		}
		if e.lease > 0 {
			base = append(base, tiered.WithLease(e.lease))
		}
		st, err := tiered.New(append(base, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	opts := []idemgrpc.Option{
		idemgrpc.WithReplayMetadata("location", "x-receipt"),
		idemgrpc.WithKeep(func(st *status.Status) bool { return st.Code() == codes.InvalidArgument }),
	}
	k := fmt.Sprintf("end-%d-%s", i, testenv.Prefix())
	req := msg(t, map[string]any{"row": e.name})
	gone, started := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	svc := &service{}
	conn := guarded(t, store(), svc, opts...)
	other := guarded(t, store(tiered.WithWait(0)), svc, opts...)
	svc.charge = func(ctx context.Context, _ *structpb.Struct) (*structpb.Struct, error) {
		if runs.Add(1) > 1 {
			if err := setHeader(ctx, "location", "/again"); err != nil {
				return nil, err
			}
			return resp("again"), nil
		}
		r := &endingRun{t: t, ctx: ctx, s: s, sql: sqlLayer, id: k, atomic: s.atomic, lease: e.lease, renew: renewals, started: started, gone: gone}
		r.dup = func() {
			d := call(t, other, methodCharge, key(k), req)
			wantProblem(t, d, codes.Aborted, idemgrpc.ReasonInFlight, idemgrpc.DefaultInFlightDelay)
		}
		return e.first(r)
	}

	firstCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var first reply
	if e.givesUp {
		deadline := &expiring{Context: firstCtx, expire: make(chan struct{})}
		answered := make(chan reply)
		go func() { answered <- callCtx(deadline, conn, methodCharge, key(k), req) }()
		<-started
		close(deadline.expire)
		first = <-answered
	} else {
		first = callCtx(firstCtx, conn, methodCharge, key(k), req)
	}
	cancel()
	close(gone)
	checkReply(t, "first", first, e.firstCode, e.firstMsg, e.firstV, e.firstHeader, e.firstTrailer, false)

	s.checkStored(t, decider, k, e)

	retry := call(t, conn, methodCharge, key(k), req)
	receipt := strings.TrimPrefix(e.storedHeader, "/") // stored beside its header
	switch e.retryV {
	case "":
		checkReply(t, "retry", retry, e.retryCode, "", "", e.storedHeader, receipt, true)
	case "again":
		checkReply(t, "retry", retry, codes.OK, "", "again", "/again", "", false)
	default:
		checkReply(t, "retry", retry, codes.OK, "", e.retryV, e.storedHeader, receipt, true)
	}
	if n := runs.Load(); int(n) != e.runs {
		t.Errorf("the handler ran %d times, want %d", n, e.runs)
	}
	if s.st != nil && e.inTx {
		n, err := s.db.NewSelect().Table(s.charges).Where("id = ?", k).Count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(e.charges) {
			t.Errorf("%d charges committed, want %d", n, e.charges)
		}
	}
}

// checkReply checks what a caller got: the code (and a part of the
// message), the response's v, the location header and the x-receipt
// trailer ("" none of either), and the replay mark.
func checkReply(t *testing.T, who string, r reply, code codes.Code, msgPart, v, header, trailer string, replayed bool) {
	t.Helper()
	if r.code() != code {
		t.Errorf("%s: %v, want %v", who, r.err, code)
		return
	}
	if msgPart != "" && !strings.Contains(status.Convert(r.err).Message(), msgPart) {
		t.Errorf("%s: message %q, want it to say %q", who, status.Convert(r.err).Message(), msgPart)
	}
	if code == codes.OK {
		if got := r.resp.GetFields()["v"].GetStringValue(); got != v {
			t.Errorf("%s: v %q, want %q", who, got, v)
		}
	}
	if got := strings.Join(r.header.Get("location"), ","); got != header {
		t.Errorf("%s: location %q, want %q", who, got, header)
	}
	if got := strings.Join(r.trailer.Get("x-receipt"), ","); got != trailer {
		t.Errorf("%s: x-receipt %q, want %q", who, got, trailer)
	}
	if r.replayed != replayed {
		t.Errorf("%s: replayed %v, want %v", who, r.replayed, replayed)
	}
}

// checkStored checks what the deciding tier holds for k once the first
// call's execution has settled (a caller that gave up does not wait for
// it).
func (s *endingStack) checkStored(t *testing.T, l idem.Layer, k string, e ending) {
	t.Helper()
	var rec idem.Record
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; {
		rec, err = l.Get(t.Context(), idem.NewKey(methodCharge, k))
		// An atomic execution's claim is seen by no one before it
		// commits: no record yet may be a transaction still open.
		pending := err == nil || errors.Is(err, idem.ErrNotFound) && s.atomic && e.stored != ""
		if !pending || rec.Completed() || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the work goes on after its caller gave up
	}
	if e.stored == "" {
		if !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("stored %+v, %v; want the key released", rec, err)
		}
		return
	}
	if err != nil || !rec.Completed() {
		t.Fatalf("stored %+v, %v; want %s", rec, err, e.stored)
	}
	m, st, header, trailer, err := idemgrpc.DecodeStored(rec.Result)
	if err != nil {
		t.Fatalf("stored answer: %v", err)
	}
	got := "code:" + st.Code().String()
	if m != nil {
		got = "v:" + m.(*structpb.Struct).GetFields()["v"].GetStringValue()
	}
	if got != e.stored {
		t.Errorf("stored %s, want %s", got, e.stored)
	}
	if h := strings.Join(header.Get("location"), ","); h != e.storedHeader {
		t.Errorf("stored location %q, want %q", h, e.storedHeader)
	}
	if r, want := strings.Join(trailer.Get("x-receipt"), ","), strings.TrimPrefix(e.storedHeader, "/"); r != want {
		t.Errorf("stored x-receipt %q, want %q", r, want)
	}
	if len(header.Get("x-other")) != 0 {
		t.Errorf("a header not named was stored")
	}
}

// setHeader sets one header of the handler's.
func setHeader(ctx context.Context, k, v string) error {
	return grpc.SetHeader(ctx, metadata.Pairs(k, v))
}
