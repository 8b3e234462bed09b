package schedule

import (
	"sync/atomic"
	"time"
)

// FormatV1 is the value of the format field this package reads and writes.
const FormatV1 = "bedwe-schedule/1"

// MaxStage is the highest load-shedding stage a schedule may name.
const MaxStage = 16

// Schedule is a parsed timetable. Build one with Parse, Load, an importer or
// a struct literal; do not modify it after the first query (queries cache a
// compiled index). A Schedule is safe for concurrent queries.
type Schedule struct {
	// Format is FormatV1.
	Format string
	// TimeZone is the IANA zone in which wall-clock rows and local stage
	// change times are read, e.g. "Africa/Johannesburg".
	TimeZone string
	// IssuedAt is when the publisher produced this schedule; newer wins.
	IssuedAt time.Time
	// KnownUntil is the end of what the schedule claims to know: at and after
	// it every zone is Unknown.
	KnownUntil time.Time
	// Note is free text for humans.
	Note string
	// Zones are the areas the schedule covers; names are unique.
	Zones []Zone
	// Feeds are the stage timelines; names are unique.
	Feeds []Feed
	// Events are one-off outages and cancellations.
	Events []Event

	compiled atomic.Pointer[compiled]
}

// Zone is one area that is switched as a unit.
type Zone struct {
	// Name identifies the zone; feed exclude/include patterns match it.
	Name string
	// Feed names the stage feed that applies to this zone. Empty means the
	// table is unconditional: every row applies whatever the stage (daily
	// feeder cycles).
	Feed string
	// Source says where the table came from (URL, file); informational.
	Source string
	// Table is the zone's recurring slot table.
	Table SlotTable

	pos Pos
}

// TableKind says how a row's Day is matched against a calendar date.
type TableKind string

// The slot table kinds.
const (
	// DayOfMonth rows name a day 1..31 (or 1..Fold when folded).
	DayOfMonth TableKind = "day-of-month"
	// DayOfWeek rows name an ISO weekday, 1 = Monday .. 7 = Sunday.
	DayOfWeek TableKind = "day-of-week"
	// Cycle rows name a day 1..Period of a cycle that starts on Anchor.
	Cycle TableKind = "cycle"
	// Daily rows apply every day; Day is 0.
	Daily TableKind = "daily"
	// Dates rows name an explicit calendar Date; days not listed are Unknown.
	Dates TableKind = "dates"
)

// SlotTable is a zone's recurring timetable.
type SlotTable struct {
	// Kind selects how days are matched.
	Kind TableKind
	// Fold, for DayOfMonth, repeats a Fold-day pattern inside each month,
	// restarting on the 1st: with Fold 16, day 17 uses the rows of day 1.
	Fold int
	// Period is the cycle length in days (Cycle only).
	Period int
	// Anchor is the date that is day 1 of the cycle (Cycle only).
	Anchor Date
	// Cumulative true means the rows listed for stage N already include every
	// window of stages 1..N-1 (the CSV and API shape): a row applies when the
	// stage in force equals its stage, and stages above the highest listed
	// behave like the highest. False means each window is listed once, at the
	// lowest stage that switches it, and applies at that stage and above.
	Cumulative bool
	// Rows are the windows.
	Rows []Row
}

// Row is one window of a slot table.
type Row struct {
	// Day is matched per the table kind (0 for Daily and Dates).
	Day int
	// Date is the calendar date (Dates tables only).
	Date Date
	// Start and End are wall-clock times. End <= Start means End is on the
	// next day; End may be 24:00 and 23:59 is read as 24:00.
	Start, End Clock
	// Stage is the stage this row belongs to (1..MaxStage); ignored for zones
	// without a feed.
	Stage int

	pos Pos
}

// Feed is a stage timeline: which stage is in force when.
type Feed struct {
	// Name identifies the feed, e.g. "national" or "coct".
	Name string
	// KnownUntil optionally extends the feed's horizon past its last change;
	// gaps before the horizon are stage 0. Without it the horizon is the end
	// of the last change.
	KnownUntil time.Time
	// Changes are the announced stages; they must not overlap for any zone.
	Changes []Change

	pos Pos
}

// Change puts a stage in force over [Start, End).
type Change struct {
	Stage      int
	Start, End time.Time
	// Source says who announced it; informational.
	Source string
	// Exclude is a regular expression on zone names: matching zones are not
	// governed by this change (they run their own stages) and are Unknown
	// during it unless another change of the feed covers them.
	Exclude string
	// Include, when set, limits the change to zones whose name matches.
	Include string

	pos Pos
}

// EventKind distinguishes explicit outages from cancellations.
type EventKind string

// The event kinds.
const (
	// EventOutage darkens the zone over the event, whatever the timetable
	// says.
	EventOutage EventKind = "outage"
	// EventPowered cancels timetable windows over the event; it does not
	// cancel EventOutage events.
	EventPowered EventKind = "powered"
)

// Event is a one-off window for one zone (or "*" for every zone).
type Event struct {
	Zone       string
	Kind       EventKind
	Start, End time.Time
	// Stage is informational (the stage that caused an outage), 0 if unknown.
	Stage int
	// Note is free text, e.g. "Stage 2".
	Note string

	pos Pos
}

// Window is a dark interval of a zone.
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Stage is the stage in force when the window was switched (0 for
	// unconditional tables and events without a stage).
	Stage int `json:"stage"`
	// Source is "timetable", "event" or both joined by "+" after merging.
	Source string `json:"source"`
}

// Duration is End - Start.
func (w Window) Duration() time.Duration { return w.End.Sub(w.Start) }
