package schedule

import (
	"fmt"
	"time"
)

// Plausible reports whether a wall clock reading can be trusted for timetable
// decisions. Boards without a real-time clock boot at some fixed past date;
// a clock that reads earlier than the schedule's issued_at cannot be right,
// because the schedule was issued before it was received. A nil schedule or
// one without issued_at proves nothing, so only the zero time is rejected.
func Plausible(now time.Time, s *Schedule) bool {
	if now.IsZero() {
		return false
	}
	if s == nil || s.IssuedAt.IsZero() {
		return true
	}
	return !now.Before(s.IssuedAt)
}

// Newer returns whichever of a and b was issued later (a on a tie, so the
// schedule already held is kept). A nil argument loses to a non-nil one.
func Newer(a, b *Schedule) *Schedule {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case b.IssuedAt.After(a.IssuedAt):
		return b
	}
	return a
}

// Merge returns a new schedule with base's content overlaid by add's: zones
// and feeds of add replace those of base with the same name (others are
// appended), events are appended, issued_at and known_until are the later of
// the two. Both must use the same time zone. Importers use it to combine a
// stage timeline with slot tables.
func Merge(base, add *Schedule) (*Schedule, error) {
	if base.TimeZone != add.TimeZone {
		return nil, fmt.Errorf("merge schedules: time zones differ (%s and %s)", base.TimeZone, add.TimeZone)
	}
	out := &Schedule{
		Format:     FormatV1,
		TimeZone:   base.TimeZone,
		IssuedAt:   maxTime(base.IssuedAt, add.IssuedAt),
		KnownUntil: maxTime(base.KnownUntil, add.KnownUntil),
		Note:       base.Note,
	}
	if out.Note == "" {
		out.Note = add.Note
	}
	out.Zones = append(out.Zones, base.Zones...)
	for _, z := range add.Zones {
		if i := indexOf(out.Zones, func(o Zone) bool { return o.Name == z.Name }); i >= 0 {
			out.Zones[i] = z
		} else {
			out.Zones = append(out.Zones, z)
		}
	}
	out.Feeds = append(out.Feeds, base.Feeds...)
	for _, f := range add.Feeds {
		if i := indexOf(out.Feeds, func(o Feed) bool { return o.Name == f.Name }); i >= 0 {
			// A placeholder feed (no changes) never replaces a real one.
			if len(f.Changes) > 0 || !f.KnownUntil.IsZero() {
				out.Feeds[i] = f
			}
		} else {
			out.Feeds = append(out.Feeds, f)
		}
	}
	out.Events = append(append(out.Events, base.Events...), add.Events...)
	return out, nil
}

func indexOf[T any](xs []T, match func(T) bool) int {
	for i, x := range xs {
		if match(x) {
			return i
		}
	}
	return -1
}
