//go:build failpoints

package node

import (
	"os"
	"testing"
)

// TestFailpointFiresOnceForItsService checks the test build's failpoints:
// set for a service, one fires the first time that service's step reaches
// it, writes the data directory into its marker, and never fires again.
func TestFailpointFiresOnceForItsService(t *testing.T) {
	marker := t.TempDir() + "/fired"
	t.Setenv(FailpointKillAfterRan, "s:"+marker)
	f := failpointFromEnv(FailpointKillAfterRan)
	if f.fires("other", "dir") {
		t.Fatal("fired for another service")
	}
	if !f.fires("s", "dir") {
		t.Fatal("did not fire for its service")
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "dir\n" {
		t.Fatalf("marker = %q, %v; want the data directory", b, err)
	}
	if f.fires("s", "dir") {
		t.Fatal("fired twice")
	}
}
