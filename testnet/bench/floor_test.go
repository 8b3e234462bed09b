package bench

import (
	"os"
	"testing"
	"time"
)

// TestMeasureCommitsTimesEachCommit times journal commits in a directory
// and leaves nothing there: one duration per commit, each long enough to
// have written something.
func TestMeasureCommitsTimesEachCommit(t *testing.T) {
	dir := t.TempDir()
	got, err := measureCommits(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("%d durations for 5 commits", len(got))
	}
	for i, d := range got {
		if d <= 0 || d > time.Minute {
			t.Errorf("commit %d took %v", i, d)
		}
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("left %d files in the testnet's directory, e.g. %s", len(left), left[0].Name())
	}
}

// TestHandOverIsThreeCommitsAndTwoAndAHalfRoundTrips pins the floor a
// hop gap is compared with: 3 × 350 µs + 2.5 × 200 µs.
func TestHandOverIsThreeCommitsAndTwoAndAHalfRoundTrips(t *testing.T) {
	f := Floor{Fsync4K: time.Millisecond, StreamRTT: 200 * time.Microsecond, Commit4K: 350 * time.Microsecond}
	if got, want := f.HandOver(), 1550*time.Microsecond; got != want {
		t.Errorf("HandOver() = %v, want %v", got, want)
	}
}
