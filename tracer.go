package idem

import (
	"context"
	"time"
)

// Outcome is how one call of the Store ended, for the caller that made it.
type Outcome uint8

const (
	// OutcomeExecuted: the work ran for this call and its result was kept.
	OutcomeExecuted Outcome = iota + 1
	// OutcomeReplayed: the call did not run the work and got the key's
	// result: a stored one, or that of an execution in flight that it
	// waited for, in this process or on another instance (CallEnd.Waited
	// says whether it waited). A replay ratio is replayed over executed
	// plus replayed.
	OutcomeReplayed
	// OutcomeWaited is no longer reported: a call that waited for an owner
	// in flight and got its result is OutcomeReplayed, with CallEnd.Waited
	// set, so that every replay counts as one.
	//
	// Deprecated: use OutcomeReplayed and CallEnd.Waited.
	OutcomeWaited
	// OutcomeMismatch: the key is bound to another fingerprint.
	OutcomeMismatch
	// OutcomeInFlight: another owner still worked after the wait.
	OutcomeInFlight
	// OutcomeUnavailable: the deciding tier could not answer; the work did
	// not run.
	OutcomeUnavailable
	// OutcomePending: the work ran, but the deciding tier has not accepted
	// its result yet (it is still being completed).
	OutcomePending
	// OutcomeLeaseLost: the work ran, but another owner took the key over.
	OutcomeLeaseLost
	// OutcomeFailed: the work failed or panicked; the key was released.
	OutcomeFailed
	// OutcomeNotReplayable: the work ran once; its result could not be kept.
	OutcomeNotReplayable
	// OutcomeConfig: a configuration error (ErrConfig).
	OutcomeConfig
	// OutcomeCanceled: the caller gave up (its context ended).
	OutcomeCanceled
	// OutcomeClosed: the Store was closed.
	OutcomeClosed
	// OutcomeInvalid: the call itself was invalid (a zero key, no function).
	OutcomeInvalid
)

// String returns the outcome's snake_case name, suitable as a metric label
// or a span attribute.
func (o Outcome) String() string {
	switch o {
	case OutcomeExecuted:
		return "executed"
	case OutcomeReplayed:
		return "replayed"
	case OutcomeWaited:
		return "waited"
	case OutcomeMismatch:
		return "mismatch"
	case OutcomeInFlight:
		return "in_flight"
	case OutcomeUnavailable:
		return "unavailable"
	case OutcomePending:
		return "pending"
	case OutcomeLeaseLost:
		return "lease_lost"
	case OutcomeFailed:
		return "failed"
	case OutcomeNotReplayable:
		return "not_replayable"
	case OutcomeConfig:
		return "config_error"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeClosed:
		return "closed"
	case OutcomeInvalid:
		return "invalid"
	}
	return "unknown"
}

// CallEnd is how a call ended, as a Tracer hears it.
type CallEnd struct {
	// Outcome is the call's outcome.
	Outcome Outcome
	// Tier is where the answer came from (TierLocal for the local cache and
	// shared executions), TierNone when no tier answered.
	Tier Tier
	// Duration is the whole call, from its start to its return.
	Duration time.Duration
	// Err is the error the call returned, nil on success.
	Err error
	// Waited is true when the call waited for an owner in flight, in this
	// process or on another instance, before its answer.
	Waited bool
}

// Tracer is an optional interface of an Observer, for tracing and for
// counting every caller: the Store calls StartCall when a call begins and
// the returned end function once when it returns, whatever the outcome —
// callers that joined another's execution included. The context StartCall
// returns is the call's: the events the Store observes during the call
// carry it, and the work (fn) runs under its values, so a tracer's span
// for the call is the parent of the work's spans and holds the call's
// events (claim, renewal, takeover, completion). It must keep ctx's values
// and add to them only; the Store never takes cancellation from it.
//
// Keys are given whole: a tracer must not record a key's scope or client
// key (they may be sensitive); Key.String or Key.Hex are safe.
type Tracer interface {
	StartCall(ctx context.Context, key Key) (context.Context, func(CallEnd))
}
