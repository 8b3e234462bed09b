//go:build !failpoints

package node

import "testing"

// TestReleasedBuildIgnoresFailpoints checks that a build without the
// failpoints tag reads no failpoint from the environment and fires none:
// a user who sets BEDWE_FAILPOINT_* on a released node changes nothing.
func TestReleasedBuildIgnoresFailpoints(t *testing.T) {
	marker := t.TempDir() + "/fired"
	t.Setenv(FailpointKillAfterRan, "s:"+marker)
	f := failpointFromEnv(FailpointKillAfterRan)
	if f != (failpoint{}) {
		t.Fatalf("failpointFromEnv = %+v, want unset", f)
	}
	if (failpoint{FailpointKillAfterRan, "s", marker}).fires("s", t.TempDir()) {
		t.Fatal("a failpoint fired in a build without the failpoints tag")
	}
}
