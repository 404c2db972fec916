package idem

import (
	"context"
	"fmt"
	"time"
)

// Tier names where a decision or a replay came from.
type Tier uint8

const (
	// TierNone means no tier answered (an error before any tier, or work run
	// without a decision under FailOpen).
	TierNone Tier = iota
	// TierLocal is the in-process burst collapse and local cache.
	TierLocal
	// TierRedis is the Redis layer.
	TierRedis
	// TierSQL is the SQL layer (or whichever layer the Store was given
	// with WithSQL: the deciding tier).
	TierSQL
)

// String returns the tier's lower-case name.
func (t Tier) String() string {
	switch t {
	case TierLocal:
		return "local"
	case TierRedis:
		return "redis"
	case TierSQL:
		return "sql"
	}
	return "none"
}

// MarshalText returns the tier's name, as String does, so that a Tier
// reads "redis" in JSON (a readiness report) rather than a number. A value
// that is no tier is an error.
func (t Tier) MarshalText() ([]byte, error) {
	if t > TierSQL {
		return nil, fmt.Errorf("idem: %d is not a tier", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText sets t to the tier MarshalText names ("none", "local",
// "redis", "sql"); any other text is an error.
func (t *Tier) UnmarshalText(b []byte) error {
	for v := TierNone; v <= TierSQL; v++ {
		if string(b) == v.String() {
			*t = v
			return nil
		}
	}
	return fmt.Errorf("idem: %q is not a tier", b)
}

// EventKind says what happened in an Event.
type EventKind uint8

const (
	// EventNew ("executed"): the key was claimed and the work ran
	// (Duration: the work). Its call ends with OutcomeExecuted.
	EventNew EventKind = iota + 1
	// EventReplay ("replayed"): a result was returned without running the
	// work (Tier: where it was found), a stored one or that of an execution
	// the caller waited for. Its call ends with OutcomeReplayed.
	EventReplay
	// EventWaited: a duplicate waited for an owner in flight, in this
	// process (Tier: TierLocal) or on another instance, and got its result
	// (Duration: the wait). An EventReplay of the same call follows: the
	// wait is how the replay came, not another answer.
	EventWaited
	// EventInFlight: a duplicate gave up waiting (ErrInFlight).
	EventInFlight
	// EventMismatch: the key is bound to another fingerprint (ErrMismatch).
	EventMismatch
	// EventLeaseLost: the owner lost its lease while working or completing.
	EventLeaseLost
	// EventTakeover: an expired claim was taken over with a new token.
	EventTakeover
	// EventTierError: a tier failed (Err) and the call went on without it or
	// failed closed.
	EventTierError
	// EventFallbackOn: a tier is skipped after repeated failures (Tier).
	EventFallbackOn
	// EventFallbackOff: a skipped tier answered again and is used again.
	EventFallbackOff
	// EventReleased: a claim was released after failed work, so a retry runs.
	EventReleased
	// EventClaimed: a tier claimed the key for this call (Tier: which).
	EventClaimed
	// EventRenewed: the owner renewed its lease (Tier: the deciding tier).
	EventRenewed
	// EventCompleted: the deciding tier accepted the result (Duration: from
	// the end of the work to the acceptance).
	EventCompleted
	// EventGrace: a layer found a lapsed lease and gave its owner a grace
	// before anyone may take it over.
	EventGrace
	// EventTierCall: a call to a tier returned (Tier, Duration: its latency;
	// Err when it failed). Only a Store with an observer measures it.
	EventTierCall
	// EventSwept: a janitor deleted expired rows (N: how many; Duration:
	// the sweep).
	EventSwept
)

// String returns the kind's snake_case name, suitable as a metric label.
// The names of the kinds that end a call are those of the call's Outcome:
// "executed", "replayed", "in_flight", "mismatch", "lease_lost".
func (k EventKind) String() string {
	switch k {
	case EventNew:
		return "executed"
	case EventReplay:
		return "replayed"
	case EventWaited:
		return "waited"
	case EventInFlight:
		return "in_flight"
	case EventMismatch:
		return "mismatch"
	case EventLeaseLost:
		return "lease_lost"
	case EventTakeover:
		return "takeover"
	case EventTierError:
		return "tier_error"
	case EventFallbackOn:
		return "fallback_on"
	case EventFallbackOff:
		return "fallback_off"
	case EventReleased:
		return "released"
	case EventClaimed:
		return "claimed"
	case EventRenewed:
		return "renewed"
	case EventCompleted:
		return "completed"
	case EventGrace:
		return "grace"
	case EventTierCall:
		return "tier_call"
	case EventSwept:
		return "swept"
	}
	return "unknown"
}

// Event is one observation. Key is the key concerned (zero for tier-wide
// events such as fallbacks); log it with Key.String, which is redacted.
type Event struct {
	Kind     EventKind
	Tier     Tier
	Key      Key
	Duration time.Duration
	Err      error
	// N is a count, for the events that have one (EventSwept: rows).
	N int64
}

// Observer receives events. Observe is called synchronously on the hot path
// and from several goroutines at once: it must be fast and safe for
// concurrent use. A nil Observer costs one comparison.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Observers fans events out to each non-nil observer in order. It returns nil
// when none is left, so callers keep the nil fast path, and the observer
// itself when only one is left.
//
// The fan-out keeps the optional interface Tracer: when any observer given
// implements it, so does the result, and only then (a Store traces its
// calls only when its observer is a Tracer). Its StartCall starts the call
// on each Tracer in order, each under the context the previous one
// returned (a span of the second is a child of the first's), and its end
// function ends them in reverse order, each once. So a Prometheus collector
// and an OpenTelemetry observer combined still count every call and open
// its span.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	var tracers []Tracer
	for _, o := range obs {
		if o == nil {
			continue
		}
		list = append(list, o)
		if t, ok := o.(Tracer); ok {
			tracers = append(tracers, t)
		}
	}
	switch {
	case len(list) == 0:
		return nil
	case len(list) == 1:
		return list[0]
	case len(tracers) > 0:
		return multiTracer{multiObserver: list, tracers: tracers}
	}
	return list
}

// multiObserver is a fan-out of observers none of which is a Tracer.
type multiObserver []Observer

func (m multiObserver) Observe(ctx context.Context, e Event) {
	for _, o := range m {
		o.Observe(ctx, e)
	}
}

// multiTracer is a fan-out of observers some of which (tracers, in the
// same order) are Tracers.
type multiTracer struct {
	multiObserver
	tracers []Tracer
}

var _ Tracer = multiTracer{}

// StartCall implements Tracer: it starts the call on every tracer, nesting
// each one's context in the previous one's, and returns the innermost.
func (m multiTracer) StartCall(ctx context.Context, key Key) (context.Context, func(CallEnd)) {
	if len(m.tracers) == 1 {
		return m.tracers[0].StartCall(ctx, key)
	}
	ends := make([]func(CallEnd), len(m.tracers))
	for i, t := range m.tracers {
		ctx, ends[i] = t.StartCall(ctx, key)
	}
	return ctx, func(e CallEnd) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](e)
		}
	}
}

// observerKey is the context key of ContextWithObserver.
type observerKey struct{}

// ContextWithObserver returns ctx carrying o: the observer of the calls
// made with ctx on a layer or a janitor used without a Store (a consumer's
// sqllayer.MarkProcessed, a janitor's Sweep). A Store hands its own observer
// to its layers and janitor the same way, with each call it makes.
func ContextWithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// ObserverFrom returns the observer ctx carries, or nil: what a Layer of
// the user's own reports its events to.
func ObserverFrom(ctx context.Context) Observer {
	o, _ := ctx.Value(observerKey{}).(Observer)
	return o
}
