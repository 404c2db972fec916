package idemprom

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
)

var (
	_ idem.Observer        = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// Collector counts idem events. It is safe for concurrent use.
type Collector struct {
	events *prometheus.CounterVec
	work   *prometheus.HistogramVec
	wait   *prometheus.HistogramVec
}

// Option configures a Collector. An option given nonsense makes New fail.
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
			return fmt.Errorf("WithNamespace(%q): want letters, digits, underscores and colons, not starting with a digit", ns)
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
			return errors.New("WithBuckets(): no buckets (leave the option out for the default)")
		}
		for i, v := range b {
			if math.IsNaN(v) || i > 0 && v <= b[i-1] {
				return fmt.Errorf("WithBuckets(%v): want bounds in strictly increasing order", b)
			}
		}
		c.buckets = append([]float64(nil), b...)
		return nil
	}
}

// New returns a Collector; register it with a prometheus.Registerer and pass
// it to tiered.WithObserver. Options given nonsense make it fail with one
// error that names each of them and wraps idem.ErrConfig.
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
	return &Collector{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: cfg.namespace, Name: "events_total",
			Help: "idem events by kind and tier (new, replay, waited, in_flight, mismatch, lease_lost, tier_error, fallback_on, fallback_off, released, takeover).",
		}, []string{"event", "tier"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: cfg.namespace, Name: "work_duration_seconds",
			Help: "How long the guarded work ran, for new runs.", Buckets: cfg.buckets,
		}, []string{"tier"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: cfg.namespace, Name: "wait_duration_seconds",
			Help: "How long duplicates waited for an in-flight owner.", Buckets: cfg.buckets,
		}, []string{"tier"}),
	}, nil
}

// Observe implements idem.Observer.
func (c *Collector) Observe(_ context.Context, e idem.Event) {
	tier := e.Tier.String()
	c.events.WithLabelValues(e.Kind.String(), tier).Inc()
	switch e.Kind {
	case idem.EventNew:
		c.work.WithLabelValues(tier).Observe(e.Duration.Seconds())
	case idem.EventWaited:
		c.wait.WithLabelValues(tier).Observe(e.Duration.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.events.Describe(ch)
	c.work.Describe(ch)
	c.wait.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.events.Collect(ch)
	c.work.Collect(ch)
	c.wait.Collect(ch)
}
