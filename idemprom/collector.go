package idemprom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
)

var (
	_ idem.Observer             = (*Collector)(nil)
	_ idem.Tracer               = (*Collector)(nil)
	_ middleware.AnswerObserver = (*Collector)(nil)
	_ prometheus.Collector      = (*Collector)(nil)
)

// Collector counts idem's calls, events and HTTP answers. It is safe for
// concurrent use. No label ever holds a key: label values come from small
// fixed sets (outcomes, tiers, event kinds, problems) and status codes.
type Collector struct {
	calls    *prometheus.CounterVec
	callTime *prometheus.HistogramVec
	events   *prometheus.CounterVec
	tierTime *prometheus.HistogramVec
	work     *prometheus.HistogramVec
	wait     *prometheus.HistogramVec
	fallback *prometheus.GaugeVec
	swept    prometheus.Counter
	answers  *prometheus.CounterVec
	end      func(idem.CallEnd) // endCall, bound once

	callSeries  seriesCache[callSeries]
	eventSeries seriesCache[prometheus.Counter]
	// timeSeries: tier_duration_seconds by (0 ok, 1 error), then
	// work_duration_seconds (2) and wait_duration_seconds (3), by tier.
	timeSeries seriesCache[prometheus.Observer]
}

// callSeries are the series one call's end updates.
type callSeries struct {
	count prometheus.Counter
	time  prometheus.Observer
}

// Option configures a Collector. An option given nonsense makes New fail,
// with an error that says, under the option's name, what to give instead.
type Option func(*config) error

type config struct {
	namespace string
	buckets   []float64
}

// WithNamespace sets the metric namespace, the prefix of every metric name.
// Default "idem". "" is no namespace (the names start at "events_total").
// A namespace is letters, digits, underscores and colons, not starting with
// a digit; any other is an error.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		if !validNamespace(ns) {
			return fmt.Errorf("WithNamespace: give letters, digits, underscores and colons, not starting with a digit (got %q)", ns)
		}
		c.namespace = ns
		return nil
	}
}

func validNamespace(ns string) bool {
	for i, r := range ns {
		ok := r == '_' || r == ':' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// WithBuckets sets the upper bounds of the histograms' buckets, in seconds,
// in strictly increasing order (a +Inf bucket is always added). Default
// prometheus.DefBuckets (5 ms to 10 s). No buckets, a NaN or bounds out of
// order are an error.
func WithBuckets(b ...float64) Option {
	return func(c *config) error {
		if len(b) == 0 {
			return errors.New("WithBuckets: give at least one bound, or leave the option out for the default (got none)")
		}
		for i, v := range b {
			if math.IsNaN(v) || i > 0 && v <= b[i-1] {
				return fmt.Errorf("WithBuckets: give bounds in strictly increasing order (got %v)", b)
			}
		}
		c.buckets = append([]float64(nil), b...)
		return nil
	}
}

// New returns a Collector; register it with a prometheus.Registerer, pass
// it to tiered.WithObserver, and to middleware.WithAnswerObserver for the
// middleware's answers. Options given nonsense make it fail with one error
// that names each of them and wraps idem.ErrConfig.
func New(opts ...Option) (*Collector, error) {
	cfg := config{namespace: "idem", buckets: prometheus.DefBuckets}
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: idemprom: %w", idem.ErrConfig, err)
	}
	ns, b := cfg.namespace, cfg.buckets
	c := &Collector{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "calls_total",
			Help: "Store calls by outcome (executed, replayed, mismatch, in_flight, unavailable, pending, lease_lost, failed, not_replayable, config_error, canceled, closed, invalid) and the tier that answered; every caller counts, and a caller that waited for an execution in flight and got its result is replayed.",
		}, []string{"outcome", "tier"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "call_duration_seconds",
			Help: "How long Store calls took, by outcome.", Buckets: b,
		}, []string{"outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "events_total",
			Help: "idem events by kind and tier (executed, replayed, waited, in_flight, mismatch, lease_lost, takeover, tier_error, fallback_on, fallback_off, released, claimed, renewed, completed, grace, swept); tier latencies are in tier_duration_seconds.",
		}, []string{"event", "tier"}),
		tierTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "tier_duration_seconds",
			Help: "Latency of each call the Store made to a tier, by tier and result (ok, error).", Buckets: b,
		}, []string{"tier", "result"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "work_duration_seconds",
			Help: "How long the guarded work ran, for new runs.", Buckets: b,
		}, []string{"tier"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "wait_duration_seconds",
			Help: "How long duplicates waited for an owner in flight, in this process (tier local) or on another instance, before their replay.", Buckets: b,
		}, []string{"tier"}),
		fallback: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "fallback",
			Help: "1 while the Store skips a tier after repeated failures (Redis switched off), else 0.",
		}, []string{"tier"}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "janitor_deleted_rows_total",
			Help: "Expired rows the janitor deleted.",
		}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "http_answers_total",
			Help: "The HTTP middleware's answers by kind (passed, executed, replayed, problem), problem (key_missing, key_malformed, body_invalid, body_too_large, in_flight, mismatch, unavailable, not_replayable, scope_missing, failed; empty for the other kinds) and status code (empty for passed).",
		}, []string{"answer", "problem", "code"}),
	}
	c.end = c.endCall
	return c, nil
}

// Observe implements idem.Observer.
func (c *Collector) Observe(_ context.Context, e idem.Event) {
	tier := e.Tier.String() // a constant: no allocation
	switch e.Kind {
	case idem.EventTierCall:
		result, failed := "ok", 0
		if e.Err != nil {
			result, failed = "error", 1
		}
		c.timeSeries.load(failed, int(e.Tier), func() prometheus.Observer {
			return c.tierTime.WithLabelValues(tier, result)
		}).Observe(e.Duration.Seconds())
		return // counted by the histogram
	case idem.EventNew:
		c.timeSeries.load(2, int(e.Tier), func() prometheus.Observer {
			return c.work.WithLabelValues(tier)
		}).Observe(e.Duration.Seconds())
	case idem.EventWaited:
		c.timeSeries.load(3, int(e.Tier), func() prometheus.Observer {
			return c.wait.WithLabelValues(tier)
		}).Observe(e.Duration.Seconds())
	case idem.EventFallbackOn:
		c.fallback.WithLabelValues(tier).Set(1)
	case idem.EventFallbackOff:
		c.fallback.WithLabelValues(tier).Set(0)
	case idem.EventSwept:
		c.swept.Add(float64(e.N))
	}
	c.eventSeries.load(int(e.Kind), int(e.Tier), func() prometheus.Counter {
		return c.events.WithLabelValues(e.Kind.String(), tier)
	}).Inc()
}

// StartCall implements idem.Tracer: the Store calls it for every caller,
// so that calls_total counts each one by its outcome. It neither
// allocates nor changes ctx.
func (c *Collector) StartCall(ctx context.Context, _ idem.Key) (context.Context, func(idem.CallEnd)) {
	return ctx, c.end
}

func (c *Collector) endCall(e idem.CallEnd) {
	s := c.callSeries.load(int(e.Outcome), int(e.Tier), func() callSeries {
		outcome := e.Outcome.String()
		return callSeries{c.calls.WithLabelValues(outcome, e.Tier.String()), c.callTime.WithLabelValues(outcome)}
	})
	s.count.Inc()
	s.time.Observe(e.Duration.Seconds())
}

// ObserveAnswer implements middleware.AnswerObserver: give the Collector to
// middleware.WithAnswerObserver to count the middleware's answers.
func (c *Collector) ObserveAnswer(_ *http.Request, a middleware.Answer) {
	code := ""
	if a.Status > 0 {
		code = strconv.Itoa(a.Status)
	}
	c.answers.WithLabelValues(a.Kind.String(), a.Problem, code).Inc()
}

func (c *Collector) each(f func(prometheus.Collector)) {
	f(c.calls)
	f(c.callTime)
	f(c.events)
	f(c.tierTime)
	f(c.work)
	f(c.wait)
	f(c.fallback)
	f(c.swept)
	f(c.answers)
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.each(func(m prometheus.Collector) { m.Describe(ch) })
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.each(func(m prometheus.Collector) { m.Collect(ch) })
}
