package schedule

import (
	"flag"
	"math"
	"strings"
	"testing"
	"time"
)

func TestVirtualClockMath(t *testing.T) {
	sast := time.FixedZone("SAST", 2*3600)
	start := time.Date(2024, 3, 2, 6, 0, 0, 0, sast)
	epoch := time.UnixMilli(1_700_000_000_000)
	c := VirtualClock{Start: start, Epoch: epoch, Speed: 3600}
	tests := []struct {
		name string
		real time.Time
		want time.Time
	}{
		{"at the epoch", epoch, start},
		{"one real second is a virtual hour", epoch.Add(time.Second), start.Add(time.Hour)},
		{"a real millisecond is 3.6 virtual seconds", epoch.Add(time.Millisecond), start.Add(3600 * time.Millisecond)},
		{"a real day", epoch.Add(24 * time.Hour), start.Add(3600 * 24 * time.Hour)},
		{"before the epoch runs backwards", epoch.Add(-2 * time.Second), start.Add(-2 * time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := c.At(tc.real)
			if !got.Equal(tc.want) {
				t.Errorf("At(%v) = %v, want %v", tc.real, got, tc.want)
			}
			if back := c.RealAt(got); !back.Equal(tc.real) {
				t.Errorf("RealAt(At(x)) = %v, want %v", back, tc.real)
			}
		})
	}
	if got := c.Real(2 * time.Hour); got != 2*time.Second {
		t.Errorf("Real(2h) = %v, want 2s", got)
	}
	if got := c.Virtual(1500 * time.Millisecond); got != 90*time.Minute {
		t.Errorf("Virtual(1.5s) = %v, want 1h30m", got)
	}
	if got := c.Virtual(math.MaxInt64 / 2); got != math.MaxInt64 {
		t.Errorf("Virtual of a huge duration = %v, want saturation at MaxInt64", got)
	}

	slow := VirtualClock{Start: start, Epoch: epoch, Speed: 0.5}
	if got := slow.At(epoch.Add(time.Minute)); !got.Equal(start.Add(30 * time.Second)) {
		t.Errorf("speed 0.5: At(epoch+1m) = %v, want start+30s", got)
	}
	if got := slow.Real(time.Minute); got != 2*time.Minute {
		t.Errorf("speed 0.5: Real(1m) = %v, want 2m", got)
	}
}

func TestVirtualClockNow(t *testing.T) {
	start := time.Date(2024, 3, 2, 6, 0, 0, 0, time.UTC)
	c := VirtualClock{Start: start, Epoch: time.Now(), Speed: 60}
	before := c.At(time.Now())
	now := c.Now()
	after := c.At(time.Now())
	if now.Before(before) || now.After(after) {
		t.Errorf("Now() = %v, not between %v and %v", now, before, after)
	}
	if now.Before(start) || now.After(start.Add(time.Hour)) {
		t.Errorf("Now() = %v, want a little after %v", now, start)
	}

	var zero VirtualClock
	r0 := time.Now()
	z := zero.Now()
	if z.Before(r0) || z.After(time.Now()) || !zero.IsZero() {
		t.Errorf("zero clock Now() = %v, want real time %v", z, r0)
	}
	if zero.Real(time.Second) != time.Second || zero.Virtual(time.Second) != time.Second {
		t.Error("zero clock does not run at speed 1")
	}
	if got := zero.RealAt(r0); !got.Equal(r0) {
		t.Errorf("zero clock RealAt = %v, want identity", got)
	}
}

func TestParseVirtualClock(t *testing.T) {
	sast := time.FixedZone("", 2*3600)
	start := time.Date(2024, 3, 2, 6, 0, 0, 0, sast)
	tests := []struct {
		in    string
		epoch time.Time
		speed float64
	}{
		{"2024-03-02T06:00:00+02:00@1700000000000x3600", time.UnixMilli(1_700_000_000_000), 3600},
		{"2024-03-02T06:00:00+02:00@1700000000x3600", time.Unix(1_700_000_000, 0), 3600},
		{"2024-03-02T06:00:00+02:00@1700000000123", time.UnixMilli(1_700_000_000_123), 1},
		{" 2024-03-02T06:00:00+02:00@2023-11-14T22:13:20ZX0.5 ", time.Unix(1_700_000_000, 0), 0.5},
		{"2024-03-02T06:00:00+02:00@1700000000000x1e3", time.UnixMilli(1_700_000_000_000), 1000},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			c, err := ParseVirtualClock(tc.in)
			if err != nil {
				t.Fatalf("ParseVirtualClock: %v", err)
			}
			if !c.Start.Equal(start) || !c.Epoch.Equal(tc.epoch) || c.Speed != tc.speed {
				t.Errorf("got %v@%v x%v, want %v@%v x%v", c.Start, c.Epoch, c.Speed, start, tc.epoch, tc.speed)
			}
			again, err := ParseVirtualClock(c.String())
			if err != nil || !again.Start.Equal(c.Start) || !again.Epoch.Equal(c.Epoch) || again.Speed != c.Speed {
				t.Errorf("String %q does not round-trip: %v, %v", c.String(), again, err)
			}
		})
	}
	if c, err := ParseVirtualClock(""); err != nil || !c.IsZero() || c.String() != "" {
		t.Errorf(`ParseVirtualClock("") = %v, %v; want the zero clock`, c, err)
	}
	for _, in := range []string{
		"2024-03-02T06:00:00+02:00",
		"2024-03-02T06:00@1700000000000",
		"2024-03-02T06:00:00+02:00@",
		"2024-03-02T06:00:00+02:00@yesterday",
		"2024-03-02T06:00:00+02:00@-5x2",
		"2024-03-02T06:00:00+02:00@1700000000000x0",
		"2024-03-02T06:00:00+02:00@1700000000000x-1",
		"2024-03-02T06:00:00+02:00@1700000000000xNaN",
		"2024-03-02T06:00:00+02:00@1700000000000xInf",
		"2024-03-02T06:00:00+02:00@1700000000000x1e9",
		"2024-03-02T06:00:00+02:00@1700000000000xfast",
	} {
		if c, err := ParseVirtualClock(in); err == nil {
			t.Errorf("ParseVirtualClock(%q) = %v, want an error", in, c)
		} else if !strings.Contains(err.Error(), "START@EPOCH") {
			t.Errorf("ParseVirtualClock(%q) error %q does not show the expected form", in, err)
		}
	}
}

func TestVirtualClockFlag(t *testing.T) {
	var c VirtualClock
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.Var(&c, "virtual-clock", "timetable clock for testnets")
	if err := fs.Parse([]string{"--virtual-clock", "2024-03-02T06:00:00+02:00@1700000000000x60"}); err != nil {
		t.Fatal(err)
	}
	if c.Speed != 60 || c.Epoch.UnixMilli() != 1_700_000_000_000 {
		t.Errorf("flag set clock %v", c)
	}
	if err := c.Set("nonsense"); err == nil {
		t.Error("Set accepted nonsense")
	}
	if c.Speed != 60 {
		t.Error("a failed Set changed the clock")
	}
	if err := (VirtualClock{Start: time.Now()}).Validate(); err == nil {
		t.Error("Validate accepted a start without an epoch")
	}
}
