package outage

import (
	"sync"
	"testing"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// twoZone is examples/schedules/two-zone-rotation.yaml: east and west take
// two-hour turns in the dark, east from 00:00, west from 02:00. It is known
// until 2025-03-02 00:00 so tests can step past known_until.
const twoZone = `format: bedwe-schedule/1
timezone: Africa/Johannesburg
issued_at: "2025-01-01T00:00:00+02:00"
known_until: "2025-03-02T00:00:00+02:00"
zones:
  - name: east
    table:
      kind: daily
      rows:
        - {start: "00:00", end: "02:00"}
        - {start: "04:00", end: "06:00"}
        - {start: "08:00", end: "10:00"}
        - {start: "12:00", end: "14:00"}
        - {start: "16:00", end: "18:00"}
        - {start: "20:00", end: "22:00"}
  - name: west
    table:
      kind: daily
      rows:
        - {start: "02:00", end: "04:00"}
        - {start: "06:00", end: "08:00"}
        - {start: "10:00", end: "12:00"}
        - {start: "14:00", end: "16:00"}
        - {start: "18:00", end: "20:00"}
        - {start: "22:00", end: "24:00"}
`

// threeZone has zones a, b and c, dark 12-14, 16-18 and 20-22 every day:
// at 10:00 all are powered, for 2, 6 and 10 hours.
const threeZone = `format: bedwe-schedule/1
timezone: Africa/Johannesburg
issued_at: "2025-01-01T00:00:00+02:00"
known_until: "2026-01-01T00:00:00+02:00"
zones:
  - {name: a, table: {kind: daily, rows: [{start: "12:00", end: "14:00"}]}}
  - {name: b, table: {kind: daily, rows: [{start: "16:00", end: "18:00"}]}}
  - {name: c, table: {kind: daily, rows: [{start: "20:00", end: "22:00"}]}}
`

var sast = mustLoc("Africa/Johannesburg")

func mustLoc(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// at is 2025-03-01 at hh:mm:ss in Johannesburg.
func at(hh, mm, ss int) time.Time { return time.Date(2025, 3, 1, hh, mm, ss, 0, sast) }

// setClock is a settable fake clock, for tests that jump between instants.
type setClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *setClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *setClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func parse(t testing.TB, src string) *schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse([]byte(src))
	if err != nil {
		t.Fatalf("parse schedule: %v", err)
	}
	return s
}

// testConfig has round numbers: 2 minute margin, 5 minute drain margin,
// 15 s presence TTL, 1 minute suspicion.
func testConfig() Config {
	c := DefaultConfig()
	c.Margin = 2 * time.Minute
	c.DrainMargin = 5 * time.Minute
	c.PresenceTTL = 15 * time.Second
	c.SuspectFor = time.Minute
	c.Seed = 1
	return c
}

func newView(t testing.TB, clock Clock, cfg Config, src string) *View {
	t.Helper()
	var s *schedule.Schedule
	if src != "" {
		s = parse(t, src)
	}
	v, err := NewView(clock, cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func peers(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Peer
	}
	return out
}
