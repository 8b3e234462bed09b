package schedule

import (
	"testing"
	"time"
)

// benchSchedule is a day-of-month table with 8 cumulative stages of
// 2h30 blocks on every day and a feed changing stage every 6 hours.
func benchSchedule(b *testing.B) *Schedule {
	s := &Schedule{Format: FormatV1, TimeZone: "Africa/Johannesburg"}
	loc, _ := time.LoadLocation(s.TimeZone)
	s.IssuedAt = time.Date(2024, 1, 1, 0, 0, 0, 0, loc)
	s.KnownUntil = s.IssuedAt.AddDate(0, 3, 0)
	var rows []Row
	for day := 1; day <= 31; day++ {
		for stage := 1; stage <= 8; stage++ {
			for k := 0; k < stage; k++ {
				start := Clock(((day*2 + k*3) % 12) * 120)
				rows = append(rows, Row{Day: day, Start: start, End: (start + 150) % 1440, Stage: stage})
			}
		}
	}
	feed := Feed{Name: "national"}
	for t, i := s.IssuedAt, 0; t.Before(s.KnownUntil); t, i = t.Add(6*time.Hour), i+1 {
		feed.Changes = append(feed.Changes, Change{Stage: i % 7, Start: t, End: t.Add(6 * time.Hour)})
	}
	s.Feeds = []Feed{feed}
	s.Zones = []Zone{{Name: "z", Feed: "national", Table: SlotTable{Kind: DayOfMonth, Cumulative: true, Rows: rows}}}
	if HasErrors(s.Validate()) {
		b.Fatal(s.Validate())
	}
	return s
}

func BenchmarkStateAt(b *testing.B) {
	s := benchSchedule(b)
	t0 := s.IssuedAt.Add(30 * 24 * time.Hour)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _ = s.StateAt("z", t0.Add(time.Duration(i%2880)*time.Minute))
		i++
	}
}

func BenchmarkPoweredUntil(b *testing.B) {
	s := benchSchedule(b)
	t0 := s.IssuedAt.Add(30 * 24 * time.Hour)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _ = s.PoweredUntil("z", t0.Add(time.Duration(i%2880)*time.Minute))
		i++
	}
}
