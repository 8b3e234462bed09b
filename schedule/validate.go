package schedule

import (
	"fmt"
	"regexp"
	"sort"
	"time"
)

// minBlock and maxBlock bound what a timetable window plausibly lasts; rows
// outside are reported as warnings (real files contain 20:00-20:30 blocks).
const (
	minBlock = 60      // minutes
	maxBlock = 24 * 60 // minutes; a window of a whole day is suspicious
)

// Validate reports every problem of the schedule: errors make it unusable
// (unknown time zone, overlapping stage changes for a zone, a zone naming a
// missing feed, rows outside the table's days), warnings are suspicious but
// usable (a 30-minute block, duplicate rows, a feed that announces nothing).
// It never panics on a malformed schedule.
func (s *Schedule) Validate() []Problem {
	var ps problems
	top := Pos{Line: 1, Col: 1}
	if s.Format == "" {
		ps.errorf(top, "format is missing: want %q", FormatV1)
	} else if s.Format != FormatV1 {
		ps.errorf(top, "format %q is not supported: want %q", s.Format, FormatV1)
	}
	if s.TimeZone == "" {
		ps.errorf(top, "timezone is missing: want an IANA zone such as Africa/Johannesburg")
	} else if _, err := time.LoadLocation(s.TimeZone); err != nil {
		ps.errorf(top, "timezone %q: %v", s.TimeZone, err)
	}
	if s.IssuedAt.IsZero() || s.KnownUntil.IsZero() {
		if s.IssuedAt.IsZero() {
			ps.errorf(top, "issued_at is missing")
		}
		if s.KnownUntil.IsZero() {
			ps.errorf(top, "known_until is missing: beyond it every zone is unknown")
		}
	} else if !s.KnownUntil.After(s.IssuedAt) {
		ps.errorf(top, "known_until %s is not after issued_at %s", s.KnownUntil.Format(time.RFC3339), s.IssuedAt.Format(time.RFC3339))
	}

	feeds := map[string]*Feed{}
	for i := range s.Feeds {
		f := &s.Feeds[i]
		s.validateFeed(f, &ps)
		if _, dup := feeds[f.Name]; dup {
			ps.errorf(f.pos, "feed %q is defined twice", f.Name)
		}
		feeds[f.Name] = f
	}
	zones := map[string]bool{}
	for i := range s.Zones {
		z := &s.Zones[i]
		if z.Name == "" {
			ps.errorf(z.pos, "zone %d has no name", i+1)
		} else if zones[z.Name] {
			ps.errorf(z.pos, "zone %q is defined twice", z.Name)
		}
		zones[z.Name] = true
		if z.Feed != "" && feeds[z.Feed] == nil {
			ps.errorf(z.pos, "zone %s: feed %q is not defined", z.Name, z.Feed)
		}
		validateTable(z, &ps)
	}
	for i := range s.Feeds {
		if f := &s.Feeds[i]; feeds[f.Name] == f {
			s.checkOverlaps(f, &ps)
		}
	}
	s.validateEvents(zones, &ps)
	if len(s.Zones) == 0 {
		ps.warnf(top, "no zones: the schedule answers Unknown for every zone")
	}
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i].Pos, ps[j].Pos
		return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col)
	})
	return ps
}

func (s *Schedule) validateFeed(f *Feed, ps *problems) {
	if f.Name == "" {
		ps.errorf(f.pos, "a feed has no name")
	}
	if len(f.Changes) == 0 && f.KnownUntil.IsZero() {
		ps.warnf(f.pos, "feed %s announces no stage: its zones are unknown everywhere", f.Name)
	}
	for _, c := range f.Changes {
		if c.Stage < 0 || c.Stage > MaxStage {
			ps.errorf(c.pos, "feed %s: stage %d is outside 0..%d", f.Name, c.Stage, MaxStage)
		}
		if !c.Start.IsZero() && !c.End.IsZero() && !c.End.After(c.Start) {
			ps.errorf(c.pos, "feed %s: stage change ends (%s) before it starts (%s)", f.Name, c.End.Format(time.RFC3339), c.Start.Format(time.RFC3339))
		}
		for _, re := range []string{c.Exclude, c.Include} {
			if _, err := regexp.Compile(re); err != nil {
				ps.errorf(c.pos, "feed %s: bad zone pattern %q: %v", f.Name, re, err)
			}
		}
	}
}

// checkOverlaps reports stage changes that overlap in time and both govern
// some zone (or both govern every zone).
func (s *Schedule) checkOverlaps(f *Feed, ps *problems) {
	idx := make([]int, len(f.Changes))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return f.Changes[idx[a]].Start.Before(f.Changes[idx[b]].Start) })
	var names []string
	for _, z := range s.Zones {
		if z.Feed == f.Name {
			names = append(names, z.Name)
		}
	}
	ms := make([]matcher, len(f.Changes))
	for i, c := range f.Changes {
		ms[i] = newMatcher(c)
	}
	for a := 0; a < len(idx); a++ {
		ca := f.Changes[idx[a]]
		for b := a + 1; b < len(idx) && f.Changes[idx[b]].Start.Before(ca.End); b++ {
			cb := f.Changes[idx[b]]
			shared := ""
			if ms[idx[a]].universal() && ms[idx[b]].universal() {
				shared = "every zone"
			}
			for _, n := range names {
				if shared == "" && ms[idx[a]].applies(n) && ms[idx[b]].applies(n) {
					shared = "zone " + n
				}
			}
			if shared != "" {
				ps.errorf(cb.pos, "feed %s: stage %d from %s overlaps stage %d from %s (until %s) for %s%s",
					f.Name, cb.Stage, cb.Start.Format(time.RFC3339), ca.Stage, ca.Start.Format(time.RFC3339), ca.End.Format(time.RFC3339), shared, posSuffix(ca.pos))
			}
		}
	}
}

func posSuffix(p Pos) string {
	if p.Line == 0 {
		return ""
	}
	return " at " + p.String()
}

func validateTable(z *Zone, ps *problems) {
	t := &z.Table
	maxDay := 0
	switch t.Kind {
	case DayOfMonth:
		maxDay = 31
		if t.Fold < 0 || t.Fold > 31 {
			ps.errorf(z.pos, "zone %s: fold %d is outside 1..31", z.Name, t.Fold)
		} else if t.Fold > 0 {
			maxDay = t.Fold
		}
	case DayOfWeek:
		maxDay = 7
	case Cycle:
		if t.Period <= 0 || t.Period > 366 {
			ps.errorf(z.pos, "zone %s: a cycle table needs a period of 1..366 days, not %d", z.Name, t.Period)
		}
		if t.Anchor.IsZero() {
			ps.errorf(z.pos, "zone %s: a cycle table needs an anchor date (day 1 of the cycle)", z.Name)
		}
		maxDay = t.Period
	case Daily, Dates:
	case "":
		ps.errorf(z.pos, "zone %s: table kind is missing: want day-of-month, day-of-week, cycle, daily or dates", z.Name)
	default:
		ps.errorf(z.pos, "zone %s: table kind %q is unknown: want day-of-month, day-of-week, cycle, daily or dates", z.Name, t.Kind)
	}
	if t.Fold != 0 && t.Kind != DayOfMonth {
		ps.errorf(z.pos, "zone %s: fold only applies to day-of-month tables", z.Name)
	}
	if len(t.Rows) == 0 {
		ps.warnf(z.pos, "zone %s: the table has no rows: the zone is never cut", z.Name)
	}
	seen := map[string]bool{}
	for _, r := range t.Rows {
		switch {
		case t.Kind == Dates && r.Date.IsZero():
			ps.errorf(r.pos, "zone %s: a dates table row needs a date", z.Name)
		case t.Kind == Daily || t.Kind == Dates:
			if r.Day != 0 {
				ps.errorf(r.pos, "zone %s: a %s table row takes no day (got %d)", z.Name, t.Kind, r.Day)
			}
		case maxDay > 0 && (r.Day < 1 || r.Day > maxDay):
			ps.errorf(r.pos, "zone %s: day %d is outside 1..%d for a %s table", z.Name, r.Day, maxDay, t.Kind)
		}
		if z.Feed != "" && (r.Stage < 1 || r.Stage > MaxStage) {
			ps.errorf(r.pos, "zone %s: stage %d is outside 1..%d", z.Name, r.Stage, MaxStage)
		}
		if r.Start < 0 || r.Start >= 1440 || r.End < 0 || r.End > 1440 {
			ps.errorf(r.pos, "zone %s: window %s-%s is outside 00:00..24:00", z.Name, r.Start, r.End)
			continue
		}
		a, b := span(r.Start, r.End)
		if d := b - a; d < minBlock || d >= maxBlock {
			ps.warnf(r.pos, "zone %s: window %s-%s lasts %s: blocks usually last 2h to 4h30", z.Name, r.Start, r.End, minutesText(d))
		}
		key := fmt.Sprintf("%d/%s/%d/%d/%d", r.Day, r.Date, r.Start, r.End, r.Stage)
		if seen[key] {
			ps.warnf(r.pos, "zone %s: duplicate row day %d %s-%s stage %d", z.Name, r.Day, r.Start, r.End, r.Stage)
		}
		seen[key] = true
	}
}

func (s *Schedule) validateEvents(zones map[string]bool, ps *problems) {
	for i, e := range s.Events {
		if e.Zone != "*" && !zones[e.Zone] {
			ps.errorf(e.pos, "event %d: zone %q is not defined", i+1, e.Zone)
		}
		if e.Kind != EventOutage && e.Kind != EventPowered {
			ps.errorf(e.pos, "event %d: kind %q is unknown: want outage or powered", i+1, e.Kind)
		}
		if !e.Start.IsZero() && !e.End.IsZero() && !e.End.After(e.Start) {
			ps.errorf(e.pos, "event %d: ends before it starts", i+1)
		}
		for j := 0; j < i; j++ {
			o := s.Events[j]
			if o.Kind != e.Kind && (o.Zone == e.Zone || o.Zone == "*" || e.Zone == "*") && o.Start.Before(e.End) && e.Start.Before(o.End) {
				ps.warnf(e.pos, "event %d (%s) overlaps event %d (%s) in zone %s: the outage wins", i+1, e.Kind, j+1, o.Kind, e.Zone)
			}
		}
	}
}

// matcher applies a change's include/exclude patterns to zone names. A bad
// pattern (reported by Validate) matches nothing.
type matcher struct {
	include, exclude *regexp.Regexp
	bad              bool
}

func newMatcher(c Change) matcher {
	var m matcher
	var err error
	if c.Include != "" {
		if m.include, err = regexp.Compile(c.Include); err != nil {
			m.bad = true
		}
	}
	if c.Exclude != "" {
		if m.exclude, err = regexp.Compile(c.Exclude); err != nil {
			m.bad = true
		}
	}
	return m
}

func (m matcher) universal() bool { return !m.bad && m.include == nil && m.exclude == nil }

// applies reports whether the change governs the zone.
func (m matcher) applies(zone string) bool {
	if m.bad {
		return false
	}
	return (m.include == nil || m.include.MatchString(zone)) && (m.exclude == nil || !m.exclude.MatchString(zone))
}

// excluded reports whether the change explicitly leaves the zone to another
// authority (matched by exclude, or not matched by include).
func (m matcher) excluded(zone string) bool { return !m.bad && !m.applies(zone) }
