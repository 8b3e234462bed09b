package outage

import (
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// Drain tells the node in selfZone whether to drain now: stop accepting
// work and hand off its join records and queued packs. It is true when the
// timetable says the zone is dark now (cutAt is now: the board runs on a
// battery or the timetable is early), or when the next cut (NextCut) is at
// most DrainMargin away (cutAt is the cut). It is false without a
// timetable, with a clock that reads before the timetable's issued_at, for
// a zone the timetable does not list, and when the zone's state is Unknown:
// no evidence of a cut is no reason to stop working.
//
// The node polls it (every few seconds, or on a timer set for DrainAt)
// and stops draining when it turns false again after power returns.
func (v *View) Drain(selfZone string) (drain bool, cutAt time.Time) {
	now := v.clock.Now()
	s := v.sched.Load()
	if s == nil || !schedule.Plausible(now, s) {
		return false, time.Time{}
	}
	st, err := s.StateAt(selfZone, now)
	if err != nil {
		return false, time.Time{}
	}
	switch st {
	case schedule.Dark:
		return true, now
	case schedule.Powered:
		cut, ok := s.NextCut(selfZone, now)
		if ok && cut.Sub(now) <= v.cfg.DrainMargin {
			return true, cut
		}
	}
	return false, time.Time{}
}

// DrainAt is when Drain will next turn true for selfZone if the timetable
// holds: DrainMargin before the next cut (now, if that is already past). It
// is false when Drain has no cut to foresee. A node on a virtual clock sets
// a real timer for VirtualClock.RealAt(at).
func (v *View) DrainAt(selfZone string) (at time.Time, ok bool) {
	now := v.clock.Now()
	s := v.sched.Load()
	if s == nil || !schedule.Plausible(now, s) {
		return time.Time{}, false
	}
	if st, err := s.StateAt(selfZone, now); err != nil || st == schedule.Unknown {
		return time.Time{}, false
	} else if st == schedule.Dark {
		return now, true
	}
	cut, ok := s.NextCut(selfZone, now)
	if !ok {
		return time.Time{}, false
	}
	at = cut.Add(-v.cfg.DrainMargin)
	if at.Before(now) {
		at = now
	}
	return at, true
}
