package schedule

import (
	"sort"
	"strings"
	"time"
)

// Windows returns the zone's dark windows overlapping [from, to), clipped to
// it and to known_until, merged (overlapping or touching windows become one,
// with the highest stage) and sorted. Only outages are listed: a stretch
// that is neither listed nor before known_until is Unknown, not powered; use
// StateAt or PoweredUntil to tell. An unknown zone has no windows.
//
// The rule for stage changes (docs/schedule-format.md, "Stages and the
// stage rule"): a timetable window is switched at the first instant inside
// it at which the stage in force includes it, and from then on it runs to
// its scheduled end, even if the stage drops or the announced stage ends
// meanwhile. A stage change never cuts an outage short; a stage rise
// mid-window darkens from the rise.
func (s *Schedule) Windows(zone string, from, to time.Time) []Window {
	c := s.index()
	if c.err != nil {
		return nil
	}
	z := c.zones[zone]
	if z == nil {
		return nil
	}
	return z.dark(c, from, to)
}

// dark computes the merged dark windows of the zone over [from, to).
func (z *zoneIndex) dark(c *compiled, from, to time.Time) []Window {
	to = minTime(to, c.known)
	if !from.Before(to) {
		return nil
	}
	var ws []Window
	// A row's window starts on its day and ends by the next midnight but one,
	// so the day before from is the earliest that can reach into the range.
	d0, d1 := localDay(from, c.loc)-1, localDay(to, c.loc)
	for day := d0; day <= d1; day++ {
		rows := z.rows[z.key(day)]
		if len(rows) == 0 {
			continue
		}
		date := dateOfDay(day)
		// Without an offset change over the two days a window can span,
		// wall-clock minutes are plain offsets from midnight (fast path).
		base := date.at(0, c.loc)
		after := dateOfDay(day+2).at(0, c.loc)
		_, o1 := base.Zone()
		_, o2 := after.Zone()
		uniform := o1 == o2 && after.Sub(base) == 48*time.Hour
		for _, r := range rows {
			a, b := span(r.Start, r.End)
			var start, end time.Time
			if uniform {
				start, end = base.Add(time.Duration(a)*time.Minute), base.Add(time.Duration(b)*time.Minute)
			} else {
				start, end = date.at(a, c.loc), date.at(b, c.loc)
			}
			if !end.After(from) || !start.Before(to) || !end.After(start) {
				continue
			}
			if act, st, ok := z.activate(r, start, end); ok {
				ws = append(ws, Window{Start: act, End: end, Stage: st, Source: "timetable"})
			}
		}
	}
	if len(z.powered) > 0 {
		ws = cutOut(ws, z.powered)
	}
	for _, o := range z.outages {
		if o.End.After(from) && o.Start.Before(to) {
			ws = append(ws, o)
		}
	}
	out := ws[:0]
	for _, w := range ws {
		w.Start, w.End = maxTime(w.Start, from), minTime(w.End, to)
		if w.End.After(w.Start) {
			out = append(out, w)
		}
	}
	return mergeWindows(out)
}

// activate finds when a window is switched: the first instant in
// [start, end) at which the stage in force includes the row.
func (z *zoneIndex) activate(r Row, start, end time.Time) (time.Time, int, bool) {
	if !z.hasFeed {
		return start, 0, true
	}
	for t := start; t.Before(end); {
		st, known, next := z.stageAt(t)
		if known && z.rowActive(r, st) {
			return t, st, true
		}
		if !next.After(t) {
			break
		}
		t = next
	}
	return time.Time{}, 0, false
}

// unknownAt reports whether the timetable says nothing about t (before
// known_until): past the feed's horizon, where the feed excludes the zone, or
// on a day a dates table does not list. Dark windows and powered overrides
// take precedence and are checked by the caller.
func (z *zoneIndex) unknownAt(t time.Time) bool {
	if z.hasFeed {
		if _, known, _ := z.stageAt(t); !known {
			return true
		}
	}
	if z.coverage != nil && !inIntervals(z.coverage, t) {
		return true
	}
	return false
}

// unknown returns the unknown stretches of [from, to): the timetable's
// unknown parts minus dark windows and powered overrides, plus everything at
// or after known_until.
func (z *zoneIndex) unknown(c *compiled, from, to time.Time) []interval {
	var u []interval
	upto := minTime(to, c.known)
	add := func(a, b time.Time) {
		a, b = maxTime(a, from), minTime(b, upto)
		if b.After(a) {
			u = append(u, interval{a, b})
		}
	}
	if z.hasFeed {
		add(z.horizon, upto)
		for _, sg := range z.segs {
			if sg.stage < 0 {
				add(sg.start, sg.end)
			}
		}
	}
	if z.coverage != nil {
		prev := from
		for _, cv := range z.coverage {
			add(prev, cv.start)
			prev = maxTime(prev, cv.end)
		}
		add(prev, upto)
	}
	u = mergeIntervals(u)
	if len(u) > 0 {
		u = cutIntervals(u, z.powered)
		dark := z.dark(c, from, upto)
		ds := make([]interval, len(dark))
		for i, w := range dark {
			ds[i] = interval{w.Start, w.End}
		}
		u = cutIntervals(u, ds)
	}
	if to.After(c.known) {
		u = append(u, interval{maxTime(from, c.known), to})
	}
	return u
}

func inIntervals(ivs []interval, t time.Time) bool {
	i := sort.Search(len(ivs), func(k int) bool { return ivs[k].end.After(t) })
	return i < len(ivs) && !ivs[i].start.After(t)
}

// mergeWindows sorts and merges overlapping or touching windows.
func mergeWindows(ws []Window) []Window {
	if len(ws) < 2 {
		return ws
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].Start.Before(ws[j].Start) })
	out := ws[:1]
	for _, w := range ws[1:] {
		last := &out[len(out)-1]
		if w.Start.After(last.End) {
			out = append(out, w)
			continue
		}
		last.End = maxTime(last.End, w.End)
		last.Stage = max(last.Stage, w.Stage)
		if !strings.Contains("+"+last.Source+"+", "+"+w.Source+"+") {
			last.Source += "+" + w.Source
		}
	}
	return out
}

// mergeIntervals sorts and merges overlapping or touching intervals.
func mergeIntervals(ivs []interval) []interval {
	if len(ivs) < 2 {
		return ivs
	}
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
	out := ivs[:1]
	for _, iv := range ivs[1:] {
		last := &out[len(out)-1]
		if iv.start.After(last.end) {
			out = append(out, iv)
			continue
		}
		last.end = maxTime(last.end, iv.end)
	}
	return out
}

// cutOut removes the (merged, sorted) intervals cut from each window.
func cutOut(ws []Window, cut []interval) []Window {
	var out []Window
	for _, w := range ws {
		for _, c := range cut {
			if !c.end.After(w.Start) || !c.start.Before(w.End) {
				continue
			}
			if c.start.After(w.Start) {
				part := w
				part.End = c.start
				out = append(out, part)
			}
			w.Start = c.end
			if !w.End.After(w.Start) {
				break
			}
		}
		if w.End.After(w.Start) {
			out = append(out, w)
		}
	}
	return out
}

// cutIntervals removes the (merged, sorted) intervals cut from ivs.
func cutIntervals(ivs, cut []interval) []interval {
	ws := make([]Window, len(ivs))
	for i, iv := range ivs {
		ws[i] = Window{Start: iv.start, End: iv.end}
	}
	ws = cutOut(ws, cut)
	out := make([]interval, len(ws))
	for i, w := range ws {
		out[i] = interval{w.Start, w.End}
	}
	return out
}
