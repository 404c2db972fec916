// Package idemprom exports idem's calls, events and HTTP answers as
// Prometheus metrics: a Collector that is an idem.Observer and idem.Tracer
// (give it to tiered.WithObserver, alone or in idem.Observers beside others,
// which keeps its Tracer), a middleware.AnswerObserver (give it to
// middleware.WithAnswerObserver) and a prometheus.Collector (register it).
//
// Metrics (namespace configurable, default "idem"):
//
//	idem_calls_total{outcome, tier}            counter: every Store call by outcome
//	                                           (executed, replayed, waited, mismatch,
//	                                           in_flight, unavailable, pending, …) and
//	                                           the tier that answered — callers that
//	                                           joined another's execution included
//	idem_call_duration_seconds{outcome}        histogram: Store calls
//	idem_events_total{event, tier}             counter: claims, renewals, completions,
//	                                           takeovers, graces, lease losses, tier
//	                                           errors, fallbacks, releases, sweeps
//	idem_tier_duration_seconds{tier, result}   histogram: each call to a tier (ok, error)
//	idem_work_duration_seconds{tier}           histogram: how long the work ran
//	idem_wait_duration_seconds{tier}           histogram: how long duplicates waited
//	idem_fallback{tier}                        gauge: 1 while a tier is switched off
//	idem_janitor_deleted_rows_total            counter: expired rows the janitor deleted
//	idem_http_answers_total{answer, problem, code}
//	                                           counter: the middleware's answers —
//	                                           passed, executed, replayed, or its own
//	                                           problems (key_missing, mismatch, …) by
//	                                           status code
//
// Label values come from small fixed sets and status codes: a key never
// becomes a label. Hits are replays, misses are executions, locks are
// in-flight answers and waits.
package idemprom
