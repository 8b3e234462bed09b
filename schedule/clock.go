package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Pos is a position in a schedule file; Line and Col are 1-based. The zero
// Pos means "no position" (schedules built in code or by importers).
type Pos struct {
	Line, Col int
}

// String renders LINE:COL, or "" for the zero Pos.
func (p Pos) String() string {
	if p.Line == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Col)
}

// Clock is a wall-clock time of day in minutes after midnight, 0..1440
// (1440 is 24:00, only meaningful as an end).
type Clock int

// ParseClock reads "HH:MM" (also "H:MM", "HHMM" and "HH:MM:SS" with zero
// seconds). "24:00" is 1440; "23:59" is returned as 1439 (callers decide
// whether it means the end of the day).
func ParseClock(s string) (Clock, error) {
	s = strings.TrimSpace(s)
	var hh, mm string
	switch {
	case strings.Count(s, ":") == 2 && strings.HasSuffix(s, ":00"):
		s = strings.TrimSuffix(s, ":00")
		fallthrough
	case strings.Count(s, ":") == 1:
		hh, mm, _ = strings.Cut(s, ":")
	case len(s) == 4:
		hh, mm = s[:2], s[2:]
	default:
		return 0, fmt.Errorf("bad time of day %q: want HH:MM", s)
	}
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	if err1 != nil || err2 != nil || len(mm) != 2 || len(hh) == 0 || len(hh) > 2 || h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && m != 0) {
		return 0, fmt.Errorf("bad time of day %q: want HH:MM between 00:00 and 24:00", s)
	}
	return Clock(h*60 + m), nil
}

// String renders HH:MM.
func (c Clock) String() string { return fmt.Sprintf("%02d:%02d", int(c)/60, int(c)%60) }

// endOfDay23_59 is how some cities write the end of the last block of a day.
const endOfDay23_59 Clock = 23*60 + 59

// span returns the window's start and end in minutes after the row day's
// midnight: an end at or before the start is on the next day, and 23:59 as
// an end means 24:00.
func span(start, end Clock) (int, int) {
	e := int(end)
	if end == endOfDay23_59 {
		e = 1440
	}
	if e <= int(start) {
		e += 1440
	}
	return int(start), e
}

// Date is a calendar date without a zone.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// ParseDate reads YYYY-MM-DD.
func ParseDate(s string) (Date, error) {
	t, err := time.Parse(time.DateOnly, strings.TrimSpace(s))
	if err != nil {
		return Date{}, fmt.Errorf("bad date %q: want YYYY-MM-DD", s)
	}
	return Date{t.Year(), t.Month(), t.Day()}, nil
}

// IsZero reports whether d is the zero Date.
func (d Date) IsZero() bool { return d == Date{} }

// String renders YYYY-MM-DD.
func (d Date) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, int(d.Month), d.Day) }

// dayNumber is the number of days since 1970-01-01 (negative before it).
func (d Date) dayNumber() int {
	return int(time.Date(d.Year, d.Month, d.Day, 12, 0, 0, 0, time.UTC).Unix() / 86400)
}

// dateOfDay is the inverse of dayNumber.
func dateOfDay(n int) Date {
	t := time.Unix(int64(n)*86400+43200, 0).UTC()
	return Date{t.Year(), t.Month(), t.Day()}
}

// localDay is the day number of t's calendar date in loc.
func localDay(t time.Time, loc *time.Location) int {
	y, m, d := t.In(loc).Date()
	return Date{y, m, d}.dayNumber()
}

// at returns the instant min minutes after midnight of date d in loc, by wall
// clock: on DST days a window may be shorter, or repeat an hour.
func (d Date) at(minutes int, loc *time.Location) time.Time {
	return time.Date(d.Year, d.Month, d.Day, 0, minutes, 0, 0, loc)
}

// mod is a modulo that stays non-negative for negative a (dates before a
// cycle's anchor).
func mod(a, n int) int {
	r := a % n
	if r < 0 {
		r += n
	}
	return r
}

// localLayouts are accepted for instants without an offset; they are read in
// the schedule's zone.
var localLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"}

// ParseInstant reads RFC 3339 (with an offset) or a local date-time without
// an offset, which is then read in loc.
func ParseInstant(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range localLayouts {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad instant %q: want RFC 3339 (2024-03-02T16:00:00+02:00) or local 2024-03-02T16:00", s)
}

// minutesText renders a duration in minutes as "30m", "2h", "2h30m".
func minutesText(m int) string {
	switch {
	case m%60 == 0:
		return fmt.Sprintf("%dh", m/60)
	case m < 60:
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}
