// Package faultlayer wraps an idem.Layer for tests: it counts calls per
// method and injects faults (a dead tier, a slow tier, refused renewals)
// that tests switch on and off while calls are in flight. Layer.Atomic
// passes an atomic execution (tiered.AtomicLayer) through to a layer that
// runs one, with the claim's and the completion's faults.
package faultlayer
