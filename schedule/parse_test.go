package schedule

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExamplesParseAndRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("../examples/schedules/*.yaml")
	if len(files) < 2 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if HasErrors(s.Validate()) {
				t.Fatalf("Validate: %v", s.Validate())
			}
			out, err := s.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(out)
			if err != nil {
				t.Fatalf("reparse: %v\n%s", err, out)
			}
			out2, _ := again.Marshal()
			if !bytes.Equal(out, out2) {
				t.Errorf("Marshal is not stable:\n%s\n---\n%s", out, out2)
			}
			// The reparsed schedule answers like the original.
			for _, z := range s.Zones {
				a := s.Windows(z.Name, s.IssuedAt, s.KnownUntil)
				b := again.Windows(z.Name, s.IssuedAt, s.KnownUntil)
				if len(a) != len(b) {
					t.Fatalf("zone %s: %d windows before, %d after", z.Name, len(a), len(b))
				}
				for i := range a {
					if !a[i].Start.Equal(b[i].Start) || !a[i].End.Equal(b[i].End) || a[i].Stage != b[i].Stage {
						t.Errorf("zone %s window %d: %+v vs %+v", z.Name, i, a[i], b[i])
					}
				}
			}
		})
	}
}

func TestMarshalPrintsOffsets(t *testing.T) {
	s := mustParse(t, doc("Europe/Berlin", `
feeds:
  - name: national
    changes:
      - {stage: 2, start: "2024-07-01T10:00", end: "2024-07-01T12:00"}
zones:
  - {name: z, feed: national, table: {kind: daily, rows: [{start: "10:00", end: "12:00", stage: 1}]}}
`))
	out, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "2024-07-01T10:00:00+02:00") {
		t.Errorf("local stage change not stored with its offset:\n%s", out)
	}
	if !strings.Contains(string(out), "issued_at: \"2024-01-01T01:00:00+01:00\"") {
		t.Errorf("issued_at not printed in the schedule's zone:\n%s", out)
	}
}

func TestParseErrors(t *testing.T) {
	okZone := "zones:\n  - {name: z, table: {kind: daily, rows: [{start: \"10:00\", end: \"12:00\"}]}}\n"
	tests := []struct {
		name, src string
		want      []string // substrings of the error, positions included
	}{
		{"empty", "", []string{"empty file"}},
		{"not yaml", "format: [", []string{"error"}},
		{"wrong format", strings.Replace(doc("UTC", okZone), "bedwe-schedule/1", "bedwe-schedule/9", 1), []string{"1:1: error: format \"bedwe-schedule/9\""}},
		{"unknown field", doc("UTC", okZone) + "colour: red\n", []string{"7:1: error: field colour not found"}},
		{"bad time zone", doc("Mars/Olympus", okZone), []string{"timezone \"Mars/Olympus\""}},
		{"bad clock", doc("UTC", "zones:\n  - name: z\n    table:\n      kind: daily\n      rows:\n        - {start: \"25:00\", end: \"12:00\"}\n"),
			[]string{"10:11: error: zone z: start: bad time of day \"25:00\""}},
		{"undefined feed", doc("UTC", "zones:\n  - {name: z, feed: nope, table: {kind: daily, rows: [{start: \"10:00\", end: \"12:00\", stage: 1}]}}\n"),
			[]string{"6:5: error: zone z: feed \"nope\" is not defined"}},
		{"day out of range", doc("UTC", "zones:\n  - {name: z, table: {kind: day-of-week, rows: [{day: 8, start: \"10:00\", end: \"12:00\"}]}}\n"),
			[]string{"day 8 is outside 1..7"}},
		{"cycle without anchor", doc("UTC", "zones:\n  - {name: z, table: {kind: cycle, period: 20, rows: [{day: 1, start: \"10:00\", end: \"12:00\"}]}}\n"),
			[]string{"needs an anchor"}},
		{"overlapping stage changes", doc("UTC", `feeds:
  - name: national
    changes:
      - {stage: 2, start: "2024-05-01T00:00", end: "2024-05-01T12:00"}
      - {stage: 4, start: "2024-05-01T10:00", end: "2024-05-01T20:00"}
`+okZone), []string{"9:9: error: feed national: stage 4 from 2024-05-01T10:00:00Z overlaps stage 2", "at 8:9"}},
		{"every problem is listed", doc("UTC", `feeds:
  - name: national
    changes:
      - {stage: 22, start: "2024-05-01T00:00", end: "2024-04-01T12:00"}
zones:
  - {name: z, feed: national, table: {kind: weekly, rows: [{day: 1, start: "10:00", end: "10:30", stage: 1}]}}
  - {name: z, table: {kind: daily, rows: []}}
events:
  - {zone: y, kind: blackout, start: "2024-05-01T00:00", end: "2024-05-01T01:00"}
`), []string{"stage 22 is outside", "ends (2024-04-01T12:00:00Z) before it starts", "table kind \"weekly\" is unknown",
			"lasts 30m", "zone \"z\" is defined twice", "zone \"y\" is not defined", "kind \"blackout\" is unknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src))
			var pe *ProblemError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %v, want a *ProblemError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestOverlapOnlyWhenAZoneSharesBothChanges(t *testing.T) {
	// A national change that excludes the city and a city-only change may
	// overlap: no zone is governed by both.
	s := mustParse(t, doc("UTC", `feeds:
  - name: national
    changes:
      - {stage: 2, start: "2024-05-01T00:00", end: "2024-05-01T12:00", exclude: "^city$"}
      - {stage: 4, start: "2024-05-01T06:00", end: "2024-05-01T20:00", include: "^city$"}
zones:
  - {name: city, feed: national, table: {kind: daily, rows: [{start: "10:00", end: "12:00", stage: 1}]}}
  - {name: town, feed: national, table: {kind: daily, rows: [{start: "10:00", end: "12:00", stage: 1}]}}
`))
	if st := stateAt(t, s, "city", "2024-05-01T11:00"); st != Dark {
		t.Errorf("city: %v", st)
	}
}

func TestWarningsDoNotFail(t *testing.T) {
	s := mustParse(t, daily("UTC", `{start: "20:00", end: "20:30"}`, `{start: "20:00", end: "20:30"}`))
	ps := s.Validate()
	var msgs []string
	for _, p := range ps {
		if p.Severity != Warning {
			t.Errorf("unexpected error %v", p)
		}
		msgs = append(msgs, p.String())
	}
	all := strings.Join(msgs, "\n")
	for _, w := range []string{"10:11: warning: zone z: window 20:00-20:30 lasts 30m", "11:11: warning: zone z: duplicate row"} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings lack %q:\n%s", w, all)
		}
	}
	if st := stateAt(t, s, "z", "2024-05-01T20:15"); st != Dark {
		t.Errorf("the short block is still honoured: %v", st)
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestMerge(t *testing.T) {
	a := mustParse(t, doc("UTC", allStages(2)+"zones:\n  - {name: z, feed: national, table: {kind: daily, rows: [{start: \"10:00\", end: \"12:00\", stage: 1}]}}\n"))
	b := &Schedule{TimeZone: "UTC", IssuedAt: a.IssuedAt.AddDate(0, 0, 1), Feeds: []Feed{{Name: "national"}},
		Zones: []Zone{{Name: "y", Feed: "national", Table: SlotTable{Kind: Daily, Rows: []Row{{Start: 0, End: 60, Stage: 1}}}}}}
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Zones) != 2 || len(m.Feeds) != 1 || len(m.Feeds[0].Changes) != 1 || !m.IssuedAt.Equal(b.IssuedAt) {
		t.Errorf("merged: %d zones, feeds %+v, issued %v", len(m.Zones), m.Feeds, m.IssuedAt)
	}
	if HasErrors(m.Validate()) {
		t.Errorf("merged schedule invalid: %v", m.Validate())
	}
	if _, err := Merge(a, &Schedule{TimeZone: "Europe/Berlin"}); err == nil {
		t.Error("Merge across time zones succeeded")
	}
}
