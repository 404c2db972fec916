// Package idemprom exports idem's events as Prometheus metrics: a Collector
// that is both an idem.Observer (give it to tiered.WithObserver) and a
// prometheus.Collector (register it with a registry).
//
// Metrics (namespace configurable, default "idem"):
//
//	idem_events_total{event, tier}            counter: every event — new runs, replays
//	                                          per tier, waits, in-flight answers,
//	                                          mismatches, lease losses, tier errors,
//	                                          fallbacks on and off, releases
//	idem_work_duration_seconds{tier}          histogram: how long the work ran (new runs)
//	idem_wait_duration_seconds{tier}          histogram: how long duplicates waited
//
// Hits are replays, misses are new runs, locks are in-flight answers and
// waits, expiries are lease losses.
package idemprom
