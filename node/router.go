package node

import (
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/outage"
)

// candidate is a peer able to run a service, with what peer choice weighs.
type candidate struct {
	id    peer.ID
	ann   *announcement
	score float64
}

// pick chooses the peer to run service name, declared to take about
// declared (its expect= attribute; 0 if none). A candidate must offer the
// service, be in the live view (or be this peer), not be draining, and not be
// excluded, and its circuit breaker must not be open. With timetable routing it must also be powered, by the
// timetable, for the step's expected time plus a margin (outage.View.Rank:
// the learned or declared run time; peers the timetable only "does not
// know" about are used when no peer is known to be powered). Among those it
// prefers, in order: a peer not in avoid (siblings of a FORK go to distinct
// peers where possible), a peer the timetable vouches for, a peer with room
// (one that announced a full queue would refuse as busy: capacity.go), a
// zone other than this peer's (zones fail together), a free execution slot,
// more powered time to spare, a short queue and low CPU; ties are broken at
// random to spread work.
func (n *Node) pick(name string, declared time.Duration, exclude, avoid map[peer.ID]bool) (peer.ID, bool) {
	live := n.pres.live()
	cands := make([]candidate, 0, len(live)+1)
	consider := func(id peer.ID, a *announcement, offers bool) {
		if exclude[id] || a.Draining || !offers {
			return
		}
		if id != n.host.ID() && !n.breakers.Allowed(a.ID) {
			return // its circuit breaker is open: recent hand-offs failed
		}
		score := n.rand.Float64() * 0.5 // spread
		if avoid[id] {
			score += 100
		}
		if a.Zone == n.cfg.Zone && n.cfg.Zone != "" {
			score += 10
		}
		// Room first (bulkheads): a full peer would refuse as busy, and
		// on one without a free slot the step would wait.
		if a.full() {
			score += 40
		} else if a.waits() {
			score += 8
		}
		score += float64(a.Queue) * 2
		score += a.CPU / 50
		// An open connection saves a dial (and its backoff after failures).
		if id != n.host.ID() && n.host.Network().Connectedness(id) != network.Connected {
			score += 3
		}
		// Handing work to a different peer keeps a watcher apart from the
		// holder: this peer runs work itself only when it is clearly best.
		if id == n.host.ID() {
			score += 5
		}
		cands = append(cands, candidate{id: id, ann: a, score: score})
	}
	for i := range live {
		consider(live[i].id, &live[i].ann, live[i].ann.offers(name))
	}
	if !n.draining.Load() {
		self := n.pres.selfForChoice()
		consider(n.host.ID(), &self, n.services.Offers(name))
	}
	if n.timetableRouting() {
		cands = n.powered(name, declared, cands)
	}
	if len(cands) == 0 {
		return "", false
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if c.score < best.score {
			best = c
		}
	}
	return best.id, true
}

// powered keeps the candidates the timetable says stay powered long enough
// for a step of service name, and weighs their verdicts into the scores:
// a peer accepted only because the timetable does not know (its horizon,
// an unlisted zone) ranks below every peer it vouches for, and more spare
// powered time (up to the view's AmpleMargin) ranks higher.
func (n *Node) powered(name string, declared time.Duration, cands []candidate) []candidate {
	view := n.tt.view
	expected := view.Expected(name, n.tt.clock.Virtual(declared))
	oc := make([]outage.Candidate, len(cands))
	for i, c := range cands {
		oc[i] = outage.Candidate{Peer: c.ann.ID, Zone: c.ann.Zone, Queue: c.ann.Queue, CPU: c.ann.CPU}
	}
	ranked := view.Rank(oc, outage.Candidate{Zone: n.cfg.Zone}, expected)
	verdicts := make(map[string]outage.Verdict, len(ranked))
	for _, r := range ranked {
		verdicts[r.Peer] = r.Verdict
	}
	now := view.Now()
	need := expected + view.Config().Margin
	ample := view.Config().AmpleMargin
	kept := cands[:0]
	for _, c := range cands {
		vd, ok := verdicts[c.ann.ID]
		if !ok {
			continue
		}
		if !vd.Known {
			c.score += 50
		} else if ample > 0 {
			spare := min(vd.PoweredUntil.Sub(now.Add(need)), ample)
			c.score += 4 * (1 - float64(spare)/float64(ample))
		}
		kept = append(kept, c)
	}
	return kept
}

// hasProvider reports whether some live peer (or this one) offers name and,
// with timetable routing, is powered long enough to run it.
func (n *Node) hasProvider(name string, declared time.Duration) bool {
	_, ok := n.pick(name, declared, nil, nil)
	return ok
}

// passedOver names the live peers offering name that peer choice skips
// because their circuit breaker is open, for error messages.
func (n *Node) passedOver(name string) []string {
	var out []string
	for _, lp := range n.pres.live() {
		if lp.ann.offers(name) && !n.breakers.Allowed(lp.ann.ID) {
			out = append(out, rpc.ShortID(lp.id)+" (circuit breaker open after failed hand-offs)")
		}
	}
	return out
}
