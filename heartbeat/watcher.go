package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// ErrClosed is returned by Watch after Close.
var ErrClosed = errors.New("heartbeat: watcher closed")

// Suspicion reports a subject the Watcher declared silent. It is delivered
// once per Watch; the subject is no longer watched by then.
type Suspicion struct {
	// Key names the subject, as given to Watch.
	Key string
	// Silence is how long nothing was heard from the subject: from its last
	// beat (or from Watch, if it never beat) to At. It includes any stretch
	// the Watcher forgave after a late tick, so it can exceed the
	// config's DetectionBound.
	Silence time.Duration
	// At is when the Watcher declared it, on the injected clock.
	At time.Time
}

// Watcher watches many subjects, each with its own Detector, and reports
// each one that falls silent exactly once. A subject is any string key; the
// node uses "peerID/workflowID/step" so one watch covers one hand-off.
//
// Checks run on a timer from the injected clock every CheckInterval. If a
// check fires later than LateTimerTolerance the Watcher blames itself, not
// the subjects (see Config.LateTimerTolerance).
//
// All methods are safe for concurrent use. The callback given to
// NewWatcher is called with no lock held, never concurrently with itself,
// and never after Close returns; it must not call Close.
type Watcher struct {
	clock     clockwork.Clock
	cfg       Config
	p         *params
	log       *slog.Logger
	onSuspect func(Suspicion)

	mu       sync.Mutex
	subjects *table // guarded by mu
	closed   bool   // guarded by mu

	deliverMu sync.Mutex // serialises onSuspect
	stats     counters

	// wake re-arms a parked check loop (Config.ParkWhenIdle).
	wake chan struct{}

	ctx    context.Context // done when Close begins; parents Confirm's context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the check loop and confirmations in flight

	// confirmDone, if set (by tests), is called when a confirmation has
	// been settled, after its timer is stopped.
	confirmDone func(key string)
}

// NewWatcher starts a Watcher on clock with cfg, calling onSuspect for each
// subject it declares silent. onSuspect should return quickly (hand the
// suspicion to a channel or a goroutine): checks wait for it. The check
// timer is armed before NewWatcher returns. Close releases it.
func NewWatcher(clock clockwork.Clock, cfg Config, onSuspect func(Suspicion)) (*Watcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new watcher: %w", err)
	}
	if clock == nil {
		return nil, errors.New("new watcher: nil clock")
	}
	if onSuspect == nil {
		return nil, errors.New("new watcher: nil onSuspect callback")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{
		clock:     clock,
		cfg:       cfg,
		p:         newParams(cfg),
		log:       log,
		onSuspect: onSuspect,
		ctx:       ctx,
		cancel:    cancel,
		wake:      make(chan struct{}, 1),
	}
	timer := clock.NewTimer(cfg.CheckInterval)
	start := clock.Now()
	w.subjects = newTable(start)
	due := start.Add(cfg.CheckInterval)
	w.wg.Add(1)
	go w.run(timer, due)
	return w, nil
}

// Watch starts watching key, as if it had just beaten: a subject that
// never beats is reported after the same silence as one that stopped. A key
// already watched starts afresh, forgetting its history and any suspicion
// being confirmed. It returns ErrClosed after Close.
func (w *Watcher) Watch(key string) error {
	now := w.clock.Now()
	s := &subject{key: key, heard: now}
	s.det.init(w.p)
	s.det.Heartbeat(now)
	s.deadline = s.det.Deadline()

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("watch %q: %w", key, ErrClosed)
	}
	w.subjects.put(s)
	if w.cfg.ParkWhenIdle {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// Beat records a beat from key now and reports whether key is watched. A
// false answer means the key was never watched, was unwatched, or has
// already been reported silent: the node should treat such a late beat as
// stale (the work was, or is being, re-routed).
func (w *Watcher) Beat(key string) bool {
	now := w.clock.Now()
	w.mu.Lock()
	s, ok := w.subjects.get(key)
	if ok {
		s.det.Heartbeat(now)
		s.heard = now
		s.deadline = s.det.Deadline()
		w.subjects.refresh(s)
	}
	w.mu.Unlock()
	if ok {
		w.stats.beats.Add(1)
	}
	return ok
}

// Unwatch stops watching key and reports whether it was watched. After it
// returns true no Suspicion for that watch is ever delivered; false means
// the key was not watched or its Suspicion is already on its way.
func (w *Watcher) Unwatch(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.subjects.get(key)
	if ok {
		w.subjects.remove(s)
	}
	return ok
}

// Phi returns key's current suspicion level and whether key is watched.
func (w *Watcher) Phi(key string) (float64, bool) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.subjects.get(key)
	if !ok {
		return 0, false
	}
	return s.det.Phi(now), true
}

// Stats returns the Watcher's counters.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	n := w.subjects.len()
	w.mu.Unlock()
	return w.stats.snapshot(n)
}

// Close stops the check loop, cancels confirmations in flight and waits
// for them; no Suspicion is delivered after it returns. Later calls do
// nothing.
func (w *Watcher) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
}

// run is the check loop. A timer re-armed after each check, rather than a
// ticker, lets the loop know when each check was due, so it can tell a late
// tick, and never runs two checks back to back from a queued tick.
func (w *Watcher) run(timer clockwork.Timer, due time.Time) {
	defer w.wg.Done()
	defer timer.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-timer.Chan():
		}
		now := w.clock.Now()
		late := now.Sub(due)
		w.stats.noteLateness(late)
		if late > w.cfg.LateTimerTolerance {
			w.forgive(now, late)
		} else {
			w.check(now)
		}
		if w.cfg.ParkWhenIdle && !w.park() {
			return
		}
		// Measured after the check (or the park), so time spent in
		// onSuspect or parked is not mistaken for lateness.
		due = w.clock.Now().Add(w.cfg.CheckInterval)
		timer.Reset(w.cfg.CheckInterval)
	}
}

// park waits, while nothing is watched, for the next Watch. It returns
// false when the Watcher is closing.
func (w *Watcher) park() bool {
	for {
		w.mu.Lock()
		idle := w.subjects.len() == 0
		w.mu.Unlock()
		if !idle {
			return true
		}
		select {
		case <-w.ctx.Done():
			return false
		case <-w.wake:
		}
	}
}

// forgive is Lifeguard's rule: this process was not running when it should
// have been, so the silences it measured may be its own. Accuse nobody and
// measure every silence from now.
func (w *Watcher) forgive(now time.Time, late time.Duration) {
	w.mu.Lock()
	for _, s := range w.subjects.subs {
		s.det.restart(now)
		s.deadline = s.det.Deadline()
		w.subjects.refresh(s)
	}
	n := w.subjects.len()
	w.mu.Unlock()
	w.stats.lateTicks.Add(1)
	w.log.Warn("heartbeat: check timer ran late; accusing nobody and restarting every silence",
		"late", late, "tolerance", w.cfg.LateTimerTolerance, "subjects", n)
}

// check declares every subject whose deadline has passed, or hands it to
// Confirm first.
func (w *Watcher) check(now time.Time) {
	w.stats.checks.Add(1)
	var silent []Suspicion
	var confirm []*subject
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	t := w.subjects
	nowOff := t.offset(now)
	// From the end down, so removing the current subject is safe.
	for i := len(t.due) - 1; i >= 0; i-- {
		if t.due[i] > nowOff {
			continue
		}
		s := t.subs[i]
		if w.cfg.Confirm != nil {
			s.confirming = true
			t.refresh(s)
			confirm = append(confirm, s)
			continue
		}
		t.remove(s)
		silent = append(silent, Suspicion{Key: s.key, Silence: now.Sub(s.heard), At: now})
	}
	w.wg.Add(len(confirm))
	for _, s := range confirm {
		go w.confirm(s)
	}
	w.mu.Unlock()

	slices.SortFunc(silent, func(a, b Suspicion) int { return strings.Compare(a.Key, b.Key) })
	for _, s := range silent {
		w.deliver(s)
	}
}

// confirm asks Config.Confirm about one overdue subject and then either
// withdraws the suspicion or delivers it.
func (w *Watcher) confirm(s *subject) {
	key := s.key
	defer w.wg.Done()
	if w.confirmDone != nil {
		defer w.confirmDone(key)
	}
	ctx, cancel := context.WithCancelCause(w.ctx)
	due := w.clock.Now().Add(w.cfg.ConfirmTimeout)
	var late atomic.Int64 // how late the timeout fired; written before cancel
	timer := w.clock.AfterFunc(w.cfg.ConfirmTimeout, func() {
		late.Store(int64(w.clock.Since(due)))
		cancel(context.DeadlineExceeded)
	})
	heard := w.cfg.Confirm(ctx, key)
	timer.Stop()
	cancel(nil)
	// Lifeguard's rule again: a timeout that fired late means this process
	// was not running while the answer may have been waiting for it, so
	// "nobody answered" is not evidence against the subject.
	starved := !heard && time.Duration(late.Load()) > w.cfg.LateTimerTolerance

	w.mu.Lock()
	if cur, ok := w.subjects.get(key); w.closed || !ok || cur != s {
		// Closed, unwatched or watched afresh meanwhile: not ours to judge.
		w.mu.Unlock()
		return
	}
	now := w.clock.Now()
	s.confirming = false
	if heard || starved || now.Before(s.deadline) {
		// Someone hears it, it beat (or we forgave it) meanwhile, or we
		// cannot tell because we were frozen ourselves.
		if heard || starved {
			s.det.restart(now)
			s.deadline = s.det.Deadline()
		}
		w.subjects.refresh(s)
		w.mu.Unlock()
		if starved {
			w.stats.lateConfirms.Add(1)
			w.log.Warn("heartbeat: confirmation timer ran late; accusing nobody and restarting the silence",
				"key", key, "late", time.Duration(late.Load()), "tolerance", w.cfg.LateTimerTolerance)
			return
		}
		w.stats.withdrawn.Add(1)
		w.log.Debug("heartbeat: suspicion withdrawn", "key", key, "confirmed", heard)
		return
	}
	w.subjects.remove(s)
	w.mu.Unlock()
	w.deliver(Suspicion{Key: key, Silence: now.Sub(s.heard), At: now})
}

func (w *Watcher) deliver(s Suspicion) {
	w.stats.suspicions.Add(1)
	w.log.Info("heartbeat: subject silent", "key", s.Key, "silence", s.Silence)
	w.deliverMu.Lock()
	defer w.deliverMu.Unlock()
	w.onSuspect(s)
}
