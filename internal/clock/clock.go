package clock

import (
	"sync/atomic"
	"time"
)

// offset is the skew in nanoseconds; 0 when none is set.
var offset atomic.Int64

// Now returns the current time, shifted by the skew set with Skew (none
// by default: then it is time.Now). The result keeps its monotonic
// reading, shifted by the same skew.
func Now() time.Time {
	t := time.Now()
	if d := offset.Load(); d != 0 {
		return t.Add(time.Duration(d))
	}
	return t
}

// Since returns the time elapsed since t by Now: Now().Sub(t).
func Since(t time.Time) time.Duration { return Now().Sub(t) }

// Skew sets how far Now runs ahead of the real clock (behind it when d is
// negative) from now on, for every goroutine; 0 removes the skew. It is a
// test hook: production code never calls it.
func Skew(d time.Duration) { offset.Store(int64(d)) }

// Offset returns the skew Skew last set, 0 when none.
func Offset() time.Duration { return time.Duration(offset.Load()) }
