//go:build race

package fingerprint

// raceEnabled is true when the race detector is on; it slows byte loops
// twentyfold, so the largest tests scan less under it.
const raceEnabled = true
