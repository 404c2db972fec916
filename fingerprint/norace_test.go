//go:build !race

package fingerprint

// raceEnabled is true when the race detector is on.
const raceEnabled = false
