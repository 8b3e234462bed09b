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
//  2. a zone other than self's before self's zone (when both are named):
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

	// One timetable answer and one verdict per zone, shared by its peers.
	zones := map[string]Verdict{}
	out := make([]Candidate, 0, len(candidates))
	for _, l := range ls {
		var p *presence
		if l.found {
			p = &l.p
		}
		if _, ok := v.liveness(l.c.Peer, p, l.suspected, now, false); !ok {
			continue
		}
		vd, seen := zones[l.p.zone]
		if !seen {
			vd = v.judge(l.p.zone, zoneAt(s, l.p.zone, now), s, now, expected, need)
			zones[l.p.zone] = vd
		}
		if !vd.OK {
			continue
		}
		c := l.c
		c.Zone, c.Verdict = l.p.zone, who(c.Peer, vd)
		out = append(out, c)
	}

	// Sort small keys rather than the candidates themselves.
	type key struct {
		idx              int
		known, elsewhere bool
		spare            time.Duration
		queue, cpu       int
	}
	keys := make([]key, len(out))
	for i, c := range out {
		k := key{idx: i, known: c.Verdict.Known, queue: c.Queue, cpu: int(c.CPU / cpuBand)}
		k.elsewhere = self.Zone != "" && c.Zone != "" && c.Zone != self.Zone
		if k.known {
			k.spare = min(c.Verdict.PoweredUntil.Sub(end), v.cfg.AmpleMargin)
		}
		keys[i] = k
	}
	v.shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	preferKnown := v.cfg.Unknown == PreferKnown
	slices.SortStableFunc(keys, func(a, b key) int {
		if preferKnown && a.known != b.known {
			return boolFirst(a.known)
		}
		if a.elsewhere != b.elsewhere {
			return boolFirst(a.elsewhere)
		}
		return cmp.Or(
			cmp.Compare(b.spare, a.spare),
			cmp.Compare(a.queue, b.queue),
			cmp.Compare(a.cpu, b.cpu),
		)
	})
	ranked := make([]Candidate, len(out))
	for i, k := range keys {
		ranked[i] = out[k.idx]
	}
	return ranked
}

// boolFirst orders a true before a false, given that they differ.
func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}
