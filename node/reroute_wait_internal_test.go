package node

import (
	"testing"
	"time"
)

// TestRerouteRoundsEndWithTheCoGuardianWait checks that the rounds of
// mayReroute, while only coGuardianWait holds a re-route off, ask again
// when that wait ends rather than at the next step of the doubling backoff
// (0.5, 1, 2, 4 s: 7.5 s after the first round instead of 5).
func TestRerouteRoundsEndWithTheCoGuardianWait(t *testing.T) {
	var elapsed, slept time.Duration
	wait := 500 * time.Millisecond
	for elapsed < coGuardianWait {
		d := nextRound(wait, true, coGuardianWait-elapsed)
		if d <= 0 {
			t.Fatalf("round at %s sleeps %s", elapsed, d)
		}
		elapsed += d
		slept = d
		wait = min(wait*2, 4*time.Second)
	}
	if elapsed != coGuardianWait {
		t.Fatalf("the round after the co-guardian wait came at %s (last sleep %s), want %s", elapsed, slept, coGuardianWait)
	}
	// Any other hold-off (a successor unsure, a record, a co-guardian
	// re-routing) keeps the backoff as it is.
	if d := nextRound(4*time.Second, false, time.Second); d != 4*time.Second {
		t.Fatalf("without the co-guardian wait: sleeps %s, want the backoff's 4s", d)
	}
	// Past the bound (the round itself took long) the backoff applies.
	if d := nextRound(2*time.Second, true, -time.Second); d != 2*time.Second {
		t.Fatalf("past the bound: sleeps %s, want the backoff's 2s", d)
	}
}
