package tier

import "testing"

// TestFaultsSkipsOnlyInTheQuickTier checks that Faults skips exactly when
// the fault suites are not compiled in.
func TestFaultsSkipsOnlyInTheQuickTier(t *testing.T) {
	ran := false
	t.Run("probe", func(t *testing.T) {
		Faults(t)
		ran = true
	})
	if ran != FaultsEnabled() {
		t.Fatalf("Faults let the test run = %v, fault suites compiled in = %v", ran, FaultsEnabled())
	}
}
