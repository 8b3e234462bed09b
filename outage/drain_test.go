package outage

import (
	"testing"
	"time"
)

func TestDrain(t *testing.T) {
	// East goes dark 08:00-10:00 and 12:00-14:00; DrainMargin is 5 min.
	tests := []struct {
		name  string
		src   string
		zone  string
		now   time.Time
		drain bool
		cut   time.Time
	}{
		{"an hour before the cut", twoZone, "east", at(7, 0, 0), false, time.Time{}},
		{"just outside the margin", twoZone, "east", at(7, 55, 0).Add(-time.Nanosecond), false, time.Time{}},
		{"exactly the margin before the cut", twoZone, "east", at(7, 55, 0), true, at(8, 0, 0)},
		{"a minute before the cut", twoZone, "east", at(7, 59, 0), true, at(8, 0, 0)},
		{"dark now", twoZone, "east", at(9, 0, 0), true, at(9, 0, 0)},
		{"power back", twoZone, "east", at(10, 0, 0), false, time.Time{}},
		{"the other zone, powered for two hours", twoZone, "west", at(7, 59, 0).Add(time.Hour), false, time.Time{}},
		{"the other zone, before its cut", twoZone, "west", at(9, 56, 0), true, at(10, 0, 0)},
		{"beyond known_until", twoZone, "east", at(23, 0, 0).Add(3 * time.Hour), false, time.Time{}},
		{"zone not in the timetable", twoZone, "north", at(7, 59, 0), false, time.Time{}},
		{"no timetable", "", "east", at(7, 59, 0), false, time.Time{}},
		{"clock before issued_at", twoZone, "east", time.Date(1970, 1, 1, 7, 59, 0, 0, sast), false, time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newView(t, &setClock{t: tc.now}, testConfig(), tc.src)
			drain, cut := v.Drain(tc.zone)
			if drain != tc.drain || !cut.Equal(tc.cut) {
				t.Errorf("Drain(%s) at %v = %v, %v; want %v, %v", tc.zone, tc.now, drain, cut, tc.drain, tc.cut)
			}
		})
	}
}

func TestDrainAt(t *testing.T) {
	clock := &setClock{t: at(6, 10, 0)}
	v := newView(t, clock, testConfig(), twoZone)
	got, ok := v.DrainAt("east")
	if !ok || !got.Equal(at(7, 55, 0)) {
		t.Fatalf("DrainAt(east) at 06:10 = %v, %v; want 07:55", got, ok)
	}
	// At the instant DrainAt named, Drain agrees; a moment before, not.
	clock.Set(got.Add(-time.Millisecond))
	if d, _ := v.Drain("east"); d {
		t.Error("Drain fired before DrainAt")
	}
	clock.Set(got)
	if d, _ := v.Drain("east"); !d {
		t.Error("Drain did not fire at DrainAt")
	}
	clock.Set(at(7, 58, 0))
	if got, ok := v.DrainAt("east"); !ok || !got.Equal(at(7, 58, 0)) {
		t.Errorf("DrainAt inside the margin = %v, %v; want now", got, ok)
	}
	if _, ok := v.DrainAt("north"); ok {
		t.Error("DrainAt for a zone not in the timetable")
	}
}
