package idem_test

import (
	"context"
	"slices"
	"testing"

	"github.com/idemkit/idem"
)

// markTracer is a Tracer that marks the call's context with its name, and
// writes down, in one shared log, what each start saw and each end heard.
type markTracer struct {
	name string
	log  *[]string
}

type markKey string

func (m markTracer) Observe(context.Context, idem.Event) {}

func (m markTracer) StartCall(ctx context.Context, _ idem.Key) (context.Context, func(idem.CallEnd)) {
	seen := ""
	for _, other := range []string{"a", "b", "c"} {
		if ctx.Value(markKey(other)) != nil {
			seen += other
		}
	}
	*m.log = append(*m.log, "start "+m.name+" under ["+seen+"]")
	return context.WithValue(ctx, markKey(m.name), true), func(e idem.CallEnd) {
		*m.log = append(*m.log, "end "+m.name+" "+e.Outcome.String())
	}
}

// A fan-out is a Tracer when any part is, and only then: it starts the
// call on every tracing part, each nested in the previous one's context,
// hands back a context carrying all of them, and ends each once, innermost
// first.
func TestObserversKeepTracer(t *testing.T) {
	plain := idem.ObserverFunc(func(context.Context, idem.Event) {})
	if _, ok := idem.Observers(plain, nil, plain).(idem.Tracer); ok {
		t.Fatal("a fan-out of plain observers is a Tracer: a Store would trace for nothing")
	}
	var log []string
	a, b := markTracer{"a", &log}, markTracer{"b", &log}
	if _, ok := idem.Observers(plain, a).(idem.Tracer); !ok {
		t.Fatal("a fan-out with one tracing part is not a Tracer")
	}

	fan := idem.Observers(plain, a, nil, plain, b)
	tr, ok := fan.(idem.Tracer)
	if !ok {
		t.Fatal("a fan-out of two tracers is not a Tracer: both lose every call")
	}
	ctx, end := tr.StartCall(t.Context(), idem.NewKey("s", "k"))
	if ctx.Value(markKey("a")) == nil || ctx.Value(markKey("b")) == nil {
		t.Fatal("the call's context does not carry both tracers' values")
	}
	end(idem.CallEnd{Outcome: idem.OutcomeExecuted})
	want := []string{"start a under []", "start b under [a]", "end b executed", "end a executed"}
	if !slices.Equal(log, want) {
		t.Fatalf("log %q, want %q", log, want)
	}

	// Nested fan-outs keep it too.
	log = nil
	c := markTracer{"c", &log}
	tr, ok = idem.Observers(idem.Observers(plain, a), idem.Observers(b, c)).(idem.Tracer)
	if !ok {
		t.Fatal("a fan-out of fan-outs is not a Tracer")
	}
	_, end = tr.StartCall(t.Context(), idem.NewKey("s", "k"))
	end(idem.CallEnd{Outcome: idem.OutcomeReplayed})
	want = []string{"start a under []", "start b under [a]", "start c under [ab]", "end c replayed", "end b replayed", "end a replayed"}
	if !slices.Equal(log, want) {
		t.Fatalf("nested: log %q, want %q", log, want)
	}

	// Events still reach every part.
	var n int
	count := idem.ObserverFunc(func(context.Context, idem.Event) { n++ })
	idem.Observers(count, a, count).Observe(t.Context(), idem.Event{Kind: idem.EventNew})
	if n != 2 {
		t.Fatalf("fan-out delivered %d events, want 2", n)
	}
}
