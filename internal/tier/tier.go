// Package tier sorts the test suite into its two tiers.
//
// `go test ./...` is the quick tier: unit and scripted tests, loopback
// libp2p hosts and a smoke test of real bedwe processes, a few minutes on
// two cores. `go test -tags faults ./...` adds the fault suites: chaos runs
// that SIGKILL and SIGSTOP real processes, network-namespace partitions,
// failpoint scenarios and other tests that take tens of seconds each. A
// fault-suite test calls [Faults] first; in the quick tier it is skipped
// with one line saying how to run it.
package tier

import "testing"

// Faults skips t unless the test binary was built with -tags faults.
func Faults(t testing.TB) {
	t.Helper()
	if !faults {
		t.Skip("fault suite: run with go test -tags faults")
	}
}

// FaultsEnabled reports whether the fault suites are compiled in, for
// tests that shrink rather than skip in the quick tier.
func FaultsEnabled() bool { return faults }
