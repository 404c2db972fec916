// Package idemotel reports idem to OpenTelemetry: a span for every call of
// the Store and metrics through the OTel metric API.
//
//	obs, err := idemotel.New() // the global TracerProvider and MeterProvider
//	store, err := tiered.New(tiered.WithSQL(sqlLayer), tiered.WithObserver(obs))
//
// Beside other observers (idemprom's Collector, say), give the Store their
// fan-out, idem.Observers(collector, obs): it is an idem.Tracer when any
// part is, so the spans and every part's call metrics stay.
//
// Spans. Each call of Store.Do (and Once, and each request the middleware
// guards) is a span named "idem.call", a child of the caller's span — the
// server span of otelhttp, otelgin or otelecho when the request came through
// them — and the parent of the work's own spans. Its attributes say how the
// call ended: idem.outcome (executed, replayed, mismatch, in_flight,
// unavailable, pending, lease_lost, failed, …) and idem.tier (the tier that
// answered: local, redis, sql). A call that waited for an execution in
// flight, in this process or on another instance, and got its result is
// replayed, with idem.waited set to true. The call's events are span
// events named "idem." and the event's name, the names of idem.events:
// executed, replayed, waited, claimed, renewed, takeover, grace,
// completed, released, lease_lost, tier_error and the tiers' fallbacks. A key appears only as idem.key, a prefix of its
// digest (Key.String): never its scope or client key.
//
// Metrics (instrument names follow the OTel semantic conventions' style):
//
//	idem.calls            counter    calls by idem.outcome and idem.tier
//	idem.call.duration    histogram  seconds per call, by idem.outcome
//	idem.events           counter    events by idem.event and idem.tier
//	idem.tier.duration    histogram  seconds per call to a tier, by idem.tier
//	idem.work.duration    histogram  seconds the work ran, for new executions
//
// No label ever holds a key, so cardinality stays bounded.
package idemotel
