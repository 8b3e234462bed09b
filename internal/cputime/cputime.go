// Package cputime reads the CPU time this process has used, for
// benchmarks that report what an operation costs in CPU rather than in
// wall time (a hop's CPU, summed over both ends of a request, is the
// figure the targets in docs/benchmarks.md are set in).
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Used returns the user and system CPU time this process has used so far,
// all threads together.
func Used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReportPerOp adds the metric cpu-ns/op to b: the process's CPU time since
// start divided by b.N. Call it after the benchmark loop, with start read
// by Used just before it; work done outside the loop by other goroutines
// of the process (a server's handlers, its I/O loops) is counted, which is
// the point.
func ReportPerOp(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(Used()-start)/float64(b.N), "cpu-ns/op")
	}
}
