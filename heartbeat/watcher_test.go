package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

var defaultConfigs = []struct {
	name string
	cfg  Config
}{
	{"mesh", DefaultMeshConfig()},
	{"testnet", DefaultTestnetConfig()},
	{"local", DefaultLocalConfig()},
}

// A live subject beating with heavy jitter (each gap Interval +/- 40 %,
// and one gap in 50 stretched by up to AcceptablePause) is never
// suspected over 2,000 beats of virtual time.
func TestWatcherJitteryBeaterNeverSuspected(t *testing.T) {
	for _, tc := range defaultConfigs {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			h.watch("peer/wf/s1")
			interval := tc.cfg.Interval
			var longest time.Duration
			for range 2000 {
				gap := interval + time.Duration((rng.Float64()*0.8-0.4)*float64(interval))
				if rng.IntN(50) == 0 {
					gap += time.Duration(rng.Float64() * float64(tc.cfg.AcceptablePause))
				}
				longest = max(longest, gap)
				h.advanceTo(h.now().Add(gap))
				if !h.w.Beat("peer/wf/s1") {
					t.Fatalf("at %v: Beat says the subject is no longer watched; suspicions: %v",
						h.now().Sub(epoch), h.drain())
				}
			}
			if got := h.drain(); len(got) != 0 {
				t.Fatalf("live subject was suspected: %v", got)
			}
			st := h.w.Stats()
			if st.Suspicions != 0 || st.Beats != 2000 || st.Watched != 1 {
				t.Errorf("Stats = %+v, want 0 suspicions, 2000 beats, 1 watched", st)
			}
			if minChecks := uint64(2000 * interval / tc.cfg.CheckInterval / 2); st.Checks < minChecks {
				t.Errorf("only %d checks ran, want >= %d: the test did not exercise the detector", st.Checks, minChecks)
			}
			t.Logf("longest gap %v, suspect after %v", longest, tc.cfg.SuspectAfter())
		})
	}
}

// A subject that beat steadily and stops is reported once, after a silence
// no shorter than the phi crossing for its steady history and no longer
// than DetectionBound. For the testnet defaults that is within 1.5 s.
func TestWatcherDetectsStoppedSubjectWithinBound(t *testing.T) {
	for _, tc := range defaultConfigs {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			const key = "peer/wf/s1"
			h.watch(key)
			var last time.Time
			for range 3 * tc.cfg.MaxSamples {
				h.advanceTo(h.now().Add(tc.cfg.Interval))
				h.w.Beat(key)
				last = h.now()
			}
			s, ok := h.tickUntilSuspicion(10 * tc.cfg.DetectionBound())
			if !ok {
				t.Fatalf("stopped subject not reported within %v", 10*tc.cfg.DetectionBound())
			}
			// Steady beats: learned deviation 0, floored at MinStdDev.
			earliest := tc.cfg.Interval + tc.cfg.AcceptablePause +
				time.Duration(sigmasAt(tc.cfg.Threshold)*float64(tc.cfg.MinStdDev))
			if s.Key != key || !s.At.Equal(last.Add(s.Silence)) {
				t.Errorf("Suspicion = %+v, want key %q, At = last beat + Silence", s, key)
			}
			if s.Silence < earliest || s.Silence > tc.cfg.DetectionBound() {
				t.Errorf("detected after %v of silence, want within [%v, %v]", s.Silence, earliest, tc.cfg.DetectionBound())
			}
			if tc.name == "testnet" && (s.Silence > 1500*time.Millisecond || s.Silence <= tc.cfg.Interval) {
				t.Errorf("testnet detection after %v, want in (%v, 1.5s]", s.Silence, tc.cfg.Interval)
			}
			h.advanceTo(h.now().Add(10 * tc.cfg.DetectionBound()))
			if more := h.drain(); len(more) != 0 {
				t.Errorf("subject reported again: %v", more)
			}
			t.Logf("detected after %v (bound %v)", s.Silence, tc.cfg.DetectionBound())
		})
	}
}

// A subject that never beats after Watch is reported like one that
// stopped: after SuspectAfter, within DetectionBound.
func TestWatcherDetectsSubjectThatNeverBeats(t *testing.T) {
	for _, tc := range defaultConfigs {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			h.watch("k")
			s, ok := h.tickUntilSuspicion(10 * tc.cfg.DetectionBound())
			if !ok {
				t.Fatal("silent subject never reported")
			}
			if s.Silence < tc.cfg.SuspectAfter() || s.Silence > tc.cfg.DetectionBound() {
				t.Errorf("Silence = %v, want within [%v, %v]", s.Silence, tc.cfg.SuspectAfter(), tc.cfg.DetectionBound())
			}
		})
	}
}

// Lifeguard: a check that fires later than LateTimerTolerance accuses
// nobody and restarts every silence; one late by no more than the
// tolerance is an ordinary check.
func TestWatcherLateTick(t *testing.T) {
	cfg := DefaultTestnetConfig()
	tol := cfg.LateTimerTolerance
	tests := []struct {
		name        string
		jump        time.Duration // one clock step from the last check before the deadline
		wantSuspect bool
	}{
		{"frozen 10s", 10 * time.Second, false},
		{"late just over tolerance", cfg.CheckInterval + tol + time.Millisecond, false},
		{"late exactly tolerance", cfg.CheckInterval + tol, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, cfg)
			keys := []string{"a/w/1", "b/w/1", "c/w/1"}
			h.watch(keys...)
			deadline := epoch.Add(cfg.SuspectAfter())
			for !h.nextCheck.Add(cfg.CheckInterval).After(deadline) {
				h.tick()
			}
			if got := h.drain(); len(got) != 0 {
				t.Fatalf("suspected before the deadline: %v", got)
			}
			h.jump(tc.jump)
			jumped := h.now()
			got := h.drain()
			st := h.w.Stats()
			if wantLate := tc.jump-cfg.CheckInterval > tol; wantLate != (st.LateTicks == 1) {
				t.Errorf("LateTicks = %d after a step late by %v (tolerance %v)", st.LateTicks, tc.jump-cfg.CheckInterval, tol)
			}
			if st.WorstLateness != tc.jump-cfg.CheckInterval {
				t.Errorf("WorstLateness = %v, want %v", st.WorstLateness, tc.jump-cfg.CheckInterval)
			}
			if !tc.wantSuspect {
				if len(got) != 0 || st.Watched != len(keys) {
					t.Fatalf("late tick accused %v (watched %d), want nobody", got, st.Watched)
				}
				// The silence restarted at the late tick: the subjects are
				// reported one SuspectAfter later, not before.
				first, ok := h.tickUntilSuspicion(10 * cfg.DetectionBound())
				if !ok {
					t.Fatal("silent subjects never reported after the late tick")
				}
				all := append([]Suspicion{first}, h.drain()...)
				if len(all) != len(keys) {
					t.Fatalf("after the late tick got %v, want all %d subjects at once", all, len(keys))
				}
				for _, s := range all {
					if since := s.At.Sub(jumped); since < cfg.SuspectAfter() || since > cfg.DetectionBound() {
						t.Errorf("%s reported %v after the late tick, want within [%v, %v]",
							s.Key, since, cfg.SuspectAfter(), cfg.DetectionBound())
					}
					if s.Silence != s.At.Sub(epoch) {
						t.Errorf("%s Silence = %v, want the whole silence since Watch, %v", s.Key, s.Silence, s.At.Sub(epoch))
					}
				}
				return
			}
			if len(got) != len(keys) {
				t.Fatalf("got %d suspicions %v, want %d", len(got), got, len(keys))
			}
		})
	}
}

func TestWatcherUnwatch(t *testing.T) {
	h := newHarness(t, DefaultLocalConfig())
	h.watch("gone", "kept")
	if !h.w.Unwatch("gone") {
		t.Fatal(`Unwatch("gone") = false, want true`)
	}
	if h.w.Unwatch("gone") || h.w.Unwatch("never") {
		t.Error("Unwatch of an unwatched key = true, want false")
	}
	if h.w.Beat("gone") {
		t.Error(`Beat("gone") after Unwatch = true, want false`)
	}
	if _, ok := h.w.Phi("gone"); ok {
		t.Error(`Phi("gone") reports a watched key after Unwatch`)
	}
	h.advanceTo(h.now().Add(10 * h.cfg.DetectionBound()))
	got := h.drain()
	if len(got) != 1 || got[0].Key != "kept" {
		t.Fatalf("suspicions = %v, want only \"kept\"", got)
	}
}

// Each watch is reported once, and the subject is dropped when it is; a
// new Watch of the same key is a new watch.
func TestWatcherReportsEachSubjectOnce(t *testing.T) {
	cfg := DefaultLocalConfig()
	h := newHarness(t, cfg)
	var live, silent []string
	for i := range 20 {
		silent = append(silent, fmt.Sprintf("silent/%d", i))
		live = append(live, fmt.Sprintf("live/%d", i))
	}
	h.watch(silent...)
	h.watch(live...)
	for range 50 {
		h.advanceTo(h.now().Add(cfg.Interval))
		for _, k := range live {
			h.w.Beat(k)
		}
	}
	seen := map[string]int{}
	for _, s := range h.drain() {
		seen[s.Key]++
	}
	for _, k := range silent {
		if seen[k] != 1 {
			t.Errorf("%s reported %d times, want once", k, seen[k])
		}
		if h.w.Beat(k) {
			t.Errorf("Beat(%q) after its suspicion = true, want false", k)
		}
	}
	for _, k := range live {
		if seen[k] != 0 {
			t.Errorf("live subject %s reported %d times", k, seen[k])
		}
	}
	st := h.w.Stats()
	if st.Suspicions != uint64(len(silent)) || st.Watched != len(live) || st.LateTicks != 0 {
		t.Errorf("Stats = %+v, want %d suspicions, %d watched, 0 late ticks", st, len(silent), len(live))
	}

	h.watch(silent[0])
	if _, ok := h.tickUntilSuspicion(10 * cfg.DetectionBound()); !ok {
		t.Error("re-watched key not reported again")
	}
}

// Watching a key again restarts it: the old silence is forgotten.
func TestWatcherWatchAgainRestarts(t *testing.T) {
	cfg := DefaultLocalConfig()
	h := newHarness(t, cfg)
	h.watch("k")
	h.advanceTo(h.now().Add(cfg.SuspectAfter() - cfg.CheckInterval))
	h.watch("k")
	rewatched := h.now()
	s, ok := h.tickUntilSuspicion(10 * cfg.DetectionBound())
	if !ok {
		t.Fatal("never reported")
	}
	if since := s.At.Sub(rewatched); since < cfg.SuspectAfter() || s.Silence != since {
		t.Errorf("reported %v after the second Watch with Silence %v, want >= %v and equal", since, s.Silence, cfg.SuspectAfter())
	}
}

func TestWatcherPhiRises(t *testing.T) {
	cfg := DefaultLocalConfig()
	h := newHarness(t, cfg)
	h.watch("k")
	p0, _ := h.w.Phi("k")
	h.advanceTo(h.now().Add(cfg.SuspectAfter() / 2))
	p1, _ := h.w.Phi("k")
	h.advanceTo(epoch.Add(cfg.SuspectAfter() - time.Millisecond))
	p2, ok := h.w.Phi("k")
	if !ok || !(p0 < p1 && p1 < p2 && p2 < cfg.Threshold) {
		t.Errorf("phi over silence = %v, %v, %v (watched %v), want rising and below %v", p0, p1, p2, ok, cfg.Threshold)
	}
}

func TestWatcherClose(t *testing.T) {
	cfg := DefaultLocalConfig()
	h := newHarness(t, cfg)
	h.watch("k")
	h.w.Close()
	h.w.Close() // idempotent
	if err := h.w.Watch("x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close = %v, want ErrClosed", err)
	}
	h.clock.Advance(10 * cfg.DetectionBound())
	if got := h.drain(); len(got) != 0 {
		t.Errorf("suspicions after Close: %v", got)
	}
}

func TestNewWatcherRejects(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	bad := DefaultLocalConfig()
	bad.Interval = 0
	tests := []struct {
		name  string
		clock clockwork.Clock
		cfg   Config
		cb    func(Suspicion)
	}{
		{"invalid config", clock, bad, func(Suspicion) {}},
		{"nil callback", clock, DefaultLocalConfig(), nil},
		{"nil clock", nil, DefaultLocalConfig(), func(Suspicion) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWatcher(tc.clock, tc.cfg, tc.cb)
			if err == nil {
				w.Close()
				t.Fatal("NewWatcher succeeded, want an error")
			}
		})
	}
}

// Close and Stop leave no goroutine behind, even with a confirmation
// blocked in flight and a Beater running.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		cfg := DefaultLocalConfig()
		asked := make(chan string, 1)
		cfg.Confirm = func(ctx context.Context, key string) bool {
			asked <- key
			<-ctx.Done()
			return false
		}
		h := newHarness(t, cfg)
		h.watch("beating", "silent")
		b, err := StartBeater(context.Background(), h.clock, cfg.Interval, func() error {
			h.w.Beat("beating")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		h.idle = 2 // check timer and beat timer
		h.waitArmed(h.idle)
		// By then a check has found the silent subject overdue and started
		// its confirmation; the clock stops there, so the confirmation stays
		// blocked in flight. The goroutine it runs in may start late on a
		// busy machine, so its call is awaited in real time.
		h.advanceTo(h.now().Add(cfg.SuspectAfter() + cfg.CheckInterval))
		if key := recv(t, asked, "Confirm call"); key != "silent" {
			t.Fatalf("Confirm asked about %q, want \"silent\"", key)
		}
		b.Stop()
		h.w.Close()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}
