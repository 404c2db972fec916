// Package idemprom exports idem's calls, events and HTTP answers as
// Prometheus metrics: a Collector that is an idem.Observer and idem.Tracer
// (give it to tiered.WithObserver, alone or in idem.Observers beside others,
// which keeps its Tracer), a middleware.AnswerObserver (give it to
// middleware.WithAnswerObserver) and a prometheus.Collector (register it).
//
// Metrics (namespace configurable, default "idem"):
//
//	idem_calls_total{outcome, tier}            counter: every Store call by outcome
//	                                           (executed, replayed, mismatch,
//	                                           in_flight, unavailable, pending, …) and
//	                                           the tier that answered — callers that
//	                                           joined another's execution included
//	idem_call_duration_seconds{outcome}        histogram: Store calls
//	idem_events_total{event, tier}             counter: executions and replays, waits,
//	                                           claims, renewals, completions,
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
// One vocabulary runs through them: a call's outcome, the event that ends
// it and the middleware's answer share their names ("executed",
// "replayed", "in_flight", "mismatch", …). A duplicate that waited for an
// execution in flight, in this process or on another instance, and got its
// result is "replayed" like any other replay; its wait is counted apart, as
// events_total{event="waited"} and in wait_duration_seconds. The replay
// ratio is therefore
//
//	sum(rate(idem_calls_total{outcome="replayed"}[5m]))
//	  / sum(rate(idem_calls_total{outcome=~"executed|replayed"}[5m]))
//
// Label values come from small fixed sets and status codes: a key never
// becomes a label.
package idemprom
