package importers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

var (
	sast     = mustLoc("Africa/Johannesburg")
	issued   = time.Date(2024, 3, 1, 0, 0, 0, 0, sast)
	horizon  = time.Date(2024, 6, 1, 0, 0, 0, 0, sast)
	fixtures = filepath.Join("..", "testdata")
)

func mustLoc(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func at(v string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04", v, sast)
	if err != nil {
		panic(err)
	}
	return t
}

// withStage merges a feed holding stage n over the whole horizon.
func withStage(t *testing.T, s *schedule.Schedule, feed string, n int) *schedule.Schedule {
	t.Helper()
	m, err := schedule.Merge(s, &schedule.Schedule{TimeZone: s.TimeZone, IssuedAt: s.IssuedAt, KnownUntil: s.KnownUntil,
		Feeds: []schedule.Feed{{Name: feed, Changes: []schedule.Change{{Stage: n, Start: s.IssuedAt, End: s.KnownUntil}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := m.Validate(); schedule.HasErrors(ps) {
		t.Fatalf("merged schedule invalid: %v", ps)
	}
	return m
}

func state(t *testing.T, s *schedule.Schedule, zone, v string) schedule.State {
	t.Helper()
	st, err := s.StateAt(zone, at(v))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func problemsText(ps []schedule.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

func TestCSVHeaderVariants(t *testing.T) {
	opts := Options{IssuedAt: issued, KnownUntil: horizon, Zone: "north"}
	tests := []struct {
		file     string
		kind     schedule.TableKind
		stage    int
		dark     []string
		powered  []string
		problems []string
	}{
		{"area-month.csv", schedule.DayOfMonth, 3,
			[]string{"2024-03-04T11:00", "2024-03-04T23:00", "2024-03-05T00:15", "2024-04-01T00:15"},
			[]string{"2024-03-04T13:00", "2024-03-12T03:00"},
			[]string{"11:1: warning: row \"5,xx:00,22:30,1\" skipped", "12:1: warning: row \"6,08:00,10:30\" skipped"}},
		{"area-week.csv", schedule.DayOfWeek, 2,
			[]string{"2024-03-10T23:30"}, // Sunday, 23:59 read as 24:00
			[]string{"2024-03-04T07:00"}, // Monday's row is stage 1 only: cumulative rows
			nil},
		{"area-cycle.csv", schedule.Cycle, 1,
			[]string{"2024-03-10T07:00", "2024-03-09T15:00"},
			[]string{"2024-03-11T07:00"},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s, ps, err := CSV(open(t, tc.file), opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Zones[0].Table.Kind; got != tc.kind {
				t.Errorf("kind %s, want %s", got, tc.kind)
			}
			txt := problemsText(ps)
			for _, p := range tc.problems {
				if !strings.Contains(txt, p) {
					t.Errorf("problems lack %q:\n%s", p, txt)
				}
			}
			if len(tc.problems) == 0 && len(ps) > 0 {
				t.Errorf("unexpected problems:\n%s", txt)
			}
			m := withStage(t, s, DefaultFeed, tc.stage)
			for _, v := range tc.dark {
				if st := state(t, m, "north", v); st != schedule.Dark {
					t.Errorf("%s: %v, want dark", v, st)
				}
			}
			for _, v := range tc.powered {
				if st := state(t, m, "north", v); st != schedule.Powered {
					t.Errorf("%s: %v, want powered", v, st)
				}
			}
		})
	}
}

func TestCSVBadDurationIsAWarning(t *testing.T) {
	s, _, err := CSV(open(t, "area-month.csv"), Options{IssuedAt: issued, KnownUntil: horizon})
	if err != nil {
		t.Fatal(err)
	}
	ps := s.Validate()
	if schedule.HasErrors(ps) || !strings.Contains(problemsText(ps), "window 20:00-20:30 lasts 30m") {
		t.Errorf("Validate: %s", problemsText(ps))
	}
}

func TestCSVBadHeader(t *testing.T) {
	_, _, err := CSV(strings.NewReader("when,from,to\n1,2,3\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "want date_of_month") {
		t.Errorf("err = %v", err)
	}
}

func TestStageYAML(t *testing.T) {
	s, ps, err := StageYAML(open(t, "stages.yml"), Options{IssuedAt: issued})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(problemsText(ps), "15:1: warning: stage change skipped") {
		t.Errorf("bad change not reported with its line:\n%s", problemsText(ps))
	}
	f := s.Feeds[0]
	if f.Name != DefaultFeed || len(f.Changes) != 3 {
		t.Fatalf("feed %+v", f)
	}
	if c := f.Changes[1]; !c.Start.Equal(at("2024-03-02T16:00")) || c.Exclude != "coct" || c.Stage != 4 {
		t.Errorf("change %+v", c)
	}
	if !s.KnownUntil.Equal(at("2024-03-03T05:00")) {
		t.Errorf("known_until %v, want the last change's end", s.KnownUntil)
	}
	// Add two zones: coct follows the include:coct change, north the national one.
	zones := &schedule.Schedule{TimeZone: s.TimeZone, IssuedAt: s.IssuedAt, KnownUntil: s.KnownUntil, Zones: []schedule.Zone{
		{Name: "coct", Feed: DefaultFeed, Table: schedule.SlotTable{Kind: schedule.Daily, Rows: []schedule.Row{{Start: 20 * 60, End: 22 * 60, Stage: 4}}}},
		{Name: "north", Feed: DefaultFeed, Table: schedule.SlotTable{Kind: schedule.Daily, Rows: []schedule.Row{{Start: 20 * 60, End: 22 * 60, Stage: 4}}}},
	}}
	m, err := schedule.Merge(s, zones)
	if err != nil {
		t.Fatal(err)
	}
	if ps := m.Validate(); schedule.HasErrors(ps) {
		t.Fatalf("the include/exclude pair must not count as an overlap: %s", problemsText(ps))
	}
	if st := state(t, m, "north", "2024-03-02T21:00"); st != schedule.Dark {
		t.Errorf("north at stage 4: %v", st)
	}
	if st := state(t, m, "coct", "2024-03-02T21:00"); st != schedule.Powered {
		t.Errorf("coct runs its own stage 3: %v", st)
	}
	if st := state(t, m, "north", "2024-03-03T06:00"); st != schedule.Unknown {
		t.Errorf("after the last change: %v, want unknown", st)
	}
}

func TestAreaJSON(t *testing.T) {
	s, ps, err := AreaJSON(open(t, "area.json"), Options{IssuedAt: issued, Feed: "eskom"})
	if err != nil || len(ps) > 0 {
		t.Fatalf("err %v, problems %s", err, problemsText(ps))
	}
	z := s.Zones[0]
	if z.Name != "Example-North (7)" || z.Table.Kind != schedule.Dates || !z.Table.Cumulative {
		t.Errorf("zone %+v", z)
	}
	if len(s.Events) != 1 || s.Events[0].Stage != 2 {
		t.Errorf("events %+v", s.Events)
	}
	m := withStage(t, s, "eskom", 6) // stage 6 behaves like stage 4, the last listed
	for _, tc := range []struct {
		at   string
		want schedule.State
	}{
		{"2024-03-02T05:00", schedule.Dark},
		{"2024-03-02T23:00", schedule.Dark},
		{"2024-03-03T00:15", schedule.Dark}, // 20:00-00:30 crosses midnight
		{"2024-03-03T01:00", schedule.Powered},
		{"2024-03-03T19:00", schedule.Dark},
		{"2024-03-04T12:00", schedule.Unknown}, // not listed
	} {
		if got := state(t, m, z.Name, tc.at); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.at, got, tc.want)
		}
	}
	// At stage 1 the event still darkens 20:00-22:30 on the 2nd.
	m1 := withStage(t, s, "eskom", 1)
	if got := state(t, m1, z.Name, "2024-03-02T21:00"); got != schedule.Dark {
		t.Errorf("event: %v", got)
	}
	if got := state(t, m1, z.Name, "2024-03-02T13:00"); got != schedule.Powered {
		t.Errorf("stage 1 on the 2nd lists nothing: %v", got)
	}
}

func TestAreaStatusJSON(t *testing.T) {
	now := at("2024-03-02T10:00")
	s, _, err := AreaJSON(open(t, "status.json"), Options{IssuedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Feeds) != 2 || s.Feeds[0].Name != "capetown" || s.Feeds[1].Name != "eskom" {
		t.Fatalf("feeds %+v", s.Feeds)
	}
	e := s.Feeds[1].Changes
	want := []struct {
		stage      int
		start, end string
	}{{2, "2024-03-02T10:00", "2024-03-02T16:00"}, {4, "2024-03-02T16:00", "2024-03-03T05:00"}, {0, "2024-03-03T05:00", "2024-03-04T05:00"}}
	if len(e) != len(want) {
		t.Fatalf("changes %+v", e)
	}
	for i, w := range want {
		if e[i].Stage != w.stage || !e[i].Start.Equal(at(w.start)) || !e[i].End.Equal(at(w.end)) {
			t.Errorf("change %d = %+v, want %+v", i, e[i], w)
		}
	}
	if c := s.Feeds[0].Changes; len(c) != 1 || c[0].Stage != 1 {
		t.Errorf("numeric stage: %+v", c)
	}
	if ps := s.Validate(); schedule.HasErrors(ps) {
		t.Errorf("%s", problemsText(ps))
	}
}

func TestFeeder(t *testing.T) {
	s, ps, err := Feeder(open(t, "feeders.txt"), Options{IssuedAt: issued, KnownUntil: horizon, TimeZone: "Africa/Johannesburg"})
	if err != nil {
		t.Fatal(err)
	}
	txt := problemsText(ps)
	for _, w := range []string{"3:1: warning: line skipped", "4:1: warning: feeder FEEDER-C3: window \"25xx~0100\" skipped"} {
		if !strings.Contains(txt, w) {
			t.Errorf("problems lack %q:\n%s", w, txt)
		}
	}
	if len(s.Zones) != 3 || s.Zones[0].Name != "FEEDER-A1" || len(s.Zones[0].Table.Rows) != 4 || len(s.Zones[1].Table.Rows) != 0 {
		t.Fatalf("zones %+v", s.Zones)
	}
	for _, tc := range []struct {
		at   string
		want schedule.State
	}{
		{"2024-03-05T08:05", schedule.Dark},
		{"2024-03-05T10:35", schedule.Powered},
		{"2024-03-06T00:30", schedule.Dark}, // 2305~0105 crosses midnight
		{"2024-03-06T01:05", schedule.Powered},
	} {
		if got := state(t, s, "FEEDER-A1", tc.at); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.at, got, tc.want)
		}
	}
	if got := state(t, s, "FEEDER-B2", "2024-03-05T08:05"); got != schedule.Powered {
		t.Errorf("a feeder with no windows: %v", got)
	}
}

func TestImportedScheduleRoundTrips(t *testing.T) {
	s, _, err := CSV(open(t, "area-month.csv"), Options{IssuedAt: issued, KnownUntil: horizon, Zone: "north"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := withStage(t, s, DefaultFeed, 2).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Parse(out); err != nil {
		t.Fatalf("imported schedule does not parse: %v\n%s", err, out)
	}
}
