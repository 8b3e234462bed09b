package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

// fakeSet is a set whose hold-off clock the test moves; gobreaker's own
// open time is 1 ms of real time, so the grown hold-off decides.
func fakeSet(t *testing.T) (*Set, *time.Time) {
	t.Helper()
	s := New(Config{Failures: 3, OpenFor: time.Millisecond, MaxOpenFor: 4 * time.Millisecond})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	return s, &now
}

// awaitHalfOpen waits until gobreaker itself moved peer's breaker to
// half-open (its 1 ms open time passed).
func awaitHalfOpen(t *testing.T, s *Set, peer string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		st := s.peers[peer].cb.State()
		s.mu.Unlock()
		if st == gobreaker.StateHalfOpen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gobreaker state %v, want half-open", st)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func fail(t *testing.T, s *Set, peer string) {
	t.Helper()
	done, err := s.Begin(peer)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	done(false)
}

func TestOpensAfterConsecutiveFailuresAndProbes(t *testing.T) {
	s, now := fakeSet(t)
	const p = "peer-a"
	if !s.Allowed(p) || s.State(p) != Closed {
		t.Fatalf("unknown peer: state %s", s.State(p))
	}
	fail(t, s, p)
	fail(t, s, p)
	// A success in between resets the count.
	done, _ := s.Begin(p)
	done(true)
	fail(t, s, p)
	fail(t, s, p)
	if s.State(p) != Closed {
		t.Fatalf("after 2 consecutive failures: %s, want closed", s.State(p))
	}
	fail(t, s, p)
	if s.State(p) != Open || s.Allowed(p) {
		t.Fatalf("after 3 consecutive failures: %s, want open", s.State(p))
	}
	if _, err := s.Begin(p); !errors.Is(err, ErrOpen) {
		t.Fatalf("Begin on an open breaker: %v, want ErrOpen", err)
	}

	// After the open time: one probe.
	awaitHalfOpen(t, s, p)
	*now = now.Add(time.Millisecond)
	if s.State(p) != HalfOpen || !s.Allowed(p) {
		t.Fatalf("after the open time: %s, want half-open", s.State(p))
	}
	probe, err := s.Begin(p)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if _, err := s.Begin(p); !errors.Is(err, ErrOpen) {
		t.Fatalf("second request while the probe is out: %v, want ErrOpen", err)
	}
	probe(true)
	if s.State(p) != Closed {
		t.Fatalf("after a good probe: %s, want closed", s.State(p))
	}
}

func TestOpenTimeGrowsAndIsCapped(t *testing.T) {
	s, now := fakeSet(t)
	const p = "peer-b"
	for range 3 {
		fail(t, s, p)
	}
	// Failed probes double the open time: 1, 2, 4, then capped at 4 ms.
	for _, want := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond} {
		awaitHalfOpen(t, s, p)
		*now = now.Add(want - 500*time.Microsecond)
		if s.State(p) != Open {
			t.Fatalf("%s before the open time of %s ended: %s, want open", want-500*time.Microsecond, want, s.State(p))
		}
		*now = now.Add(500 * time.Microsecond)
		if s.State(p) != HalfOpen {
			t.Fatalf("open time %s over: %s, want half-open", want, s.State(p))
		}
		fail(t, s, p) // the probe fails
	}
	// A good probe resets the growth: the next opening lasts 1 ms again.
	awaitHalfOpen(t, s, p)
	*now = now.Add(4 * time.Millisecond)
	done, err := s.Begin(p)
	if err != nil {
		t.Fatal(err)
	}
	done(true)
	for range 3 {
		fail(t, s, p)
	}
	awaitHalfOpen(t, s, p)
	*now = now.Add(time.Millisecond)
	if s.State(p) != HalfOpen {
		t.Fatalf("first opening after a close lasted more than 1 ms: %s", s.State(p))
	}
}

func TestFailureOutsideRequestsAndForget(t *testing.T) {
	s, _ := fakeSet(t)
	const p = "peer-c"
	for range 3 {
		s.Failure(p)
	}
	if s.State(p) != Open {
		t.Fatalf("three silent-holder failures: %s, want open", s.State(p))
	}
	s.Failure(p) // not counted while open; must not panic
	s.Forget(p)
	if s.State(p) != Closed {
		t.Fatalf("forgotten peer: %s, want closed", s.State(p))
	}
}
