package schedule

import (
	"testing"
	"time"
)

// daily builds a zone "z" with a daily table and no feed.
func daily(tz string, rows ...string) string {
	b := "zones:\n  - name: z\n    table:\n      kind: daily\n      rows:\n"
	for _, r := range rows {
		b += "        - " + r + "\n"
	}
	return doc(tz, b)
}

func TestStateAtEdgeCases(t *testing.T) {
	dom := doc("Africa/Johannesburg", allStages(1)+`
zones:
  - name: z
    feed: national
    table:
      kind: day-of-month
      cumulative: true
      rows:
        - {day: 1, start: "06:00", end: "08:30", stage: 1}
        - {day: 29, start: "10:00", end: "12:30", stage: 1}
        - {day: 30, start: "10:00", end: "12:30", stage: 1}
        - {day: 31, start: "22:00", end: "00:30", stage: 1}
`)
	fold := doc("Africa/Johannesburg", allStages(1)+`
zones:
  - name: z
    feed: national
    table:
      kind: day-of-month
      fold: 16
      cumulative: true
      rows:
        - {day: 1, start: "06:00", end: "08:30", stage: 1}
        - {day: 15, start: "14:00", end: "16:30", stage: 1}
        - {day: 16, start: "18:00", end: "20:30", stage: 1}
`)
	cycle := doc("Africa/Johannesburg", allStages(1)+`
zones:
  - name: z
    feed: national
    table:
      kind: cycle
      period: 20
      anchor: 2024-03-10
      cumulative: true
      rows:
        - {day: 1, start: "06:00", end: "08:30", stage: 1}
        - {day: 20, start: "14:00", end: "16:30", stage: 1}
`)
	dow := doc("Africa/Johannesburg", allStages(1)+`
zones:
  - name: z
    feed: national
    table:
      kind: day-of-week
      cumulative: true
      rows:
        - {day: 1, start: "06:00", end: "08:30", stage: 1}
        - {day: 7, start: "20:00", end: "22:30", stage: 1}
`)
	tests := []struct {
		name, src, at string
		want          State
	}{
		{"midnight crossing before", daily("UTC", `{start: "22:00", end: "00:30"}`), "2024-05-01T23:00", Dark},
		{"midnight crossing after", daily("UTC", `{start: "22:00", end: "00:30"}`), "2024-05-02T00:15", Dark},
		{"midnight crossing end is exclusive", daily("UTC", `{start: "22:00", end: "00:30"}`), "2024-05-02T00:30", Powered},
		{"24:00 end", daily("UTC", `{start: "22:00", end: "24:00"}`), "2024-05-01T23:59", Dark},
		{"24:00 end then powered", daily("UTC", `{start: "22:00", end: "24:00"}`), "2024-05-02T00:00", Powered},
		{"23:59 means 24:00", daily("UTC", `{start: "22:00", end: "23:59"}`), "2024-05-01T23:59", Dark},
		{"start is inclusive", daily("UTC", `{start: "22:00", end: "23:59"}`), "2024-05-01T22:00", Dark},
		{"before start", daily("UTC", `{start: "22:00", end: "23:59"}`), "2024-05-01T21:59", Powered},
		{"row 31 runs into the 1st", dom, "2024-02-01T00:15", Dark},
		{"row 31 on the 31st", dom, "2024-01-31T23:00", Dark},
		{"row 1 on the 1st", dom, "2024-02-01T07:00", Dark},
		{"row 29 in a leap February", dom, "2024-02-29T11:00", Dark},
		{"no day 30 in February: March 1 uses row 1", dom, "2024-03-01T11:00", Powered},
		{"row 30 in April", dom, "2024-04-30T11:00", Dark},
		{"no row 31 in April: May 1 00:15 powered", dom, "2024-05-01T00:15", Powered},
		{"fold: day 17 is day 1", fold, "2024-05-17T07:00", Dark},
		{"fold: day 31 is day 15", fold, "2024-05-31T15:00", Dark},
		{"fold: day 16 is day 16", fold, "2024-05-16T19:00", Dark},
		{"fold: day 32 does not exist, June 1 is day 1", fold, "2024-06-01T07:00", Dark},
		{"fold: June 1 is not day 16", fold, "2024-06-01T19:00", Powered},
		{"cycle: anchor is day 1", cycle, "2024-03-10T07:00", Dark},
		{"cycle: day before anchor is day 20", cycle, "2024-03-09T15:00", Dark},
		{"cycle: 20 days before anchor is day 1", cycle, "2024-02-19T07:00", Dark},
		{"cycle: 21 days before anchor is day 20", cycle, "2024-02-18T15:00", Dark},
		{"cycle: 40 days after anchor is day 1", cycle, "2024-04-19T07:00", Dark},
		{"cycle: ordinary day", cycle, "2024-03-11T07:00", Powered},
		{"day-of-week: Monday is 1", dow, "2024-03-04T07:00", Dark},
		{"day-of-week: Tuesday", dow, "2024-03-05T07:00", Powered},
		{"day-of-week: Sunday is 7", dow, "2024-03-10T21:00", Dark},
		{"at known_until", daily("UTC", `{start: "22:00", end: "23:00"}`), "2025-01-01T00:00", Unknown},
		{"beyond known_until", daily("UTC", `{start: "22:00", end: "23:00"}`), "2025-06-01T12:00", Unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.src)
			if got := stateAt(t, s, "z", tc.at); got != tc.want {
				t.Errorf("StateAt(%s) = %v, want %v", tc.at, got, tc.want)
			}
		})
	}
}

func TestEndOfDayMerges(t *testing.T) {
	for _, end := range []string{"23:59", "24:00"} {
		s := mustParse(t, daily("UTC", `{start: "22:00", end: "`+end+`"}`, `{start: "00:00", end: "02:00"}`))
		got := windowsText(t, s, "z", "2024-05-01T12:00", "2024-05-02T12:00")
		want := []string{"05-01 22:00-05-02 02:00 s0"}
		if !equalStrings(got, want) {
			t.Errorf("end %s: windows %v, want %v (no one-minute gap at midnight)", end, got, want)
		}
	}
}

func TestDST(t *testing.T) {
	tests := []struct {
		name, tz, rows, day string
		want                time.Duration
		wantOffsets         [2]int // offsets in hours of start and end
	}{
		{"Berlin spring forward: window one hour shorter", "Europe/Berlin", `{start: "01:00", end: "04:00"}`, "2024-03-31", 2 * time.Hour, [2]int{1, 2}},
		{"Berlin fall back: an hour repeats", "Europe/Berlin", `{start: "01:00", end: "04:00"}`, "2024-10-27", 4 * time.Hour, [2]int{2, 1}},
		{"Berlin ordinary day", "Europe/Berlin", `{start: "01:00", end: "04:00"}`, "2024-05-05", 3 * time.Hour, [2]int{2, 2}},
		{"New York spring forward", "America/New_York", `{start: "01:00", end: "05:00"}`, "2024-03-10", 3 * time.Hour, [2]int{-5, -4}},
		{"New York fall back", "America/New_York", `{start: "00:30", end: "03:00"}`, "2024-11-03", 3*time.Hour + 30*time.Minute, [2]int{-4, -5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, daily(tc.tz, tc.rows))
			ws := s.Windows("z", local(t, s, tc.day+"T00:00"), local(t, s, tc.day+"T12:00"))
			if len(ws) != 1 {
				t.Fatalf("windows %v, want one", ws)
			}
			if d := ws[0].Duration(); d != tc.want {
				t.Errorf("duration %v, want %v", d, tc.want)
			}
			_, so := ws[0].Start.Zone()
			_, eo := ws[0].End.Zone()
			if so/3600 != tc.wantOffsets[0] || eo/3600 != tc.wantOffsets[1] {
				t.Errorf("offsets %d/%d h, want %v", so/3600, eo/3600, tc.wantOffsets)
			}
		})
	}
}

// stageTable is a zone following feed national with a window 20:00-22:30
// listed once at stage 2 (not cumulative), plus the given feed changes.
func stageTable(changes string) string {
	return doc("Africa/Johannesburg", "feeds:\n  - name: national\n    known_until: \"2024-12-31T00:00\"\n    changes:\n"+changes+`
zones:
  - name: z
    feed: national
    table:
      kind: daily
      cumulative: false
      rows:
        - {start: "20:00", end: "22:30", stage: 2}
`)
}

func TestStageChangeMidWindow(t *testing.T) {
	tests := []struct {
		name, changes string
		want          []string
	}{
		{"stage drop mid-window does not cut the outage short",
			`      - {stage: 2, start: "2024-05-01T00:00", end: "2024-05-01T21:00"}
      - {stage: 1, start: "2024-05-01T21:00", end: "2024-05-02T00:00"}
`, []string{"05-01 20:00-05-01 22:30 s2"}},
		{"stage suspended mid-window: the window still runs to its end",
			`      - {stage: 3, start: "2024-05-01T00:00", end: "2024-05-01T21:00"}
`, []string{"05-01 20:00-05-01 22:30 s3"}},
		{"stage rise mid-window darkens from the rise",
			`      - {stage: 1, start: "2024-05-01T00:00", end: "2024-05-01T21:00"}
      - {stage: 4, start: "2024-05-01T21:00", end: "2024-05-02T00:00"}
`, []string{"05-01 21:00-05-01 22:30 s4"}},
		{"stage below the window: powered",
			`      - {stage: 1, start: "2024-05-01T00:00", end: "2024-05-02T00:00"}
`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, stageTable(tc.changes))
			got := windowsText(t, s, "z", "2024-05-01T12:00", "2024-05-02T00:00")
			if !equalStrings(got, tc.want) {
				t.Errorf("windows %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCumulativeRowsAcrossStageChange(t *testing.T) {
	// CSV-shaped rows: stage 4 lists the merged 18:00-22:30, stage 2 lists
	// 20:00-22:30. Stage 4 until 21:00, then stage 2: dark 18:00-22:30.
	s := mustParse(t, doc("Africa/Johannesburg", `
feeds:
  - name: national
    changes:
      - {stage: 4, start: "2024-05-01T00:00", end: "2024-05-01T21:00"}
      - {stage: 2, start: "2024-05-01T21:00", end: "2024-05-03T00:00"}
      - {stage: 8, start: "2024-05-03T00:00", end: "2024-05-04T00:00"}
zones:
  - name: z
    feed: national
    table:
      kind: daily
      cumulative: true
      rows:
        - {start: "20:00", end: "22:30", stage: 2}
        - {start: "18:00", end: "22:30", stage: 4}
`))
	got := windowsText(t, s, "z", "2024-05-01T00:00", "2024-05-04T00:00")
	want := []string{
		"05-01 18:00-05-01 22:30 s4",
		"05-02 20:00-05-02 22:30 s2",
		"05-03 18:00-05-03 22:30 s8", // stage 8 behaves like 4, the highest listed
	}
	if !equalStrings(got, want) {
		t.Errorf("windows %v, want %v", got, want)
	}
	if st := stateAt(t, s, "z", "2024-05-02T19:00"); st != Powered {
		t.Errorf("stage 2 at 19:00: %v, want powered (18:00 belongs to stage 4 only)", st)
	}
}

func TestUnknownIsNotPowered(t *testing.T) {
	s := mustParse(t, doc("Africa/Johannesburg", `
feeds:
  - name: national
    changes:
      - {stage: 2, start: "2024-05-01T00:00", end: "2024-05-02T00:00"}
zones:
  - name: z
    feed: national
    table:
      kind: daily
      cumulative: false
      rows:
        - {start: "20:00", end: "22:30", stage: 2}
`))
	for _, tc := range []struct {
		at   string
		want State
	}{
		{"2024-04-30T12:00", Powered}, // before the first announcement: stage 0
		{"2024-05-01T12:00", Powered},
		{"2024-05-01T21:00", Dark},
		{"2024-05-02T00:00", Unknown}, // the last announced stage has ended
		{"2024-05-02T21:00", Unknown},
	} {
		if got := stateAt(t, s, "z", tc.at); got != tc.want {
			t.Errorf("StateAt(%s) = %v, want %v", tc.at, got, tc.want)
		}
	}
	until, next := s.PoweredUntil("z", local(t, s, "2024-05-01T22:30"))
	if next != Unknown || !until.Equal(local(t, s, "2024-05-02T00:00")) {
		t.Errorf("PoweredUntil = %v %v, want 2024-05-02 00:00 unknown", until, next)
	}
	if _, ok := s.NextCut("z", local(t, s, "2024-05-01T23:00")); ok {
		t.Error("NextCut found a cut after the last announced stage")
	}
	if _, err := s.StateAt("nowhere", time.Now()); err == nil {
		t.Error("StateAt of an undefined zone: no error")
	}
}

func TestLocalAndNationalFeeds(t *testing.T) {
	s := mustParse(t, doc("Africa/Johannesburg", `
feeds:
  - name: national
    changes:
      - {stage: 4, start: "2024-05-01T00:00", end: "2024-05-02T00:00", exclude: "^city"}
      - {stage: 1, start: "2024-05-01T00:00", end: "2024-05-02T00:00", include: "^city-b$"}
  - name: city
    changes:
      - {stage: 1, start: "2024-05-01T00:00", end: "2024-05-02T00:00"}
zones:
  - {name: town, feed: national, table: {kind: daily, rows: [{start: "10:00", end: "12:00", stage: 2}]}}
  - {name: city-a, feed: national, table: {kind: daily, rows: [{start: "10:00", end: "12:00", stage: 2}]}}
  - {name: city-b, feed: national, table: {kind: daily, rows: [{start: "10:00", end: "12:00", stage: 1}]}}
  - {name: city-c, feed: city, table: {kind: daily, rows: [{start: "10:00", end: "12:00", stage: 2}]}}
`))
	for _, tc := range []struct {
		zone string
		want State
	}{
		{"town", Dark},      // national stage 4 applies
		{"city-a", Unknown}, // excluded from national, nothing else announced for it
		{"city-b", Dark},    // excluded from stage 4 but governed by the stage-1 change
		{"city-c", Powered}, // follows its own feed at stage 1
	} {
		if got := stateAt(t, s, tc.zone, "2024-05-01T11:00"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.zone, got, tc.want)
		}
	}
}

func TestEvents(t *testing.T) {
	s := mustParse(t, daily("UTC", `{start: "10:00", end: "12:00"}`)+`
events:
  - {zone: z, kind: powered, start: "2024-05-01T09:00:00Z", end: "2024-05-01T11:00:00Z", note: cancelled}
  - {zone: z, kind: outage, start: "2024-05-02T14:00:00Z", end: "2024-05-02T15:00:00Z", stage: 3}
  - {zone: "*", kind: outage, start: "2024-05-03T10:30:00Z", end: "2024-05-03T10:45:00Z"}
  - {zone: z, kind: powered, start: "2024-05-03T10:00:00Z", end: "2024-05-03T12:00:00Z"}
`)
	got := windowsText(t, s, "z", "2024-05-01T00:00", "2024-05-04T00:00")
	want := []string{
		"05-01 11:00-05-01 12:00 s0", // cut short by the cancellation
		"05-02 10:00-05-02 12:00 s0",
		"05-02 14:00-05-02 15:00 s3", // explicit outage
		"05-03 10:30-05-03 10:45 s0", // the outage beats the cancellation
	}
	if !equalStrings(got, want) {
		t.Errorf("windows %v, want %v", got, want)
	}
	ws := s.Windows("z", local(t, s, "2024-05-02T13:00"), local(t, s, "2024-05-02T16:00"))
	if len(ws) != 1 || ws[0].Source != "event" {
		t.Errorf("event window source: %+v", ws)
	}
}

func TestDatesTableUnknownOutsideListedDays(t *testing.T) {
	s := mustParse(t, doc("Africa/Johannesburg", allStages(6)+`
zones:
  - name: z
    feed: national
    table:
      kind: dates
      cumulative: true
      rows:
        - {date: 2024-03-02, start: "20:00", end: "22:30", stage: 1}
        - {date: 2024-03-02, start: "20:00", end: "00:30", stage: 4}
`))
	for _, tc := range []struct {
		at   string
		want State
	}{
		{"2024-03-02T12:00", Powered},
		{"2024-03-02T23:00", Dark},    // stage 6 behaves like stage 4, the last listed
		{"2024-03-03T00:15", Dark},    // the window crosses into an unlisted day
		{"2024-03-03T01:00", Unknown}, // a day the table does not list
		{"2024-03-01T12:00", Unknown},
	} {
		if got := stateAt(t, s, "z", tc.at); got != tc.want {
			t.Errorf("StateAt(%s) = %v, want %v", tc.at, got, tc.want)
		}
	}
}

func TestNextCutRestorePoweredUntil(t *testing.T) {
	s := mustParse(t, daily("UTC", `{start: "10:00", end: "12:00"}`, `{start: "20:00", end: "02:00"}`))
	at := func(v string) time.Time { return local(t, s, v) }
	if c, ok := s.NextCut("z", at("2024-05-01T08:00")); !ok || !c.Equal(at("2024-05-01T10:00")) {
		t.Errorf("NextCut from 08:00 = %v %v, want 10:00", c, ok)
	}
	if c, ok := s.NextCut("z", at("2024-05-01T10:00")); !ok || !c.Equal(at("2024-05-01T20:00")) {
		t.Errorf("NextCut at a cut's start = %v %v, want the next one at 20:00", c, ok)
	}
	if c, ok := s.NextCut("z", at("2024-05-01T23:00")); !ok || !c.Equal(at("2024-05-02T10:00")) {
		t.Errorf("NextCut inside the crossing window = %v %v, want 05-02 10:00", c, ok)
	}
	if r, ok := s.NextRestore("z", at("2024-05-01T23:00")); !ok || !r.Equal(at("2024-05-02T02:00")) {
		t.Errorf("NextRestore = %v %v, want 05-02 02:00", r, ok)
	}
	if r, ok := s.NextRestore("z", at("2024-05-01T08:00")); !ok || !r.Equal(at("2024-05-01T12:00")) {
		t.Errorf("NextRestore while powered = %v %v, want 12:00", r, ok)
	}
	if u, st := s.PoweredUntil("z", at("2024-05-01T12:00")); st != Dark || !u.Equal(at("2024-05-01T20:00")) {
		t.Errorf("PoweredUntil = %v %v, want 20:00 dark", u, st)
	}
	if u, st := s.PoweredUntil("z", at("2024-05-01T11:00")); st != Dark || !u.Equal(at("2024-05-01T11:00")) {
		t.Errorf("PoweredUntil while dark = %v %v, want (t, dark)", u, st)
	}
	if u, st := s.PoweredUntil("z", at("2024-12-31T15:00")); st != Dark || !u.Equal(at("2024-12-31T20:00")) {
		t.Errorf("PoweredUntil near the end = %v %v", u, st)
	}
	if _, ok := s.NextRestore("z", at("2024-12-31T21:00")); ok {
		t.Error("NextRestore of a window running past known_until reported a restore")
	}
}

func TestPoweredUntilReachesKnownUntil(t *testing.T) {
	s := mustParse(t, daily("UTC", `{start: "10:00", end: "12:00"}`))
	u, st := s.PoweredUntil("z", local(t, s, "2024-12-31T13:00"))
	if st != Unknown || !u.Equal(s.KnownUntil) {
		t.Errorf("PoweredUntil = %v %v, want known_until %v, unknown", u, st, s.KnownUntil)
	}
	if u, st := s.PoweredUntil("z", s.KnownUntil); st != Unknown || !u.Equal(s.KnownUntil) {
		t.Errorf("PoweredUntil at known_until = %v %v", u, st)
	}
	if _, ok := s.NextCut("z", local(t, s, "2024-12-31T13:00")); ok {
		t.Error("NextCut beyond the last window before known_until")
	}
	// A long search: a weekly table from far before its only window.
	w := mustParse(t, doc("UTC", `
zones:
  - {name: z, table: {kind: day-of-month, rows: [{day: 31, start: "10:00", end: "12:00"}]}}
`))
	c, ok := w.NextCut("z", local(t, w, "2024-02-01T00:00"))
	if !ok || !c.Equal(local(t, w, "2024-03-31T10:00")) {
		t.Errorf("NextCut across months = %v %v, want 03-31 10:00", c, ok)
	}
}

func TestPlausibleAndNewer(t *testing.T) {
	a := &Schedule{IssuedAt: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)}
	b := &Schedule{IssuedAt: time.Date(2024, 3, 2, 0, 0, 0, 0, time.UTC)}
	if Newer(a, b) != b || Newer(b, a) != b {
		t.Error("Newer did not pick the later issued_at")
	}
	if Newer(a, nil) != a || Newer(nil, b) != b {
		t.Error("Newer with nil")
	}
	same := &Schedule{IssuedAt: a.IssuedAt}
	if Newer(a, same) != a {
		t.Error("Newer on a tie must keep the schedule already held")
	}
	boot := time.Date(1970, 1, 1, 0, 0, 12, 0, time.UTC) // board without RTC
	if Plausible(boot, a) {
		t.Error("a 1970 clock is plausible")
	}
	if !Plausible(b.IssuedAt, a) || Plausible(a.IssuedAt.Add(-time.Second), a) {
		t.Error("Plausible around issued_at")
	}
	if Plausible(time.Time{}, nil) || !Plausible(boot, nil) {
		t.Error("Plausible without a schedule")
	}
}
