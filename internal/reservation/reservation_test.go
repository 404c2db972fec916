package reservation_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
	"github.com/idemkit/idem/memlayer"
)

// wrapper is a layer that wraps another and says so.
type wrapper struct{ idem.Layer }

func (w wrapper) Unwrap() idem.Layer { return w.Layer }

// reserve returns a reservation that layer holds, on a context, and its
// state.
func reserve(t *testing.T, layer idem.Layer) (*idem.Reservation, *reservation.State) {
	t.Helper()
	ctx, st := reservation.NewContext(t.Context(), layer, idem.Record{Key: idem.NewKey("", "k"), Fingerprint: "fp", Token: "t"}, time.Hour)
	res, ok := idem.ReservationFrom(ctx)
	if !ok || res.Layer() != layer || reservation.Of(res) != st {
		t.Fatalf("the reservation made: %+v, %v", res, ok)
	}
	return res, st
}

func newLayer(t *testing.T) idem.Layer {
	t.Helper()
	l, err := memlayer.New()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Who may complete a reservation in a transaction: the layer that holds it,
// or one that wraps it; a nil reservation or another layer is refused as a
// mistake (idem.ErrConfig), and the refusal is what the Store hears.
func TestCompleteWithWhichLayer(t *testing.T) {
	held, other := newLayer(t), newLayer(t)
	write := func(want []byte) func([]byte) error {
		return func(got []byte) error {
			if string(got) != string(want) {
				t.Errorf("written %q, want %q", got, want)
			}
			return nil
		}
	}
	if err := reservation.CompleteWith((*idem.Reservation)(nil), held, []byte("r"), write(nil)); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("a nil reservation: %v, want ErrConfig", err)
	}
	res, st := reserve(t, wrapper{held})
	if err := reservation.CompleteWith(res, held, []byte("r"), write([]byte("r"))); err != nil {
		t.Fatalf("the layer wrapped: %v", err)
	}
	if err := reservation.CompleteWith(res, other, []byte("r"), write(nil)); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("another layer: %v, want ErrConfig", err)
	}
	if e := st.End(); !e.InTx || !e.Wrote([]byte("r")) || !errors.Is(e.Refused, idem.ErrConfig) {
		t.Fatalf("the ending: %+v", e)
	}
}

// The result of a completion: the result function's when the code that
// runs the execution defined one (a result given beside it is refused),
// else the result given, copied; nothing once the execution has ended.
func TestCompleteWithWhichResult(t *testing.T) {
	layer := newLayer(t)
	var written []string
	write := func(r []byte) error { written = append(written, string(r)); return nil }

	res, st := reserve(t, layer)
	given := []byte("given")
	if err := reservation.CompleteWith(res, layer, given, write); err != nil {
		t.Fatal(err)
	}
	given[0] = 'G' // the caller reuses its slice
	if e := st.InTx(); !e.InTx || !e.Wrote([]byte("given")) || e.Refused != nil {
		t.Fatalf("after a completion with a result: %+v", e)
	}

	res, st = reserve(t, layer)
	if err := st.SetResultFunc(func() ([]byte, error) { return []byte("response"), nil }); err != nil {
		t.Fatal(err)
	}
	if err := st.SetResultFunc(func() ([]byte, error) { return nil, nil }); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("a second result function: %v, want ErrConfig", err)
	}
	if err := reservation.CompleteWith(res, layer, []byte("mine"), write); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("a result beside the result function: %v, want ErrConfig", err)
	}
	if err := reservation.CompleteWith(res, layer, nil, write); err != nil {
		t.Fatal(err)
	}
	e := st.End()
	if !e.Wrote([]byte("response")) || e.Wrote([]byte("mine")) || !errors.Is(e.Refused, idem.ErrConfig) {
		t.Fatalf("the ending: %+v", e)
	}
	if err := reservation.CompleteWith(res, layer, nil, write); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("after the end: %v, want ErrConfig", err)
	}
	if want := []string{"given", "response"}; len(written) != len(want) || written[0] != want[0] || written[1] != want[1] {
		t.Fatalf("written %q, want %q", written, want)
	}
}
