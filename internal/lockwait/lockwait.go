package lockwait

import (
	"context"
	"time"
)

type untilKey struct{}

// With returns ctx carrying until, the instant a claim made in ctx stops
// waiting for a lock on its key. It adds nothing (and allocates nothing)
// when ctx's own deadline comes first: that bounds the wait already.
func With(ctx context.Context, until time.Time) context.Context {
	if dl, ok := ctx.Deadline(); ok && !until.Before(dl) {
		return ctx
	}
	return context.WithValue(ctx, untilKey{}, until)
}

// Bound returns how long a claim made in ctx now may wait for a lock: at
// most three quarters of what is left until ctx's deadline (so that the
// claim learns of the lock before its deadline cuts it off), and no
// longer than until, if ctx carries one (see With). ok is false when ctx
// has neither: the claim waits as the database makes it.
func Bound(ctx context.Context) (wait time.Duration, ok bool) {
	now := time.Now()
	if dl, has := ctx.Deadline(); has {
		wait, ok = dl.Sub(now)*3/4, true
	}
	if u, has := ctx.Value(untilKey{}).(time.Time); has {
		if left := u.Sub(now); !ok || left < wait {
			wait, ok = left, true
		}
	}
	return max(wait, 0), ok
}
