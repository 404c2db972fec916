package idemprom

import (
	"context"

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

// Option configures a Collector.
type Option func(*config)

type config struct {
	namespace string
	buckets   []float64
}

// WithNamespace sets the metric namespace. Default "idem".
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithBuckets sets the histogram buckets in seconds. Default
// prometheus.DefBuckets (5 ms to 10 s).
func WithBuckets(b ...float64) Option { return func(c *config) { c.buckets = b } }

// New returns a Collector; register it with a prometheus.Registerer and pass
// it to tiered.WithObserver.
func New(opts ...Option) *Collector {
	cfg := config{namespace: "idem", buckets: prometheus.DefBuckets}
	for _, o := range opts {
		o(&cfg)
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
	}
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
