package outage

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// Verdict is CanRun's answer for one peer.
type Verdict struct {
	// OK: the peer may be given the step.
	OK bool
	// Reason says why, naming the peer and its zone; for a refusal it is
	// the first rule the peer failed, in the order of CanRun's doc.
	Reason string
	// Zone is the zone the peer last announced ("" if never heard).
	Zone string
	// State is the zone's timetable state now (Unknown without a
	// timetable, or when liveness already excluded the peer).
	State schedule.State
	// PoweredUntil is when the zone's known powered stretch from now ends;
	// zero unless State is Powered.
	PoweredUntil time.Time
	// Next is what follows PoweredUntil: Dark (a cut), Unknown (the
	// timetable's horizon), or Powered when the zone is powered beyond the
	// timetable's look-ahead.
	Next schedule.State
	// Known: the timetable vouches that the zone is powered for the whole
	// need (expected time plus Margin). An OK verdict without Known rests
	// on the UnknownPolicy.
	Known bool
}

// zoneAnswer is what the timetable says of one zone now; Rank computes it
// once per zone.
type zoneAnswer struct {
	state schedule.State
	until time.Time
	next  schedule.State
	// blind is why no timetable answer applies ("" when one does): no
	// timetable, or a clock that reads before its issued_at.
	blind string
	// listed: the timetable lists the zone.
	listed bool
}

func zoneAt(s *schedule.Schedule, zone string, now time.Time) zoneAnswer {
	switch {
	case s == nil:
		return zoneAnswer{blind: "no timetable"}
	case !schedule.Plausible(now, s):
		return zoneAnswer{blind: "clock reads " + stamp(now) + ", before the timetable's issued_at " + stamp(s.IssuedAt)}
	}
	st, err := s.StateAt(zone, now)
	if err != nil {
		return zoneAnswer{listed: !errors.Is(err, schedule.ErrUnknownZone)}
	}
	za := zoneAnswer{state: st, listed: true}
	if st == schedule.Powered {
		za.until, za.next = s.PoweredUntil(zone, now)
	}
	return za
}

// CanRun says whether peer may be given a step expected to take expected
// (see Expected). The peer qualifies if, in this order:
//
//  1. it is live: its presence was heard within PresenceTTL;
//  2. heartbeat does not suspect it (Suspect, until Alive or SuspectFor);
//  3. it is not draining;
//  4. its zone stays powered from now until now + expected + Margin by the
//     timetable. A known cut inside that window refuses it; a zone dark
//     now refuses it; Unknown inside the window is decided by the
//     UnknownPolicy; without a timetable this rule passes.
func (v *View) CanRun(peer string, expected time.Duration) Verdict {
	now := v.clock.Now()
	need := v.need(expected)
	p, suspected := v.lookup(peer, now)
	if vd, ok := v.liveness(peer, p, suspected, now, true); !ok {
		return vd
	}
	s := v.sched.Load()
	return who(peer, v.judge(p.zone, zoneAt(s, p.zone, now), s, now, expected, need))
}

func (v *View) need(expected time.Duration) time.Duration {
	return max(expected, 0) + v.cfg.Margin
}

// lookup copies peer's presence (nil if unknown) under the read lock.
func (v *View) lookup(peer string, now time.Time) (*presence, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	p := v.peers[peer]
	if p == nil {
		return nil, false
	}
	c := *p
	return &c, v.suspectedAt(p, now)
}

// liveness applies rules 1-3 of CanRun; without explain it leaves Reason
// empty (Rank drops refused peers, so their reasons would be wasted work).
func (v *View) liveness(peer string, p *presence, suspected bool, now time.Time, explain bool) (Verdict, bool) {
	if p == nil || p.seen.IsZero() {
		return Verdict{Reason: "peer " + peer + ": no presence heard"}, false
	}
	vd := Verdict{Zone: p.zone}
	ttl := v.liveFor(p)
	live := now.Sub(p.seen) <= ttl && !suspected && !p.draining
	if live || !explain {
		return vd, live
	}
	switch {
	case now.Sub(p.seen) > ttl:
		vd.Reason = fmt.Sprintf("peer %s (zone %s): stale, last heard %s ago (TTL %s)", peer, p.zone, short(now.Sub(p.seen)), short(ttl))
	case suspected:
		vd.Reason = fmt.Sprintf("peer %s (zone %s): suspected by heartbeat at %s", peer, p.zone, stamp(p.suspected))
	default:
		vd.Reason = fmt.Sprintf("peer %s (zone %s): draining", peer, p.zone)
	}
	return vd, false
}

// judge applies rule 4 of CanRun to a live peer in zone. The Reason it
// returns lacks the "peer P (zone Z): " prefix (see who), so Rank can share
// one verdict among the peers of a zone.
func (v *View) judge(zone string, za zoneAnswer, s *schedule.Schedule, now time.Time, expected, need time.Duration) Verdict {
	vd := Verdict{Zone: zone, State: za.state, PoweredUntil: za.until, Next: za.next}
	if za.blind != "" {
		vd.OK, vd.Reason = true, "live; "+za.blind+", so liveness alone decides"
		return vd
	}
	end := now.Add(need)
	needs := func() string {
		return "needs " + short(need) + " (" + short(max(expected, 0)) + " expected + " + short(v.cfg.Margin) + " margin)"
	}
	unknown := func(what string) Verdict {
		if v.cfg.Unknown == DenyUnknown {
			vd.Reason = what + "; refused by unknown-policy deny; " + needs()
			return vd
		}
		vd.OK, vd.Reason = true, what+"; accepted by unknown-policy "+v.cfg.Unknown.String()
		return vd
	}
	switch za.state {
	case schedule.Powered:
		switch {
		case !za.until.Before(end):
			vd.OK, vd.Known = true, true
			vd.Reason = "powered until " + stamp(za.until) + ", " + short(za.until.Sub(end)) + " spare beyond the " + short(need) + " it needs"
		case za.next == schedule.Dark:
			vd.Reason = "goes dark at " + stamp(za.until) + ", in " + short(za.until.Sub(now)) + "; " + needs()
		default:
			return unknown("powered until " + stamp(za.until) + ", then the timetable does not know")
		}
	case schedule.Dark:
		vd.Reason = "dark now"
		if at, ok := s.NextRestore(zone, now); ok {
			vd.Reason += ", power returns at " + stamp(at)
		}
	default:
		if !za.listed {
			return unknown("zone not in the timetable")
		}
		return unknown("timetable does not know the zone's state now")
	}
	return vd
}

// who prefixes a zone verdict's reason with the peer it is about.
func who(peer string, vd Verdict) Verdict {
	vd.Reason = "peer " + peer + " (zone " + vd.Zone + "): " + vd.Reason
	return vd
}

// Powered is the timetable's state of zone at at (Unknown without a
// timetable or for a zone it does not list).
func (v *View) Powered(zone string, at time.Time) schedule.State {
	s := v.sched.Load()
	if s == nil {
		return schedule.Unknown
	}
	st, _ := s.StateAt(zone, at)
	return st
}

// Timeline is the zone's dark windows overlapping [from, to) (nil without
// a timetable); see schedule.Schedule.Windows.
func (v *View) Timeline(zone string, from, to time.Time) []schedule.Window {
	s := v.sched.Load()
	if s == nil {
		return nil
	}
	return s.Windows(zone, from, to)
}

// stamp renders an instant for reasons, in the zone it carries.
func stamp(t time.Time) string { return t.Format("2006-01-02T15:04:05Z07:00") }

// short renders a duration to the second without zero tails: 10m, 1h30m,
// 45s, 1h0m5s stays.
func short(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return d.String()
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
