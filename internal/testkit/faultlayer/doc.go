// Package faultlayer wraps an idem.Layer for tests: it counts calls per
// method and injects faults (a dead tier, a slow tier, refused renewals)
// that tests switch on and off while calls are in flight.
package faultlayer
