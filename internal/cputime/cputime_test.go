package cputime

import (
	"testing"
	"time"
)

// TestUsedCountsThisProcessesWork burns CPU until Used has advanced by
// 20 ms: a Used that returns a constant (or wall time stopped) never gets
// there and the test fails at its deadline.
func TestUsedCountsThisProcessesWork(t *testing.T) {
	start := Used()
	if start <= 0 {
		t.Fatalf("Used() = %v at the start of a test process", start)
	}
	deadline := time.Now().Add(10 * time.Second)
	x := uint64(1)
	for Used()-start < 20*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("Used advanced %v in 10 s of busy work", Used()-start)
		}
		for i := range 100000 {
			x = x*6364136223846793005 + uint64(i)
		}
	}
	if x == 0 {
		t.Log(x) // keeps the loop from being optimised away
	}
}
