package heartbeat

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// epoch is where every fake clock starts, so failures print readable times.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// quiet returns cfg with logging discarded.
func quiet(cfg Config) Config {
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

// harness drives one Watcher on a fake clock. It steps the clock from one
// check to the next and waits, after each, until the Watcher has re-armed
// its check timer: by then that check's suspicions have been delivered.
type harness struct {
	t         *testing.T
	cfg       Config
	clock     *clockwork.FakeClock
	w         *Watcher
	got       chan Suspicion
	nextCheck time.Time
	idle      int // fake-clock waiters once every goroutine is parked
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		cfg:   quiet(cfg),
		clock: clockwork.NewFakeClockAt(epoch),
		got:   make(chan Suspicion, 1<<16),
		idle:  1,
	}
	w, err := NewWatcher(h.clock, h.cfg, func(s Suspicion) { h.got <- s })
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	t.Cleanup(w.Close)
	h.w = w
	h.nextCheck = epoch.Add(cfg.CheckInterval)
	return h
}

func (h *harness) now() time.Time { return h.clock.Now() }

// waitArmed blocks until the fake clock has n waiters.
func (h *harness) waitArmed(n int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, n); err != nil {
		h.t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
}

// tick advances the clock to the next check and waits for it to finish.
func (h *harness) tick() {
	h.t.Helper()
	h.clock.Advance(h.nextCheck.Sub(h.now()))
	h.waitArmed(h.idle)
	h.nextCheck = h.nextCheck.Add(h.cfg.CheckInterval)
}

// advanceTo runs every check due up to target, then moves the clock to
// target.
func (h *harness) advanceTo(target time.Time) {
	h.t.Helper()
	for !h.nextCheck.After(target) {
		h.tick()
	}
	h.clock.Advance(target.Sub(h.now()))
}

// jump moves the clock by d in one step, as a frozen process sees it: the
// check timer fires once, late, and the harness waits for that check.
func (h *harness) jump(d time.Duration) {
	h.t.Helper()
	h.clock.Advance(d)
	h.waitArmed(h.idle)
	h.nextCheck = h.now().Add(h.cfg.CheckInterval)
}

// drain returns the suspicions delivered so far.
func (h *harness) drain() []Suspicion {
	var out []Suspicion
	for {
		select {
		case s := <-h.got:
			out = append(out, s)
		default:
			return out
		}
	}
}

// tickUntilSuspicion runs checks until a suspicion arrives or limit passes.
func (h *harness) tickUntilSuspicion(limit time.Duration) (Suspicion, bool) {
	h.t.Helper()
	end := h.now().Add(limit)
	for h.now().Before(end) {
		h.tick()
		select {
		case s := <-h.got:
			return s, true
		default:
		}
	}
	return Suspicion{}, false
}

func (h *harness) watch(keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		if err := h.w.Watch(k); err != nil {
			h.t.Fatalf("Watch(%q): %v", k, err)
		}
	}
}
