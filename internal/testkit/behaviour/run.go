package behaviour

import "testing"

// row is one line of the behaviour table (DESIGN §4).
type row struct {
	name string
	fn   func(t *testing.T, e *env)
}

// rows is the table, in the order of the package documentation.
var rows = []row{
	{"no key passes through", noKeyPassesThrough},
	{"unguarded method untouched", unguardedMethod},
	{"required key missing", requiredKeyMissing},
	{"malformed keys", malformedKeys},
	{"quoted key equals bare", quotedEqualsBare},
	{"derived key", derivedKey},
	{"body over limit", bodyOverLimit},
	{"broken JSON body", brokenJSON},
	{"bodies Go reads differently", goReadsDifferently},
	{"completed replay", completedReplay},
	{"replay marker", replayMarker},
	{"in flight waits for the owner", inFlightWaits},
	{"in flight past the wait", inFlightPastWait},
	{"in flight in this instance past the wait", inFlightHerePastWait},
	{"client gives up", clientGivesUp},
	{"duplicate in this instance gives up", duplicateHereGivesUp},
	{"mismatch", mismatch},
	{"store down", storeDown},
	{"redis down", redisDown},
	{"completion pending", completionPending},
	{"failures release the key", failuresRelease},
	{"panic after the response began", latePanic},
	{"flush is a tombstone", flushTombstone},
	{"oversized response is a tombstone", oversizedTombstone},
	{"hijack is a tombstone", hijackTombstone},
	{"tenants never meet", tenants},
}

// Run runs the behaviour table with the middleware mounted by mount, on
// every backend of Backends. Rows run in parallel; each starts its own
// instances and uses keys of its own.
func Run(t *testing.T, mount Mount) {
	t.Helper()
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			for _, r := range rows {
				t.Run(r.name, func(t *testing.T) {
					t.Parallel()
					r.fn(t, newEnv(t, b, mount))
				})
			}
		})
	}
}
