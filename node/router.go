package node

import (
	"math/rand/v2"
	"sort"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/libp2p/go-libp2p/core/peer"
)

// candidate is a peer able to run a service, with what peer choice weighs.
type candidate struct {
	id    peer.ID
	ann   announcement
	score float64
}

// pick chooses the peer to run service name. A candidate must offer the
// service, be in the live view (or be this peer), not be draining, and not be
// excluded. Among those it prefers, in order: a peer not in avoid (siblings
// of a FORK go to distinct peers where possible), a zone other than this
// peer's (zones fail together), a short queue and low CPU; ties are broken at
// random to spread work.
func (n *Node) pick(name string, exclude, avoid map[peer.ID]bool) (peer.ID, bool) {
	var cands []candidate
	consider := func(id peer.ID, a announcement) {
		if exclude[id] || a.Draining || !a.offers(name) {
			return
		}
		score := rand.Float64() * 0.5 // spread
		if avoid[id] {
			score += 100
		}
		if a.Zone == n.cfg.Zone && n.cfg.Zone != "" {
			score += 10
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
	for id, a := range n.pres.live() {
		consider(id, a)
	}
	if !n.draining.Load() {
		consider(n.host.ID(), n.pres.self(false))
	}
	if len(cands) == 0 {
		return "", false
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].score < cands[j].score })
	return cands[0].id, true
}

// hasProvider reports whether some live peer (or this one) offers name.
func (n *Node) hasProvider(name string) bool {
	_, ok := n.pick(name, nil, nil)
	return ok
}
