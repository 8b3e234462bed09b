package schedule

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// doc builds a schedule document for tests: a header valid for all of 2024
// in the given zone, followed by body (feeds, zones, events).
func doc(tz, body string) string {
	return "format: bedwe-schedule/1\ntimezone: " + tz + "\n" +
		"issued_at: \"2024-01-01T00:00:00Z\"\nknown_until: \"2025-01-01T00:00:00Z\"\n" +
		strings.TrimLeft(body, "\n")
}

func mustParse(t testing.TB, src string) *Schedule {
	t.Helper()
	s, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return s
}

// local reads "2006-01-02T15:04" in the schedule's zone.
func local(t testing.TB, s *Schedule, v string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := time.ParseInLocation("2006-01-02T15:04", v, loc)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func stateAt(t testing.TB, s *Schedule, zone, v string) State {
	t.Helper()
	st, err := s.StateAt(zone, local(t, s, v))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// windowsText renders windows as "MM-DD HH:MM-MM-DD HH:MM s<stage>" in the
// schedule's zone, for compact comparisons.
func windowsText(t testing.TB, s *Schedule, zone, from, to string) []string {
	t.Helper()
	loc, _ := time.LoadLocation(s.TimeZone)
	var out []string
	for _, w := range s.Windows(zone, local(t, s, from), local(t, s, to)) {
		out = append(out, w.Start.In(loc).Format("01-02 15:04")+"-"+w.End.In(loc).Format("01-02 15:04")+" s"+itoa(w.Stage))
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// allStages is a feed holding stage n over all of 2024.
func allStages(n int) string {
	return "feeds:\n  - name: national\n    changes:\n      - {stage: " + itoa(n) + ", start: \"2024-01-01T00:00\", end: \"2025-01-01T00:00\"}\n"
}
