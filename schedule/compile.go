package schedule

import (
	"fmt"
	"sort"
	"time"
)

// compiled is the query index of a Schedule, built once on first use.
type compiled struct {
	err   error
	loc   *time.Location
	known time.Time
	zones map[string]*zoneIndex
}

// segment is a constant stage over [start, end); stage -1 means the feed
// excludes the zone there (unknown).
type segment struct {
	start, end time.Time
	stage      int
}

// interval is [start, end).
type interval struct{ start, end time.Time }

// zoneIndex is everything a query about one zone needs.
type zoneIndex struct {
	name       string
	hasFeed    bool
	kind       TableKind
	fold       int
	period     int
	anchor     int // day number of the cycle's day 1
	cumulative bool
	maxStage   int
	rows       map[int][]Row // by day key, see key
	coverage   []interval    // Dates tables: the listed days; nil means every day
	segs       []segment     // sorted, disjoint; gaps are stage 0
	horizon    time.Time     // the stage is known before it
	outages    []Window
	powered    []interval
}

// index returns the compiled index, building it on first use. Concurrent
// first calls may both build it; the results are identical.
func (s *Schedule) index() *compiled {
	if c := s.compiled.Load(); c != nil {
		return c
	}
	c := s.compile()
	s.compiled.Store(c)
	return c
}

func (s *Schedule) compile() *compiled {
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil || s.TimeZone == "" {
		return &compiled{err: fmt.Errorf("schedule time zone %q: %v", s.TimeZone, err)}
	}
	c := &compiled{loc: loc, known: s.KnownUntil, zones: make(map[string]*zoneIndex, len(s.Zones))}
	feeds := map[string]*Feed{}
	for i := range s.Feeds {
		if _, dup := feeds[s.Feeds[i].Name]; !dup {
			feeds[s.Feeds[i].Name] = &s.Feeds[i]
		}
	}
	for i := range s.Zones {
		z := &s.Zones[i]
		if _, dup := c.zones[z.Name]; dup {
			continue
		}
		zi := &zoneIndex{
			name: z.Name, kind: z.Table.Kind, fold: z.Table.Fold, period: z.Table.Period,
			cumulative: z.Table.Cumulative, rows: map[int][]Row{}, horizon: s.KnownUntil,
		}
		if !z.Table.Anchor.IsZero() {
			zi.anchor = z.Table.Anchor.dayNumber()
		}
		days := map[int]bool{}
		for _, r := range z.Table.Rows {
			k := r.Day
			switch zi.kind {
			case Daily:
				k = 0
			case Dates:
				k = r.Date.dayNumber()
				days[k] = true
			}
			zi.rows[k] = append(zi.rows[k], r)
			zi.maxStage = max(zi.maxStage, r.Stage)
		}
		if zi.kind == Dates {
			zi.coverage = dayCoverage(days, loc)
		}
		if f := feeds[z.Feed]; z.Feed != "" {
			zi.hasFeed = true
			zi.horizon = time.Time{}
			if f != nil {
				zi.segs, zi.horizon = feedSegments(f, z.Name)
				if zi.horizon.After(s.KnownUntil) {
					zi.horizon = s.KnownUntil
				}
			}
		}
		for _, e := range s.Events {
			if e.Zone != z.Name && e.Zone != "*" || !e.End.After(e.Start) {
				continue
			}
			switch e.Kind {
			case EventOutage:
				zi.outages = append(zi.outages, Window{Start: e.Start, End: e.End, Stage: e.Stage, Source: "event"})
			case EventPowered:
				zi.powered = append(zi.powered, interval{e.Start, e.End})
			}
		}
		zi.powered = mergeIntervals(zi.powered)
		c.zones[z.Name] = zi
	}
	return c
}

// dayCoverage turns a set of day numbers into merged local-day intervals.
func dayCoverage(days map[int]bool, loc *time.Location) []interval {
	ds := make([]int, 0, len(days))
	for d := range days {
		ds = append(ds, d)
	}
	sort.Ints(ds)
	var out []interval
	for _, d := range ds {
		iv := interval{dateOfDay(d).at(0, loc), dateOfDay(d+1).at(0, loc)}
		if n := len(out); n > 0 && !out[n-1].end.Before(iv.start) {
			out[n-1].end = iv.end
			continue
		}
		out = append(out, iv)
	}
	return out
}

// feedSegments resolves a feed's changes for one zone into disjoint stage
// segments, and returns the feed's horizon. Where changes overlap (an error
// Validate reports) the highest stage wins; where only changes that exclude
// the zone apply, the segment is unknown (-1).
func feedSegments(f *Feed, zone string) ([]segment, time.Time) {
	var horizon time.Time
	if !f.KnownUntil.IsZero() {
		horizon = f.KnownUntil
	}
	var bounds []time.Time
	for _, c := range f.Changes {
		if c.End.After(horizon) {
			horizon = c.End
		}
		if c.End.After(c.Start) {
			bounds = append(bounds, c.Start, c.End)
		}
	}
	sort.Slice(bounds, func(i, j int) bool { return bounds[i].Before(bounds[j]) })
	uniq := bounds[:0]
	for _, b := range bounds {
		if len(uniq) == 0 || !uniq[len(uniq)-1].Equal(b) {
			uniq = append(uniq, b)
		}
	}
	if len(uniq) < 2 {
		return nil, horizon
	}
	stage := make([]int, len(uniq)-1) // per elementary interval
	for i := range stage {
		stage[i] = -2 // nothing announced
	}
	for _, c := range f.Changes {
		if !c.End.After(c.Start) {
			continue
		}
		m := newMatcher(c)
		st := -1
		if m.applies(zone) {
			st = c.Stage
		} else if !m.excluded(zone) {
			continue
		}
		i := sort.Search(len(uniq), func(k int) bool { return !uniq[k].Before(c.Start) })
		for ; i < len(stage) && uniq[i].Before(c.End); i++ {
			stage[i] = max(stage[i], st)
		}
	}
	var segs []segment
	for i, st := range stage {
		if st == -2 {
			continue
		}
		if n := len(segs); n > 0 && segs[n-1].stage == st && segs[n-1].end.Equal(uniq[i]) {
			segs[n-1].end = uniq[i+1]
			continue
		}
		segs = append(segs, segment{uniq[i], uniq[i+1], st})
	}
	return segs, horizon
}

// farFuture stands for "no further boundary".
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// stageAt returns the stage in force at t, whether it is known, and the
// instant the answer next changes.
func (z *zoneIndex) stageAt(t time.Time) (stage int, known bool, next time.Time) {
	if !t.Before(z.horizon) {
		return 0, false, farFuture
	}
	i := sort.Search(len(z.segs), func(k int) bool { return z.segs[k].end.After(t) })
	if i < len(z.segs) && !z.segs[i].start.After(t) {
		sg := z.segs[i]
		return max(sg.stage, 0), sg.stage >= 0, minTime(sg.end, z.horizon)
	}
	next = z.horizon
	if i < len(z.segs) {
		next = minTime(z.segs[i].start, next)
	}
	return 0, true, next
}

// key maps a local day number to the slot table key of its rows.
func (z *zoneIndex) key(day int) int {
	switch z.kind {
	case DayOfMonth:
		d := dateOfDay(day).Day
		if z.fold > 0 {
			return (d-1)%z.fold + 1
		}
		return d
	case DayOfWeek:
		return mod(day+3, 7) + 1 // 1970-01-01 was a Thursday (ISO 4)
	case Cycle:
		if z.period <= 0 {
			return -1
		}
		return mod(day-z.anchor, z.period) + 1
	case Daily:
		return 0
	case Dates:
		return day
	}
	return -1
}

// rowActive reports whether a row switches at stage st.
func (z *zoneIndex) rowActive(r Row, st int) bool {
	if st <= 0 {
		return false
	}
	if z.cumulative {
		return r.Stage == min(st, z.maxStage)
	}
	return r.Stage <= st
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
