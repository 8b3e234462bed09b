package heartbeat

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// A watcher with ParkWhenIdle has no timer while it watches nothing, and
// one again as soon as it watches someone, whom it then reports within
// the usual bound.
func TestWatcherParksWhenIdle(t *testing.T) {
	cfg := quiet(DefaultTestnetConfig())
	cfg.ParkWhenIdle = true
	clock := clockwork.NewFakeClockAt(epoch)
	got := make(chan Suspicion, 16)
	w, err := NewWatcher(clock, cfg, func(s Suspicion) { got <- s })
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	t.Cleanup(w.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("first check timer: %v", err)
	}
	// The first check finds nobody: the loop parks. Time passes idle.
	clock.Advance(cfg.CheckInterval)
	clock.Advance(time.Hour)

	watched := clock.Now()
	if err := w.Watch("k"); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	// The loop re-arms its timer for the new subject: wait for it.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("check timer after Watch: %v", err)
	}
	deadline := watched.Add(cfg.DetectionBound() + cfg.CheckInterval)
	for clock.Now().Before(deadline) {
		clock.Advance(cfg.CheckInterval)
		// Either the check reports k (and the loop parks again: no
		// timer), or it re-arms for the next check.
		armed := make(chan error, 1)
		actx, stop := context.WithCancel(ctx)
		go func() { armed <- clock.BlockUntilContext(actx, 1) }()
		select {
		case s := <-got:
			stop()
			if s.Key != "k" || s.Silence > cfg.DetectionBound() {
				t.Fatalf("suspicion %+v, want k within %v", s, cfg.DetectionBound())
			}
			return
		case err := <-armed:
			stop()
			if err != nil {
				t.Fatalf("check timer: %v", err)
			}
		}
	}
	t.Fatalf("k was not reported within %v of Watch", cfg.DetectionBound()+cfg.CheckInterval)
}
