//go:build !linux

package sqllayer_test

import "testing"

// cpuMeter reports nothing where the processor time of the server's
// processes cannot be read.
type cpuMeter struct{}

func startCPU(*testing.B) *cpuMeter { return &cpuMeter{} }

func (*cpuMeter) stop(*testing.B) {}
