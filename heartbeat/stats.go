package heartbeat

import (
	"sync/atomic"
	"time"
)

// Stats counts what a Watcher did since it started, for metrics and for
// tuning against false alarms: many Withdrawn means the detector is too
// eager for this network; many LateTicks means this machine is too busy
// for its CheckInterval and LateTimerTolerance.
type Stats struct {
	// Watched is the number of subjects being watched now.
	Watched int
	// Beats counts beats accepted for watched subjects.
	Beats uint64
	// Checks counts check ticks that looked for silent subjects.
	Checks uint64
	// Suspicions counts subjects declared silent and reported.
	Suspicions uint64
	// Withdrawn counts suspicions dropped before being reported, because
	// Confirm said another peer still hears the subject or because the
	// subject beat while it was being confirmed.
	Withdrawn uint64
	// LateTicks counts check ticks that came later than LateTimerTolerance
	// and so accused nobody and restarted every subject's silence.
	LateTicks uint64
	// LateConfirms counts negative confirmations that were not trusted
	// because their own timeout fired later than LateTimerTolerance: the
	// subject's silence restarted instead of it being reported.
	LateConfirms uint64
	// WorstLateness is the latest any check tick has fired, tolerated or
	// not: compare it with LateTimerTolerance.
	WorstLateness time.Duration
}

// counters are the Watcher's Stats, updated atomically (atomic types keep
// the 64-bit fields aligned on 32-bit ARM).
type counters struct {
	beats, checks, suspicions, withdrawn, lateTicks, lateConfirms atomic.Uint64
	worstLateness                                                 atomic.Int64
}

func (c *counters) noteLateness(late time.Duration) {
	for {
		old := c.worstLateness.Load()
		if int64(late) <= old || c.worstLateness.CompareAndSwap(old, int64(late)) {
			return
		}
	}
}

func (c *counters) snapshot(watched int) Stats {
	return Stats{
		Watched:       watched,
		Beats:         c.beats.Load(),
		Checks:        c.checks.Load(),
		Suspicions:    c.suspicions.Load(),
		Withdrawn:     c.withdrawn.Load(),
		LateTicks:     c.lateTicks.Load(),
		LateConfirms:  c.lateConfirms.Load(),
		WorstLateness: time.Duration(c.worstLateness.Load()),
	}
}
