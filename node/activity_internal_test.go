package node

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// With nothing held, activity.json's loop sleeps until told of a change
// (touchActivity): only new work or a drain can change the file, and
// those tell it. A loop that ticked every second would wake every node,
// busy or not.
func TestActivityLoopSleepsWhileNothingIsHeld(t *testing.T) {
	n, stop, _ := runInternalNode(t, t.TempDir(), "")
	t.Cleanup(stop)
	path := filepath.Join(n.cfg.DataDir, "activity.json")
	waitUntil(t, "the first activity.json", func() bool { _, err := os.Stat(path); return err == nil })
	passes := n.activityPasses.Load()

	// Three of the loop's one-second ticks would have passed.
	time.Sleep(3 * time.Second)
	if got := n.activityPasses.Load() - passes; got != 0 {
		t.Fatalf("an idle node's activity loop ran %d times in 3 s, want none", got)
	}

	n.touchActivity()
	waitUntil(t, "a pass after touchActivity", func() bool { return n.activityPasses.Load() > passes })
}
