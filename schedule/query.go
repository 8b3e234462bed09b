package schedule

import (
	"errors"
	"fmt"
	"time"
)

// State is a zone's power state at an instant.
type State int

// The states. The zero State is Unknown so that a forgotten answer is never
// mistaken for Powered.
const (
	// Unknown: the schedule says nothing (beyond known_until, beyond the last
	// announced stage, or where the zone's feed excludes it). Unknown is not
	// Powered.
	Unknown State = iota
	// Powered: the schedule says the zone has power.
	Powered
	// Dark: the zone is in a load-shedding window or an outage event.
	Dark
)

// String renders "powered", "dark" or "unknown".
func (s State) String() string {
	switch s {
	case Powered:
		return "powered"
	case Dark:
		return "dark"
	}
	return "unknown"
}

// MarshalText renders the state as text (for JSON output).
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ErrUnknownZone is wrapped by StateAt for a zone the schedule lacks.
var ErrUnknownZone = errors.New("zone not in schedule")

// StateAt says whether zone is powered, dark or unknown at t. Precedence: at
// or after known_until, Unknown; an outage event or a switched timetable
// window, Dark; a powered override, Powered; past the feed's horizon, where
// the feed excludes the zone, or on a day a dates table does not list,
// Unknown; otherwise Powered. It is a pure function of t.
func (s *Schedule) StateAt(zone string, t time.Time) (State, error) {
	c := s.index()
	if c.err != nil {
		return Unknown, c.err
	}
	z := c.zones[zone]
	if z == nil {
		return Unknown, fmt.Errorf("state of %q: %w", zone, ErrUnknownZone)
	}
	return z.stateAt(c, t), nil
}

func (z *zoneIndex) stateAt(c *compiled, t time.Time) State {
	if !t.Before(c.known) {
		return Unknown
	}
	if len(z.dark(c, t, t.Add(time.Nanosecond))) > 0 {
		return Dark
	}
	if inIntervals(z.powered, t) {
		return Powered
	}
	if z.unknownAt(t) {
		return Unknown
	}
	return Powered
}

// firstSpan is the first look-ahead of the forward searches; it doubles
// until known_until or MaxLookahead is reached.
const firstSpan = 36 * time.Hour

// MaxLookahead bounds the forward searches of NextCut, NextRestore and
// PoweredUntil, so a schedule known for decades cannot make a query scan
// decades of days.
const MaxLookahead = 400 * 24 * time.Hour

// lookahead calls fn over [after, to) with a doubling span until fn reports
// done or to reaches known_until or after+MaxLookahead. It returns the last
// to it tried.
func lookahead(c *compiled, after time.Time, fn func(to time.Time) bool) time.Time {
	limit := minTime(c.known, after.Add(MaxLookahead))
	for span := firstSpan; ; span *= 2 {
		to := after.Add(span)
		if !to.Before(limit) {
			to = limit
		}
		if fn(to) || !to.Before(limit) {
			return to
		}
	}
}

func (s *Schedule) zone(name string) (*compiled, *zoneIndex) {
	c := s.index()
	if c.err != nil {
		return nil, nil
	}
	return c, c.zones[name]
}

// NextCut returns the start of the first dark window that begins strictly
// after after (a window already under way at after does not count), and
// false if none begins before known_until (or within MaxLookahead) or the
// zone is unknown.
func (s *Schedule) NextCut(zone string, after time.Time) (time.Time, bool) {
	c, z := s.zone(zone)
	if z == nil || !after.Before(c.known) {
		return time.Time{}, false
	}
	var cut time.Time
	found := false
	lookahead(c, after, func(to time.Time) bool {
		for _, w := range z.dark(c, after, to) {
			if w.Start.After(after) {
				cut, found = w.Start, true
				return true
			}
		}
		return false
	})
	return cut, found
}

// NextRestore returns when power next returns: the end of the dark window
// under way at after, or else of the next one. It returns false when no
// window ends before known_until, or when the schedule does not know the
// zone is powered once the window ends.
func (s *Schedule) NextRestore(zone string, after time.Time) (time.Time, bool) {
	c, z := s.zone(zone)
	if z == nil || !after.Before(c.known) {
		return time.Time{}, false
	}
	var end time.Time
	found := false
	lookahead(c, after, func(to time.Time) bool {
		ws := z.dark(c, after, to)
		if len(ws) == 0 || !ws[0].End.Before(to) {
			return false // no window yet, or it runs past the look-ahead
		}
		end, found = ws[0].End, true
		return true
	})
	if !found || z.stateAt(c, end) != Powered {
		return time.Time{}, false
	}
	return end, true
}

// PoweredUntil returns how long zone stays powered from t, and what follows:
// (next cut, Dark), or (start of the unknown, Unknown), at the latest
// (known_until, Unknown). If the zone is not powered at t it returns
// (t, state at t). A zone powered for longer than MaxLookahead yields
// (t+MaxLookahead, Powered): powered at least until then.
func (s *Schedule) PoweredUntil(zone string, t time.Time) (time.Time, State) {
	c, z := s.zone(zone)
	if z == nil {
		return t, Unknown
	}
	if st := z.stateAt(c, t); st != Powered {
		return t, st
	}
	until, next := c.known, Unknown
	found := false
	last := lookahead(c, t, func(to time.Time) bool {
		ws := z.dark(c, t, to)
		us := z.unknown(c, t, to)
		switch {
		case len(ws) > 0 && (len(us) == 0 || ws[0].Start.Before(us[0].start)):
			until, next = ws[0].Start, Dark
		case len(us) > 0:
			until, next = us[0].start, Unknown
		default:
			return false
		}
		found = true
		return true
	})
	if !found && last.Before(c.known) {
		return last, Powered // powered for at least MaxLookahead
	}
	return until, next
}
