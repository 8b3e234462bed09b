package heartbeat

import (
	"context"
	"testing"
	"time"
)

// confirmer is a scripted Config.Confirm: it announces each call on asked
// and returns what the test sends on answer, or false when its context
// ends.
type confirmer struct {
	asked  chan string
	answer chan bool
}

func newConfirmer() *confirmer {
	return &confirmer{asked: make(chan string, 16), answer: make(chan bool)}
}

func (c *confirmer) confirm(ctx context.Context, key string) bool {
	c.asked <- key
	select {
	case a := <-c.answer:
		return a
	case <-ctx.Done():
		return false
	}
}

// recv receives one value or fails the test after a generous real-time
// guard (it only trips if the code under test hangs).
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// confirmHarness watches one never-beating key "k" with a scripted
// Confirm, and runs checks until the Watcher asks about it.
func confirmHarness(t *testing.T) (h *harness, c *confirmer, settled chan string, asked time.Time) {
	t.Helper()
	c = newConfirmer()
	cfg := DefaultLocalConfig()
	cfg.Confirm = c.confirm
	h = newHarness(t, cfg)
	settled = make(chan string, 16)
	h.w.confirmDone = func(key string) { settled <- key }
	h.watch("k")
	for h.now().Before(epoch.Add(cfg.SuspectAfter())) {
		h.tick()
	}
	if key := recv(t, c.asked, "Confirm call"); key != "k" {
		t.Fatalf("Confirm asked about %q, want \"k\"", key)
	}
	// Both the check timer and the confirmation's timeout are armed now.
	h.waitArmed(2)
	return h, c, settled, h.now()
}

func TestWatcherConfirm(t *testing.T) {
	tests := []struct {
		name          string
		during        func(h *harness) // while Confirm is in flight
		answer        bool
		noAnswer      bool // let ConfirmTimeout expire instead
		wantDelivered bool
		wantWithdrawn uint64
		wantWatched   int
	}{
		{name: "others still hear it", answer: true, wantWithdrawn: 1, wantWatched: 1},
		{name: "nobody hears it", answer: false, wantDelivered: true},
		{name: "no answer in time", noAnswer: true, wantDelivered: true},
		{
			name:   "it beats meanwhile",
			during: func(h *harness) { h.w.Beat("k") },
			answer: false, wantWithdrawn: 1, wantWatched: 1,
		},
		{
			name:   "unwatched meanwhile",
			during: func(h *harness) { h.w.Unwatch("k") },
			answer: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, c, settled, asked := confirmHarness(t)
			if got := h.drain(); len(got) != 0 {
				t.Fatalf("delivered before Confirm answered: %v", got)
			}
			if tc.during != nil {
				tc.during(h)
			}
			if tc.noAnswer {
				h.idle = 2
				for h.nextCheck.Before(asked.Add(h.cfg.ConfirmTimeout)) {
					h.tick()
				}
				// This step fires the check timer and the confirmation's
				// timeout together.
				h.clock.Advance(h.nextCheck.Sub(h.now()))
				h.nextCheck = h.nextCheck.Add(h.cfg.CheckInterval)
			} else {
				c.answer <- tc.answer
			}
			recv(t, settled, "the confirmation to settle")
			h.idle = 1
			h.waitArmed(1)

			got := h.drain()
			if tc.wantDelivered != (len(got) == 1) || len(got) > 1 {
				t.Fatalf("delivered %v, want delivered=%v", got, tc.wantDelivered)
			}
			if tc.wantDelivered {
				want := asked
				if tc.noAnswer {
					want = asked.Add(h.cfg.ConfirmTimeout)
				}
				if s := got[0]; s.Key != "k" || !s.At.Equal(want) || s.Silence != want.Sub(epoch) {
					t.Errorf("Suspicion = %+v, want k at %v after %v of silence", s, want, want.Sub(epoch))
				}
			}
			st := h.w.Stats()
			if st.Withdrawn != tc.wantWithdrawn || st.Watched != tc.wantWatched {
				t.Errorf("Stats = %+v, want %d withdrawn, %d watched", st, tc.wantWithdrawn, tc.wantWatched)
			}
		})
	}
}

// A withdrawn suspicion restarts the silence: if the subject stays silent
// it is asked about again one SuspectAfter later, and reported with its
// whole silence.
func TestWatcherConfirmWithdrawnThenReported(t *testing.T) {
	h, c, settled, asked := confirmHarness(t)
	c.answer <- true
	recv(t, settled, "the first confirmation")
	h.waitArmed(1)

	for h.now().Before(asked.Add(h.cfg.SuspectAfter())) {
		h.tick()
		if got := h.drain(); len(got) != 0 {
			t.Fatalf("reported %v before the restarted silence ran out", got)
		}
	}
	recv(t, c.asked, "the second Confirm call")
	again := h.now()
	c.answer <- false
	recv(t, settled, "the second confirmation")
	s := recv(t, h.got, "the suspicion")
	if since := again.Sub(asked); since < h.cfg.SuspectAfter() || since > h.cfg.SuspectAfter()+h.cfg.CheckInterval {
		t.Errorf("asked again %v after withdrawing, want within one check of %v", since, h.cfg.SuspectAfter())
	}
	if s.Silence != again.Sub(epoch) {
		t.Errorf("Silence = %v, want the whole silence %v", s.Silence, again.Sub(epoch))
	}
	if st := h.w.Stats(); st.Withdrawn != 1 || st.Suspicions != 1 {
		t.Errorf("Stats = %+v, want 1 withdrawn and 1 suspicion", st)
	}
}

// Close cancels a confirmation in flight and waits for it; nothing is
// delivered.
func TestWatcherCloseDuringConfirm(t *testing.T) {
	h, _, settled, _ := confirmHarness(t)
	closed := make(chan struct{})
	go func() {
		h.w.Close()
		close(closed)
	}()
	recv(t, closed, "Close to return")
	recv(t, settled, "the confirmation to settle")
	if got := h.drain(); len(got) != 0 {
		t.Errorf("delivered after Close: %v", got)
	}
}

// A negative confirmation whose own timeout fired late is not trusted
// (Lifeguard's rule for the probe): the silence restarts, and the subject
// is reported only if it stays silent through a fresh SuspectAfter.
func TestWatcherConfirmLateTimer(t *testing.T) {
	c := newConfirmer()
	cfg := DefaultLocalConfig()
	// Checks far apart, so the confirmation's timeout can fire late while
	// the check timer is not due yet.
	cfg.CheckInterval = time.Second
	cfg.Confirm = c.confirm
	h := newHarness(t, cfg)
	settled := make(chan string, 16)
	h.w.confirmDone = func(key string) { settled <- key }
	h.watch("k")
	h.idle = 2 // the check timer and the confirmation's timeout
	h.tick()
	recv(t, c.asked, "Confirm call")
	h.waitArmed(2)

	// The process "freezes": the timeout, due in ConfirmTimeout, fires
	// LateTimerTolerance + 50 ms after that.
	h.clock.Advance(cfg.ConfirmTimeout + cfg.LateTimerTolerance + 50*time.Millisecond)
	recv(t, settled, "the late confirmation to settle")
	if got := h.drain(); len(got) != 0 {
		t.Fatalf("delivered %v after a late confirmation, want nothing", got)
	}
	if st := h.w.Stats(); st.LateConfirms != 1 || st.Withdrawn != 0 || st.Watched != 1 {
		t.Fatalf("Stats = %+v, want 1 late confirmation, 0 withdrawn, 1 watched", st)
	}

	// Still silent at the next check: asked again, and this time a prompt
	// "no" is believed.
	h.idle = 1
	h.tick()
	recv(t, c.asked, "the second Confirm call")
	c.answer <- false
	recv(t, settled, "the second confirmation")
	s := recv(t, h.got, "the suspicion")
	if s.Key != "k" {
		t.Errorf("reported %q, want \"k\"", s.Key)
	}
}

// Confirm may unwatch a subject nobody needs watched any more; nothing is
// reported for it and nothing counts as withdrawn.
func TestWatcherConfirmUnwatches(t *testing.T) {
	cfg := DefaultLocalConfig()
	var h *harness
	asked := make(chan string, 1)
	cfg.Confirm = func(_ context.Context, key string) bool {
		h.w.Unwatch(key)
		asked <- key
		return false
	}
	h = newHarness(t, cfg)
	settled := make(chan string, 1)
	h.w.confirmDone = func(key string) { settled <- key }
	h.watch("k")
	for h.now().Before(epoch.Add(cfg.SuspectAfter())) {
		h.tick()
	}
	recv(t, asked, "Confirm call")
	recv(t, settled, "the confirmation to settle")
	h.advanceTo(h.now().Add(10 * cfg.DetectionBound()))
	if got := h.drain(); len(got) != 0 {
		t.Errorf("delivered %v for an unwatched subject", got)
	}
	if st := h.w.Stats(); st.Watched != 0 || st.Withdrawn != 0 || st.Suspicions != 0 {
		t.Errorf("Stats = %+v, want nothing watched, withdrawn or suspected", st)
	}
}
