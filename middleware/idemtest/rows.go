package idemtest

import "testing"

// row is one line of the behaviour table.
type row struct {
	name      string
	fn        func(t *testing.T, e *env)
	bothTiers bool // the row needs a Redis tier and a SQL tier
}

// rows is the table, in the order of the package documentation.
var rows = []row{
	{name: "no key passes through", fn: noKeyPassesThrough},
	{name: "unguarded method untouched", fn: unguardedMethod},
	{name: "required key missing", fn: requiredKeyMissing},
	{name: "malformed keys", fn: malformedKeys},
	{name: "quoted key equals bare", fn: quotedEqualsBare},
	{name: "derived key", fn: derivedKey},
	{name: "body over limit", fn: bodyOverLimit},
	{name: "broken JSON body", fn: brokenJSON},
	{name: "bodies Go reads differently", fn: goReadsDifferently},
	{name: "completed replay", fn: completedReplay},
	{name: "replay marker", fn: replayMarker},
	{name: "in flight waits for the owner", fn: inFlightWaits},
	{name: "in flight past the wait", fn: inFlightPastWait},
	{name: "in flight in this instance past the wait", fn: inFlightHerePastWait},
	{name: "client gives up", fn: clientGivesUp},
	{name: "duplicate in this instance gives up", fn: duplicateHereGivesUp},
	{name: "mismatch", fn: mismatch},
	{name: "store down", fn: storeDown},
	{name: "redis down", fn: redisDown, bothTiers: true},
	{name: "completion pending", fn: completionPending},
	{name: "failures release the key", fn: failuresRelease},
	{name: "panic after the response began", fn: latePanic},
	{name: "flush is a tombstone", fn: flushTombstone},
	{name: "oversized response is a tombstone", fn: oversizedTombstone},
	{name: "hijack is a tombstone", fn: hijackTombstone},
	{name: "a scope is required", fn: scopeRequired},
	{name: "tenants never meet", fn: tenants},
	{name: "no principal is refused", fn: noPrincipal},
	{name: "a derived key is scoped", fn: derivedKeyScoped},
	// The handler-ending table (Endings) beyond the rows above.
	{name: "ending: writes nothing", fn: writesNothing},
	{name: "ending: an empty 200 on purpose", fn: emptyOnPurpose},
	{name: "ending: reads its key only", fn: keyOnly},
	{name: "ending: headers changed after WriteHeader", fn: lateHeaders},
	{name: "ending: writes, then panics", fn: writeThenPanic},
	{name: "ending: runtime.Goexit", fn: goexit},
	{name: "ending: longer than the lease", fn: longerThanLease},
	{name: "ending: longer than the retention", fn: longerThanRetention},
}
