package testnet

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// Workflow kinds MixedWorkflow generates.
const (
	KindSequence = "sequence"
	KindFork     = "fork"
	KindChoice   = "choice"
	KindLong     = "long"
)

// GeneratedWorkflow is one workflow of a generated workload: its text, its
// input (the sleep time of every step by service name) and its kind.
type GeneratedWorkflow struct {
	Kind   string
	Source string
	Input  json.RawMessage
	// Steps is the number of steps that run (one CHOICE arm counted).
	Steps int
	// Critical is the fault-free critical path: the sum of the sleeps on
	// the longest path.
	Critical time.Duration
}

// wfBuilder names steps sleep1, sleep2, ... (every name matches the
// DefaultServices pattern sleep*) and records their sleep times.
type wfBuilder struct {
	rng    *rand.Rand
	n      int
	sleeps map[string]int
}

// step adds one step of lo..hi ms and returns its text and duration.
func (b *wfBuilder) step(lo, hi int, attrs string) (string, time.Duration) {
	b.n++
	name := fmt.Sprintf("sleep%d", b.n)
	ms := lo + b.rng.IntN(hi-lo+1)
	b.sleeps[name] = ms
	return name + attrs, time.Duration(ms) * time.Millisecond
}

// seq adds k short steps (100-400 ms) in a row.
func (b *wfBuilder) seq(k int) (string, time.Duration) {
	parts := make([]string, k)
	var total time.Duration
	for i := range parts {
		var d time.Duration
		parts[i], d = b.step(100, 400, "")
		total += d
	}
	return strings.Join(parts, " "), total
}

// long adds one step of 2-3 s that declares expect=3s, so timetable
// routing gives it a peer powered for that long.
func (b *wfBuilder) long() (string, time.Duration) {
	return b.step(2000, 3000, "[expect=3s]")
}

// MixedWorkflow generates one workflow of the timetable comparison's mix
// from rng (seeded: the same seed gives the same workload):
//
//   - 35 % sequences of 3-6 sleep steps of 100-400 ms;
//   - 30 % a step, a FORK of 2-4 branches of 1-2 steps, SYNC, a step;
//   - 20 % steps around an unguarded CHOICE of two arms (the first arm
//     runs when it has a live provider);
//   - 15 % steps around one longer step of 2-3 s with expect=3s.
//
// Every step is a sleep* service of DefaultServices; Input gives each its
// time in sleep_ms by service name.
func MixedWorkflow(rng *rand.Rand) GeneratedWorkflow {
	b := &wfBuilder{rng: rng, sleeps: map[string]int{}}
	var g GeneratedWorkflow
	var parts []string
	add := func(s string, d time.Duration) {
		parts = append(parts, s)
		g.Critical += d
	}
	switch r := rng.IntN(100); {
	case r < 35:
		g.Kind = KindSequence
		add(b.seq(3 + rng.IntN(4)))
	case r < 65:
		g.Kind = KindFork
		add(b.seq(1))
		branches := make([]string, 2+rng.IntN(3))
		var longest time.Duration
		for i := range branches {
			var d time.Duration
			branches[i], d = b.seq(1 + rng.IntN(2))
			longest = max(longest, d)
		}
		add("FORK("+strings.Join(branches, ", ")+") SYNC", longest)
		add(b.seq(1))
	case r < 85:
		g.Kind = KindChoice
		add(b.seq(1 + rng.IntN(2)))
		first, d := b.seq(1 + rng.IntN(2))
		second, _ := b.seq(1)
		add("CHOICE("+first+", "+second+") ENDCHOICE", d)
		add(b.seq(1))
		g.Steps -= strings.Count(second, " ") + 1
	default:
		g.Kind = KindLong
		add(b.seq(1 + rng.IntN(2)))
		add(b.long())
		add(b.seq(1 + rng.IntN(2)))
	}
	g.Steps += len(b.sleeps)
	g.Source = strings.Join(parts, " ")
	in, _ := json.Marshal(map[string]any{"sleep_ms": b.sleeps})
	g.Input = in
	return g
}

// RotationOptions shape a generated rotation timetable.
type RotationOptions struct {
	// Zones are the zone names (default north, south).
	Zones []string
	// Dark is how long each cut lasts (default 2 h).
	Dark time.Duration
	// Period is how often every zone is cut (default 6 h); it must divide
	// a day. Zone k's cuts start at k × Period / len(Zones) past midnight.
	Period time.Duration
	// TimeZone is the IANA zone of the table (default Africa/Johannesburg).
	TimeZone string
	// IssuedAt and KnownUntil bound the timetable (default 2026-01-01 and
	// 2028-01-01).
	IssuedAt, KnownUntil time.Time
}

// Rotation writes a bedwe-schedule/1 timetable in which the zones take
// turns: each is dark for Dark of every Period, the zones' cuts evenly
// offset, so (with the defaults) one zone of two is dark at a time and an
// hour of full power separates the cuts. It is validated with
// schedule.Parse before it is returned.
func Rotation(o RotationOptions) ([]byte, *schedule.Schedule, error) {
	if len(o.Zones) == 0 {
		o.Zones = []string{"north", "south"}
	}
	if o.Dark <= 0 {
		o.Dark = 2 * time.Hour
	}
	if o.Period <= 0 {
		o.Period = 6 * time.Hour
	}
	if o.TimeZone == "" {
		o.TimeZone = "Africa/Johannesburg"
	}
	day := 24 * time.Hour
	if day%o.Period != 0 || o.Period%time.Minute != 0 || o.Dark%time.Minute != 0 || o.Dark >= o.Period {
		return nil, nil, fmt.Errorf("rotation: period %s must divide a day, and dark %s be shorter, both in whole minutes", o.Period, o.Dark)
	}
	loc, err := time.LoadLocation(o.TimeZone)
	if err != nil {
		return nil, nil, fmt.Errorf("rotation: %w", err)
	}
	if o.IssuedAt.IsZero() {
		o.IssuedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
	}
	if o.KnownUntil.IsZero() {
		o.KnownUntil = time.Date(2028, 1, 1, 0, 0, 0, 0, loc)
	}
	clock := func(d time.Duration) string {
		return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated rotation: each zone dark %s of every %s, cuts offset by %s.\n", o.Dark, o.Period, o.Period/time.Duration(len(o.Zones)))
	fmt.Fprintf(&b, "format: %s\ntimezone: %s\n", schedule.FormatV1, o.TimeZone)
	fmt.Fprintf(&b, "issued_at: %q\nknown_until: %q\n", o.IssuedAt.In(loc).Format(time.RFC3339), o.KnownUntil.In(loc).Format(time.RFC3339))
	fmt.Fprintf(&b, "note: rotation of %d zones, %s dark every %s\nzones:\n", len(o.Zones), o.Dark, o.Period)
	for k, z := range o.Zones {
		fmt.Fprintf(&b, "  - name: %s\n    table:\n      kind: daily\n      cumulative: false\n      rows:\n", z)
		offset := time.Duration(k) * o.Period / time.Duration(len(o.Zones))
		offset -= offset % time.Minute
		for start := offset; start < day; start += o.Period {
			end := (start + o.Dark) % day
			endText := clock(end)
			if end == 0 {
				endText = "24:00"
			}
			fmt.Fprintf(&b, "        - {start: %q, end: %q}\n", clock(start), endText)
		}
	}
	data := []byte(b.String())
	s, err := schedule.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("rotation: generated timetable does not parse: %w", err)
	}
	return data, s, nil
}
