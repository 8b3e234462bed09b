package outage

import (
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/bedwe/bedwe/schedule"
)

// Compile-time: the clocks the node will hand the view satisfy Clock.
var (
	_ Clock = clockwork.NewRealClock()
	_ Clock = schedule.VirtualClock{}
)

func TestCanRunTimetable(t *testing.T) {
	tests := []struct {
		name     string
		now      time.Time
		zone     string
		expected time.Duration
		ok       bool
		known    bool
		state    schedule.State
		reason   string // substring
	}{
		// East goes dark at 08:00; at 07:50 that is 10 minutes away and the
		// margin is 2 minutes.
		{"5 min step fits before the cut", at(7, 50, 0), "east", 5 * time.Minute, true, true, schedule.Powered, "powered until 2025-03-01T08:00:00+02:00, 3m spare"},
		{"15 min step does not", at(7, 50, 0), "east", 15 * time.Minute, false, false, schedule.Powered, "goes dark at 2025-03-01T08:00:00+02:00, in 10m; needs 17m (15m expected + 2m margin)"},
		{"exactly step plus margin fits", at(7, 50, 0), "east", 8 * time.Minute, true, true, schedule.Powered, "0s spare"},
		{"one second more does not: the margin counts", at(7, 50, 0), "east", 8*time.Minute + time.Second, false, false, schedule.Powered, "goes dark"},
		{"zero expected still needs the margin", at(7, 58, 30), "east", 0, false, false, schedule.Powered, "needs 2m (0s expected + 2m margin)"},
		{"the other zone is dark until 08:00", at(7, 50, 0), "west", time.Minute, false, false, schedule.Dark, "dark now, power returns at 2025-03-01T08:00:00+02:00"},
		{"then powered until 10:00", at(8, 0, 0), "west", 118 * time.Minute, true, true, schedule.Powered, "powered until 2025-03-01T10:00:00+02:00"},
		{"dark now", at(8, 30, 0), "east", time.Minute, false, false, schedule.Dark, "dark now, power returns at 2025-03-01T10:00:00+02:00"},
		{"just restored", at(10, 0, 0), "east", time.Hour, true, true, schedule.Powered, "powered until 2025-03-01T12:00:00+02:00"},
		// Beyond known_until (2025-03-02 00:00) east is Unknown; the
		// default policy accepts but does not vouch.
		{"window runs past known_until", at(23, 50, 0), "east", 15 * time.Minute, true, false, schedule.Powered, "then the timetable does not know; accepted by unknown-policy prefer-known"},
		{"inside known_until", at(23, 0, 0), "east", 15 * time.Minute, true, true, schedule.Powered, "powered until 2025-03-02T00:00:00+02:00"},
		{"beyond known_until", at(23, 0, 0).Add(2 * time.Hour), "east", time.Minute, true, false, schedule.Unknown, "does not know the zone's state now"},
		{"zone not in the timetable", at(7, 50, 0), "north", time.Minute, true, false, schedule.Unknown, "zone not in the timetable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &setClock{t: tc.now}
			v := newView(t, clock, testConfig(), twoZone)
			v.Observe("p1", tc.zone, false, tc.now)
			vd := v.CanRun("p1", tc.expected)
			if vd.OK != tc.ok || vd.Known != tc.known || vd.State != tc.state {
				t.Errorf("verdict OK=%v Known=%v State=%v, want %v %v %v (%s)", vd.OK, vd.Known, vd.State, tc.ok, tc.known, tc.state, vd.Reason)
			}
			if !strings.Contains(vd.Reason, tc.reason) || !strings.Contains(vd.Reason, "peer p1 (zone "+tc.zone+")") {
				t.Errorf("reason %q, want it to name peer and zone and contain %q", vd.Reason, tc.reason)
			}
			if vd.Zone != tc.zone {
				t.Errorf("Zone = %q, want %q", vd.Zone, tc.zone)
			}
		})
	}
}

func TestCanRunPoweredUntil(t *testing.T) {
	clock := &setClock{t: at(7, 50, 0)}
	v := newView(t, clock, testConfig(), twoZone)
	v.Observe("e", "east", false, clock.Now())
	vd := v.CanRun("e", time.Minute)
	if !vd.PoweredUntil.Equal(at(8, 0, 0)) || vd.Next != schedule.Dark {
		t.Errorf("PoweredUntil = %v then %v, want 08:00 then dark", vd.PoweredUntil, vd.Next)
	}
	clock.Set(at(23, 0, 0))
	v.Observe("e", "east", false, clock.Now())
	vd = v.CanRun("e", time.Minute)
	if !vd.PoweredUntil.Equal(at(0, 0, 0).AddDate(0, 0, 1)) || vd.Next != schedule.Unknown {
		t.Errorf("PoweredUntil = %v then %v, want known_until then unknown", vd.PoweredUntil, vd.Next)
	}
}

func TestCanRunMarginConfig(t *testing.T) {
	// The same 5 minute step at 07:50 fits with a 2 minute margin but not
	// with a 6 minute one.
	for _, tc := range []struct {
		margin time.Duration
		ok     bool
	}{{2 * time.Minute, true}, {5 * time.Minute, true}, {5*time.Minute + time.Second, false}, {6 * time.Minute, false}} {
		cfg := testConfig()
		cfg.Margin = tc.margin
		clock := &setClock{t: at(7, 50, 0)}
		v := newView(t, clock, cfg, twoZone)
		v.Observe("e", "east", false, clock.Now())
		if vd := v.CanRun("e", 5*time.Minute); vd.OK != tc.ok {
			t.Errorf("margin %v: OK = %v, want %v (%s)", tc.margin, vd.OK, tc.ok, vd.Reason)
		}
	}
}

func TestCanRunLiveness(t *testing.T) {
	now := at(7, 0, 0) // east powered until 08:00, west dark 06:00-08:00
	tests := []struct {
		name   string
		setup  func(v *View, c *setClock)
		ok     bool
		reason string
	}{
		{"fresh presence", func(v *View, c *setClock) { v.Observe("p", "east", false, now) }, true, "powered until"},
		{"never heard", func(v *View, c *setClock) {}, false, "no presence heard"},
		{"heard exactly TTL ago", func(v *View, c *setClock) { v.Observe("p", "east", false, now.Add(-15*time.Second)) }, true, "powered"},
		{"stale", func(v *View, c *setClock) { v.Observe("p", "east", false, now.Add(-16*time.Second)) }, false, "stale, last heard 16s ago (TTL 15s)"},
		{"draining", func(v *View, c *setClock) { v.Observe("p", "east", true, now) }, false, "draining"},
		{"suspected", func(v *View, c *setClock) {
			v.Observe("p", "east", false, now)
			v.Suspect("p")
		}, false, "suspected by heartbeat"},
		{"suspected, then presence: still suspected", func(v *View, c *setClock) {
			v.Suspect("p")
			v.Observe("p", "east", false, now)
		}, false, "suspected"},
		{"suspected, then alive", func(v *View, c *setClock) {
			v.Observe("p", "east", false, now)
			v.Suspect("p")
			v.Alive("p")
		}, true, "powered"},
		{"suspicion expires after SuspectFor", func(v *View, c *setClock) {
			c.Set(now.Add(-time.Minute))
			v.Suspect("p")
			c.Set(now)
			v.Observe("p", "east", false, now)
		}, true, "powered"},
		{"suspicion in force just before SuspectFor", func(v *View, c *setClock) {
			c.Set(now.Add(-time.Minute + time.Second))
			v.Suspect("p")
			c.Set(now)
			v.Observe("p", "east", false, now)
		}, false, "suspected"},
		{"forgotten", func(v *View, c *setClock) {
			v.Observe("p", "east", false, now)
			v.Forget("p")
		}, false, "no presence heard"},
		{"an older announcement does not undo a newer one", func(v *View, c *setClock) {
			v.Observe("p", "east", true, now)
			v.Observe("p", "east", false, now.Add(-time.Second))
		}, false, "draining"},
		{"a live peer in a dark zone", func(v *View, c *setClock) { v.Observe("p", "west", false, now) }, false, "dark now"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &setClock{t: now}
			v := newView(t, clock, testConfig(), twoZone)
			tc.setup(v, clock)
			vd := v.CanRun("p", 5*time.Minute)
			if vd.OK != tc.ok || !strings.Contains(vd.Reason, tc.reason) {
				t.Errorf("OK=%v %q, want OK=%v and %q", vd.OK, vd.Reason, tc.ok, tc.reason)
			}
			// Suspected agrees with the suspicion rule CanRun applies.
			if want := strings.Contains(tc.reason, "suspected"); v.Suspected("p") != want {
				t.Errorf("Suspected = %v, want %v", v.Suspected("p"), want)
			}
		})
	}
}

func TestSuspectForZeroHoldsUntilAlive(t *testing.T) {
	cfg := testConfig()
	cfg.SuspectFor = 0
	clock := &setClock{t: at(7, 0, 0)}
	v := newView(t, clock, cfg, twoZone)
	v.Suspect("p")
	clock.Set(at(7, 30, 0))
	v.Observe("p", "east", false, clock.Now())
	if vd := v.CanRun("p", time.Minute); vd.OK {
		t.Fatalf("suspicion lapsed with SuspectFor 0: %s", vd.Reason)
	}
	v.Alive("p")
	if vd := v.CanRun("p", time.Minute); !vd.OK {
		t.Fatalf("Alive did not clear the suspicion: %s", vd.Reason)
	}
}

func TestUnknownPolicy(t *testing.T) {
	// At 23:50 east is powered until known_until (00:00), so a 15 minute
	// step runs into Unknown; "north" is not in the timetable at all.
	tests := []struct {
		policy         UnknownPolicy
		ok, northOK    bool
		reasonContains string
	}{
		{PreferKnown, true, true, "accepted by unknown-policy prefer-known"},
		{AllowUnknown, true, true, "accepted by unknown-policy allow"},
		{DenyUnknown, false, false, "refused by unknown-policy deny"},
	}
	for _, tc := range tests {
		t.Run(tc.policy.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.Unknown = tc.policy
			clock := &setClock{t: at(23, 50, 0)}
			v := newView(t, clock, cfg, twoZone)
			v.Observe("e", "east", false, clock.Now())
			v.Observe("n", "north", false, clock.Now())
			vd := v.CanRun("e", 15*time.Minute)
			if vd.OK != tc.ok || vd.Known || !strings.Contains(vd.Reason, tc.reasonContains) {
				t.Errorf("east: OK=%v Known=%v %q", vd.OK, vd.Known, vd.Reason)
			}
			if vd := v.CanRun("n", time.Minute); vd.OK != tc.northOK || vd.Known {
				t.Errorf("north: OK=%v Known=%v %q", vd.OK, vd.Known, vd.Reason)
			}
			// Inside known_until every policy agrees.
			if vd := v.CanRun("e", 5*time.Minute); !vd.OK || !vd.Known {
				t.Errorf("east, 5 min: OK=%v Known=%v %q", vd.OK, vd.Known, vd.Reason)
			}
		})
	}
}

func TestNoTimetable(t *testing.T) {
	// Without a timetable, or with a clock before its issued_at, liveness
	// alone decides, whatever the policy.
	for _, tc := range []struct {
		name   string
		src    string
		now    time.Time
		reason string
	}{
		{"nil timetable", "", at(8, 30, 0), "no timetable"},
		{"clock before issued_at", twoZone, time.Date(1970, 1, 1, 8, 30, 0, 0, sast), "before the timetable's issued_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Unknown = DenyUnknown
			clock := &setClock{t: tc.now}
			v := newView(t, clock, cfg, tc.src)
			v.Observe("e", "east", false, clock.Now())
			vd := v.CanRun("e", 10*time.Hour)
			if !vd.OK || vd.Known || vd.State != schedule.Unknown || !strings.Contains(vd.Reason, tc.reason) {
				t.Errorf("verdict %+v", vd)
			}
			v.Observe("s", "east", false, clock.Now().Add(-time.Minute))
			if vd := v.CanRun("s", time.Minute); vd.OK {
				t.Errorf("a stale peer qualified without a timetable: %s", vd.Reason)
			}
		})
	}
}

func TestOfferKeepsNewest(t *testing.T) {
	clock := &setClock{t: at(7, 50, 0)}
	v := newView(t, clock, testConfig(), "")
	old := parse(t, twoZone)
	newer := parse(t, strings.Replace(twoZone, `issued_at: "2025-01-01`, `issued_at: "2025-02-01`, 1))
	// In newer, east is never dark: prove which one is in force by asking.
	newer.Zones[0].Table.Rows = nil
	if !v.Offer(old) || v.Schedule() != old {
		t.Fatal("Offer into an empty view refused")
	}
	if v.Offer(old) {
		t.Error("Offer of the same timetable reported a change")
	}
	if !v.Offer(newer) || v.Schedule() != newer {
		t.Fatal("Offer of a newer timetable refused")
	}
	if v.Offer(old) || v.Schedule() != newer {
		t.Error("an older timetable replaced a newer one")
	}
	if v.Offer(nil) || v.Schedule() != newer {
		t.Error("Offer(nil) replaced the timetable")
	}
	if st := v.Powered("east", at(8, 30, 0)); st != schedule.Powered {
		t.Errorf("Powered under the newer timetable = %v, want powered", st)
	}
	v.SetSchedule(nil)
	if st := v.Powered("east", at(8, 30, 0)); st != schedule.Unknown || v.Timeline("east", at(0, 0, 0), at(23, 0, 0)) != nil {
		t.Errorf("without a timetable: Powered = %v, want unknown, and no timeline", st)
	}
}

func TestPoweredAndTimeline(t *testing.T) {
	v := newView(t, &setClock{t: at(7, 0, 0)}, testConfig(), twoZone)
	if st := v.Powered("east", at(8, 0, 0)); st != schedule.Dark {
		t.Errorf("Powered(east, 08:00) = %v, want dark", st)
	}
	if st := v.Powered("east", at(7, 59, 59)); st != schedule.Powered {
		t.Errorf("Powered(east, 07:59:59) = %v, want powered", st)
	}
	ws := v.Timeline("west", at(5, 0, 0), at(13, 0, 0))
	if len(ws) != 2 || !ws[0].Start.Equal(at(6, 0, 0)) || !ws[1].End.Equal(at(12, 0, 0)) {
		t.Errorf("Timeline(west, 05-13) = %v, want 06-08 and 10-12", ws)
	}
}

func TestViewWithClockwork(t *testing.T) {
	fc := clockwork.NewFakeClockAt(at(7, 40, 0))
	v := newView(t, fc, testConfig(), twoZone)
	v.Observe("e", "east", false, fc.Now())
	if vd := v.CanRun("e", 15*time.Minute); !vd.OK {
		t.Fatalf("07:40, 15 min step: %s", vd.Reason)
	}
	fc.Advance(10 * time.Second)
	v.Observe("e", "east", false, fc.Now())
	fc.Advance(5 * time.Minute)
	if vd := v.CanRun("e", 15*time.Minute); vd.OK || !strings.Contains(vd.Reason, "stale") {
		t.Fatalf("07:45 without presence: %s", vd.Reason)
	}
	v.Observe("e", "east", false, fc.Now())
	if vd := v.CanRun("e", 15*time.Minute); vd.OK || !strings.Contains(vd.Reason, "goes dark") {
		t.Fatalf("07:45, 15 min step: %s", vd.Reason)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	if err := TestnetConfig(60).Validate(); err != nil {
		t.Errorf("TestnetConfig: %v", err)
	}
	if got := TestnetConfig(60).DrainMargin; got != 3*time.Minute {
		t.Errorf("TestnetConfig(60).DrainMargin = %v, want 3 real seconds = 3m virtual", got)
	}
	bad := []func(*Config){
		func(c *Config) { c.PresenceTTL = 0 },
		func(c *Config) { c.Margin = -1 },
		func(c *Config) { c.Samples = 0 },
		func(c *Config) { c.MinSamples = c.Samples + 1 },
		func(c *Config) { c.Unknown = 7 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("bad config %d validated", i)
		}
		if _, err := NewView(&setClock{}, c, nil); err == nil {
			t.Errorf("NewView accepted bad config %d", i)
		}
	}
	if _, err := NewView(nil, DefaultConfig(), nil); err == nil {
		t.Error("NewView accepted a nil clock")
	}
	for _, p := range []UnknownPolicy{PreferKnown, AllowUnknown, DenyUnknown} {
		var q UnknownPolicy
		b, _ := p.MarshalText()
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Errorf("policy %v does not round-trip: %v %v", p, q, err)
		}
	}
	if _, err := ParseUnknownPolicy("maybe"); err == nil {
		t.Error("ParseUnknownPolicy accepted maybe")
	}
}
