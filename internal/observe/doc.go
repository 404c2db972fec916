// Package observe hands a Store's observer down to the layers and the
// janitor it calls, through the context of each call, so that they report
// what only they see (a takeover, a grace, a sweep) to the observer the
// user gave the Store. It is the Store's conversation with its parts, not
// a user's: a layer used without a Store takes an observer of its own
// (sqllayer.WithObserver, janitor.WithObserver).
package observe
