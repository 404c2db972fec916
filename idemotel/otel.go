package idemotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/idemkit/idem/idemotel"

var (
	_ idem.Observer = (*Observer)(nil)
	_ idem.Tracer   = (*Observer)(nil)
)

// Observer records idem's calls as spans and its events as metrics. Give it
// to tiered.WithObserver. It is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer

	calls        metric.Int64Counter
	callDuration metric.Float64Histogram
	events       metric.Int64Counter
	tierDuration metric.Float64Histogram
	workDuration metric.Float64Histogram

	// The attribute sets of every outcome, event kind and tier, built once:
	// a call neither sorts attributes nor allocates options.
	opts attrCache
}

const maxOutcomes, maxKinds, maxTiers = 32, 32, 4

type attrCache struct {
	outcome [maxOutcomes]attribute.KeyValue
	tier    [maxTiers]attribute.KeyValue
	call    [maxOutcomes][maxTiers]metric.MeasurementOption // outcome, tier
	callDur [maxOutcomes]metric.MeasurementOption           // outcome
	event   [maxKinds][maxTiers]metric.MeasurementOption    // event, tier
	byTier  [maxTiers]metric.MeasurementOption              // tier
}

func (a *attrCache) init() {
	for t := range maxTiers {
		a.tier[t] = attribute.String("idem.tier", idem.Tier(t).String())
		a.byTier[t] = metric.WithAttributeSet(attribute.NewSet(a.tier[t]))
	}
	for o := range maxOutcomes {
		a.outcome[o] = attribute.String("idem.outcome", idem.Outcome(o).String())
		a.callDur[o] = metric.WithAttributeSet(attribute.NewSet(a.outcome[o]))
		for t := range maxTiers {
			a.call[o][t] = metric.WithAttributeSet(attribute.NewSet(a.outcome[o], a.tier[t]))
		}
	}
	for k := range maxKinds {
		kind := attribute.String("idem.event", idem.EventKind(k).String())
		for t := range maxTiers {
			a.event[k][t] = metric.WithAttributeSet(attribute.NewSet(kind, a.tier[t]))
		}
	}
}

// in reports whether the indexes fit the cache (they always do for the
// outcomes, kinds and tiers idem defines).
func in(i, n int) bool { return i >= 0 && i < n }

// Option configures an Observer. An option given nonsense makes New fail,
// with an error that says, under the option's name, what to give instead.
type Option func(*config) error

type config struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider sets the TracerProvider. Default: otel's global one
// (otel.GetTracerProvider), a no-op until the application sets one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return errors.New("WithTracerProvider: give a provider, or leave the option out for otel's global one (got nil)")
		}
		c.tp = tp
		return nil
	}
}

// WithMeterProvider sets the MeterProvider. Default: otel's global one
// (otel.GetMeterProvider), a no-op until the application sets one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return errors.New("WithMeterProvider: give a provider, or leave the option out for otel's global one (got nil)")
		}
		c.mp = mp
		return nil
	}
}

// New returns an Observer over the providers the options name (by default
// the global ones, otel.GetTracerProvider and otel.GetMeterProvider). A nil
// provider is an error that wraps idem.ErrConfig.
func New(opts ...Option) (*Observer, error) {
	c := config{tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider()}
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: idemotel: %w", idem.ErrConfig, err)
	}
	o := &Observer{tracer: c.tp.Tracer(ScopeName)}
	o.opts.init()
	m := c.mp.Meter(ScopeName)
	var err error
	add := func(e error) {
		if e != nil && err == nil {
			err = e
		}
	}
	o.calls, err = m.Int64Counter("idem.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls of the Store, by outcome and by the tier that answered."))
	var e error
	o.callDuration, e = m.Float64Histogram("idem.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a call of the Store, by outcome."))
	add(e)
	o.events, e = m.Int64Counter("idem.events", metric.WithUnit("{event}"),
		metric.WithDescription("Events of the Store and its tiers, by kind and tier."))
	add(e)
	o.tierDuration, e = m.Float64Histogram("idem.tier.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a call to a tier (Redis, SQL), by tier."))
	add(e)
	o.workDuration, e = m.Float64Histogram("idem.work.duration", metric.WithUnit("s"),
		metric.WithDescription("How long the guarded work ran, for new executions."))
	add(e)
	if err != nil {
		return nil, fmt.Errorf("idemotel: creating instruments: %w", err)
	}
	return o, nil
}

// StartCall implements idem.Tracer: it starts the call's span.
func (o *Observer) StartCall(ctx context.Context, key idem.Key) (context.Context, func(idem.CallEnd)) {
	ctx, span := o.tracer.Start(ctx, "idem.call", trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("idem.key", key.String()))
	}
	return ctx, func(e idem.CallEnd) {
		oc, t := int(e.Outcome), int(e.Tier)
		if !in(oc, maxOutcomes) || !in(t, maxTiers) {
			oc, t = 0, 0 // "unknown", "none": not an outcome or tier of idem's
		}
		if span.IsRecording() {
			span.SetAttributes(o.opts.outcome[oc], o.opts.tier[t])
			if e.Waited {
				span.SetAttributes(waited)
			}
			if failed(e.Outcome) && e.Err != nil {
				span.RecordError(e.Err)
				span.SetStatus(codes.Error, e.Outcome.String())
			}
		}
		span.End()
		o.calls.Add(ctx, 1, o.opts.call[oc][t])
		o.callDuration.Record(ctx, e.Duration.Seconds(), o.opts.callDur[oc])
	}
}

// waited marks the span of a call that waited for an owner in flight
// before its answer (a replay, as its idem.outcome says).
var waited = attribute.Bool("idem.waited", true)

// failed reports whether an outcome is an error of the Store rather than an
// answer to the client (a mismatch or an in-flight answer is the Store
// doing its job).
func failed(o idem.Outcome) bool {
	switch o {
	case idem.OutcomeUnavailable, idem.OutcomePending, idem.OutcomeLeaseLost,
		idem.OutcomeFailed, idem.OutcomeConfig, idem.OutcomeClosed:
		return true
	}
	return false
}

// Observe implements idem.Observer: an event of the call's span, and a
// count.
func (o *Observer) Observe(ctx context.Context, e idem.Event) {
	k, t := int(e.Kind), int(e.Tier)
	if !in(k, maxKinds) || !in(t, maxTiers) {
		k, t = 0, 0
	}
	switch e.Kind {
	case idem.EventTierCall:
		o.tierDuration.Record(ctx, e.Duration.Seconds(), o.opts.byTier[t])
		return // a span event per tier call would only repeat the client's own spans
	case idem.EventNew:
		o.workDuration.Record(ctx, e.Duration.Seconds(), o.opts.byTier[t])
	}
	o.events.Add(ctx, 1, o.opts.event[k][t])
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := []attribute.KeyValue{o.opts.tier[t]}
		if e.Duration > 0 {
			attrs = append(attrs, attribute.Float64("idem.duration", e.Duration.Seconds()))
		}
		if e.Err != nil {
			attrs = append(attrs, attribute.String("idem.error", e.Err.Error()))
		}
		span.AddEvent("idem."+e.Kind.String(), trace.WithAttributes(attrs...))
	}
}
