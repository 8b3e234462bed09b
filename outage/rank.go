package outage

import (
	"cmp"
	"slices"
	"time"
)

// Candidate is a peer that offers the service a step needs, with the load
// it last announced. The node builds the list from presence (service
// offered, circuit breaker closed); Rank does the rest.
type Candidate struct {
	// Peer is the peer's ID as the node names it to the view.
	Peer string
	// Zone is the peer's zone. Rank overwrites it with the zone the view
	// observed, which is the one the timetable verdict used.
	Zone string
	// Queue is how many packs the peer has running or queued.
	Queue int
	// CPU is the peer's CPU use in percent of all cores (0-100).
	CPU float64
	// Verdict is filled in by Rank: why the candidate qualified.
	Verdict Verdict
}

// cpuBand is the width, in percentage points, of the CPU bands Rank
// compares: small differences in a sampled figure are noise and must not
// defeat the random spread.
const cpuBand = 10

// Rank returns the candidates that CanRun accepts for a step expected to
// take expected, best first. self is the choosing node (only its Zone is
// used); it may itself be among the candidates. The order, each rule
// breaking ties of the ones before:
//
//  1. under PreferKnown, peers the timetable vouches for over the whole
//     need (Verdict.Known) before those accepted on Unknown;
//  2. a zone other than self's before self's zone (when both are known):
//     zones fail together, so the copy a hand-off leaves behind survives
//     a cut only if the successor is elsewhere;
//  3. the longer spare powered time beyond the need, capped at
//     AmpleMargin: a peer with minutes to spare is exposed to a late
//     step or skewed clock, but beyond the cap it does not matter;
//  4. a shorter queue, then a lower CPU band (10-point bands);
//  5. a shuffle from the view's seeded source, so equal peers share the
//     work and a given Seed and call sequence gives the same order.
func (v *View) Rank(candidates []Candidate, self Candidate, expected time.Duration) []Candidate {
	now := v.clock.Now()
	need := v.need(expected)
	end := now.Add(need)
	s := v.sched.Load()

	type live struct {
		c         Candidate
		p         presence
		suspected bool
		found     bool
	}
	ls := make([]live, len(candidates))
	v.mu.RLock()
	for i, c := range candidates {
		ls[i].c = c
		if p := v.peers[c.Peer]; p != nil {
			ls[i].p, ls[i].found, ls[i].suspected = *p, true, v.suspectedAt(p, now)
		}
	}
	v.mu.RUnlock()

	zones := map[string]zoneAnswer{}
	out := make([]Candidate, 0, len(candidates))
	for _, l := range ls {
		var p *presence
		if l.found {
			p = &l.p
		}
		vd, ok := v.liveness(l.c.Peer, p, l.suspected, now)
		if !ok {
			continue
		}
		za, seen := zones[l.p.zone]
		if !seen {
			za = zoneAt(s, l.p.zone, now)
			zones[l.p.zone] = za
		}
		vd = v.judge(l.c.Peer, l.p.zone, za, s, now, expected, need)
		if !vd.OK {
			continue
		}
		c := l.c
		c.Zone, c.Verdict = l.p.zone, vd
		out = append(out, c)
	}

	v.shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	spare := func(c Candidate) time.Duration {
		if !c.Verdict.Known {
			return 0
		}
		return min(c.Verdict.PoweredUntil.Sub(end), v.cfg.AmpleMargin)
	}
	elsewhere := func(c Candidate) bool {
		return self.Zone != "" && c.Zone != "" && c.Zone != self.Zone
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		if v.cfg.Unknown == PreferKnown && a.Verdict.Known != b.Verdict.Known {
			return boolFirst(a.Verdict.Known)
		}
		if ea, eb := elsewhere(a), elsewhere(b); ea != eb {
			return boolFirst(ea)
		}
		return cmp.Or(
			cmp.Compare(spare(b), spare(a)),
			cmp.Compare(a.Queue, b.Queue),
			cmp.Compare(int(a.CPU/cpuBand), int(b.CPU/cpuBand)),
		)
	})
	return out
}

// boolFirst orders a true before a false, given that they differ.
func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}
