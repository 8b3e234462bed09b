package node

import (
	"testing"
	"time"

	"github.com/bedwe/bedwe/pack"
	"github.com/bedwe/bedwe/schedule"
)

// TestDashboardStretches: a zone's next 24 hours split into powered, dark
// and unknown stretches that tile the span, with the timetable's end
// (known_until) starting an unknown stretch.
func TestDashboardStretches(t *testing.T) {
	s, err := schedule.Parse([]byte(`format: bedwe-schedule/1
timezone: UTC
issued_at: "2026-01-01T00:00:00Z"
known_until: "2026-11-24T20:00:00Z"
zones:
  - name: east
    table: {kind: daily, cumulative: false, rows: [{start: "12:00", end: "14:00"}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return from.Add(time.Duration(h) * time.Hour) }
	got := stretches(s, "east", from, at(24))
	want := []DashStretch{
		{Start: at(0), End: at(2), State: "powered"},
		{Start: at(2), End: at(4), State: "dark"},
		{Start: at(4), End: at(10), State: "powered"},
		{Start: at(10), End: at(24), State: "unknown"},
	}
	if len(got) != len(want) {
		t.Fatalf("stretches %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || !got[i].End.Equal(want[i].End) || got[i].State != want[i].State {
			t.Errorf("stretch %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if un := stretches(s, "west", from, at(24)); len(un) != 1 || un[0].State != "unknown" {
		t.Errorf("a zone the timetable lacks: %+v, want one unknown stretch", un)
	}
}

// TestDashboardMergeTrace: attempts the progress log kept and the
// record's recent ones are merged without repeats, by start time.
func TestDashboardMergeTrace(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	a := pack.TraceEntry{Path: "0", Peer: "p1", Start: t0, Outcome: pack.OutcomeOK}
	b := pack.TraceEntry{Path: "1", Peer: "p2", Start: t0.Add(time.Second), Outcome: pack.OutcomeSuperseded}
	c := pack.TraceEntry{Path: "1", Peer: "p3", Attempt: 1, Start: t0.Add(2 * time.Second), Outcome: pack.OutcomeOK}
	got := mergeTrace([]pack.TraceEntry{a, c}, []pack.TraceEntry{b, c})
	if len(got) != 3 || got[0].Path != "0" || got[1].Peer != "p2" || got[2].Peer != "p3" {
		t.Errorf("merged %+v, want a, b, c", got)
	}

	l := newProgressLog()
	for i := range progressWorkflows + 1 {
		l.add(string(rune('A'+i%26))+string(rune('a'+i/26)), a)
	}
	if len(l.byID) != progressWorkflows {
		t.Errorf("progress log keeps %d workflows, want at most %d", len(l.byID), progressWorkflows)
	}
}
