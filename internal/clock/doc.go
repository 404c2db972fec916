// Package clock is the application's wall clock, with a test hook that
// skews it.
//
// Production code reads the time of day through [Now] wherever a reading
// may be compared with a time another machine produced (a record's expiry
// by the store's clock, say). Left alone, Now is time.Now. A reliability
// test skews it with [Skew] to play an application whose system clock is
// off against the database's: the skew moves the wall-clock reading and,
// since it is applied with time.Time.Add, the monotonic reading with it.
// So durations between two readings under the same skew are unaffected,
// and comparisons between them (which Go makes on the monotonic readings)
// too, while a comparison with a time from elsewhere — which has no
// monotonic reading, and is compared by the wall clock — sees the skew:
// exactly what a clock that is off does to a Go program.
//
// One difference with a real clock: a real clock that is stepped leaves
// the monotonic reading alone, whereas changing the skew moves it for the
// readings after the change. A duration measured from a reading before a
// change to one after it includes the change. So production code measures
// durations with time.Now and keeps Now for readings that leave the
// process: today the lease and expiry times redislayer writes into a
// record for its readers. Everything the Store decides is decided by the
// store's clock (leases, expiries) or by durations (Record.ExpiresIn), so
// a skew changes none of it; the soak skews live processes to prove it.
//
// The skew is one atomic word, read once per call; Now costs what time.Now
// costs, plus an addition when a skew is set.
package clock
