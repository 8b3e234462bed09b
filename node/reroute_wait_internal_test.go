package node

import (
	"testing"
	"time"

	"github.com/bedwe/bedwe/pack"
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

// TestCoGuardianWaitCountsAPrimarySilentSinceTheSuspicion checks where
// mayReroute's co-guardian wait starts: when the co-guardians it asks were
// all found silent (askPrimary pings a stood-in backup's primary at the
// suspicion, then asks it after BackupDelay), the latest of those times;
// otherwise now. A wait that started only after BackupDelay re-routed a
// holder killed with its primary coGuardianWait later than the silence
// called for.
func TestCoGuardianWaitCountsAPrimarySilentSinceTheSuspicion(t *testing.T) {
	b := newSilenceBook()
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	primary, other := pack.Peer{ID: "primary"}, pack.Peer{ID: "other"}
	if got := b.since("wf|1", 0, []pack.Peer{primary}, now); !got.Equal(now) {
		t.Fatalf("nothing noted: the wait starts at %s, want now (%s)", got, now)
	}
	b.note("wf|1", 0, primary.ID, now.Add(-10*time.Second))
	if got := b.since("wf|1", 0, []pack.Peer{primary}, now); !got.Equal(now.Add(-10 * time.Second)) {
		t.Fatalf("the primary silent for 10 s: the wait starts at %s, want 10 s ago", got)
	}
	if got := b.since("wf|1", 1, []pack.Peer{primary}, now); !got.Equal(now) {
		t.Fatalf("another attempt: the wait starts at %s, want now", got)
	}
	if got := b.since("wf|1", 0, []pack.Peer{other}, now); !got.Equal(now) {
		t.Fatalf("another co-guardian asked: the wait starts at %s, want now", got)
	}
	if got := b.since("wf|1", 0, []pack.Peer{primary, other}, now); !got.Equal(now) {
		t.Fatalf("a second co-guardian not found silent: the wait starts at %s, want now", got)
	}
	b.forget("wf|1", 0)
	if got := b.since("wf|1", 0, []pack.Peer{primary}, now); !got.Equal(now) {
		t.Fatalf("forgotten: the wait starts at %s, want now", got)
	}
	// A silence never read (no mayReroute followed) goes with the
	// retention (prune).
	b.note("wf|1", 0, primary.ID, now.Add(-silenceKept-time.Minute))
	b.note("wf|2", 0, primary.ID, now.Add(-time.Minute))
	b.set.expire(now.Add(-silenceKept))
	if got := b.since("wf|1", 0, []pack.Peer{primary}, now); !got.Equal(now) {
		t.Fatalf("a silence noted %s ago: the wait starts at %s, want now (expired)", silenceKept+time.Minute, got)
	}
	if got := b.since("wf|2", 0, []pack.Peer{primary}, now); !got.Equal(now.Add(-time.Minute)) {
		t.Fatalf("a silence noted a minute ago: the wait starts at %s, want a minute ago (kept)", got)
	}
}
