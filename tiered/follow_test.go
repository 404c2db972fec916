package tiered_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// heldWork is a Func that signals when it starts and then waits for
// release, the way a slow handler holds an execution open.
type heldWork struct {
	started chan struct{}
	release chan struct{}
	counter
}

func newHeldWork() *heldWork {
	return &heldWork{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *heldWork) fn(val string) tiered.Func {
	return func(ctx context.Context) ([]byte, error) {
		h.runs.Add(1)
		h.started <- struct{}{}
		<-h.release
		return []byte(val), nil
	}
}

// lead starts the held work as the leader of key's execution on s and
// returns its answer's channel once the work runs.
func (h *heldWork) lead(t *testing.T, s *tiered.Store, k idem.Key) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		r, err := s.Do(context.Background(), k, "fp", h.fn("paid"))
		if err == nil && string(r.Value) != "paid" {
			err = errors.New("the leader got " + string(r.Value))
		}
		done <- err
	}()
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the work never started")
	}
	return done
}

// answer waits for a Do running on another goroutine, failing the test
// rather than hanging when it waits for the held work.
func answer(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s is still waiting: it waits for the held work", what)
		return nil
	}
}

// A caller that joins an execution led in this process waits no longer
// than the Store's wait, as it would for an owner on another instance
// (DESIGN §9: in-process duplicates are duplicates too).
func TestJoinedCallerObeysWait(t *testing.T) {
	rec := newRecorder()
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithWait(50*time.Millisecond), tiered.WithObserver(rec))
	k := newKey(t)
	h := newHeldWork()
	leader := h.lead(t, s, k)
	dup := make(chan error, 1)
	go func() {
		_, err := s.Do(context.Background(), k, "fp", h.fn("again"))
		dup <- err
	}()
	if err := answer(t, dup, "the duplicate"); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("duplicate: %v, want ErrInFlight while the work runs", err)
	}
	if rec.count("in_flight/local") != 1 {
		t.Fatalf("events %v: want one in_flight from the local tier", rec.counts)
	}
	close(h.release)
	if err := answer(t, leader, "the leader"); err != nil {
		t.Fatal(err)
	}
	r, err := s.Do(t.Context(), k, "fp", h.fn("again"))
	if err != nil || string(r.Value) != "paid" || !r.Replayed || h.runs.Load() != 1 {
		t.Fatalf("retry: %+v, %v, runs %d", r, err, h.runs.Load())
	}
}

// A caller that joins an execution led in this process stops waiting when
// its own context ends; the work goes on for the leader.
func TestJoinedCallerGivesUpWithItsContext(t *testing.T) {
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithWait(time.Minute))
	k := newKey(t)
	h := newHeldWork()
	leader := h.lead(t, s, k)
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("client gone")
	dup := make(chan error, 1)
	go func() {
		_, err := s.Do(ctx, k, "fp", h.fn("again"))
		dup <- err
	}()
	cancel(gone)
	if err := answer(t, dup, "the cancelled duplicate"); !errors.Is(err, gone) {
		t.Fatalf("duplicate: %v, want its context's cause", err)
	}
	close(h.release)
	if err := answer(t, leader, "the leader"); err != nil {
		t.Fatal(err)
	}
	if h.runs.Load() != 1 {
		t.Fatalf("runs %d", h.runs.Load())
	}
}

// A caller that joins an execution that ends within the wait gets its
// outcome: the shared result, or the shared error.
func TestJoinedCallerSharesOutcome(t *testing.T) {
	rec := newRecorder()
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithObserver(rec))
	for _, tc := range []struct {
		name string
		val  string
		err  error
	}{
		{"result", "paid", nil},
		{"error", "", errors.New("declined")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKey(t)
			started, release := make(chan struct{}), make(chan struct{})
			fn := func(context.Context) ([]byte, error) {
				close(started)
				<-release
				return []byte(tc.val), tc.err
			}
			leader := make(chan error, 1)
			go func() { _, err := s.Do(t.Context(), k, "fp", fn); leader <- err }()
			<-started
			dup := make(chan struct {
				r   tiered.Result
				err error
			}, 1)
			go func() {
				r, err := s.Do(t.Context(), k, "fp", fn)
				dup <- struct {
					r   tiered.Result
					err error
				}{r, err}
			}()
			close(release)
			<-leader
			got := <-dup
			if tc.err != nil {
				// The duplicate either joined the failed execution or came
				// after it and ran again; either way it never sees success.
				if got.err == nil && string(got.r.Value) == tc.val {
					t.Fatalf("duplicate of a failed run: %+v", got.r)
				}
				return
			}
			if got.err != nil || string(got.r.Value) != tc.val || !got.r.Replayed {
				t.Fatalf("duplicate: %+v, %v", got.r, got.err)
			}
		})
	}
}
