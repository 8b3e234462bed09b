package node

import (
	"fmt"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
)

// GossipConfig is the shape of the gossipsub mesh (go-libp2p-pubsub's
// GossipSubParams, the fields that matter for a small mesh): every peer
// keeps D mesh peers for each topic (between Dlo and Dhi), sends IHAVE
// gossip to Dlazy others every Heartbeat, and, with FloodPublish, sends
// its own messages to every peer of the topic instead of its mesh only.
//
// gossipsub's defaults (D 6, Dlo 5, Dhi 12, Dlazy 6) are made for meshes
// of thousands of peers that may be hostile. A neighbourhood mesh is tens
// of boards that share a swarm key and a member list, and at idle its
// whole traffic is presence refreshes, each of which every node received
// from up to six mesh peers besides the publisher's own copy. With D 3
// and the slower presence refresh (Config.PresenceRefreshPerPeer) the
// idle CPU of 40 testnet nodes falls from 41–54 % to 25–29 % of one core
// (alternating runs on a quiet machine; docs/benchmarks.md).
type GossipConfig struct {
	D, Dlo, Dhi, Dlazy int
	Heartbeat          time.Duration
	// FloodPublish sends a peer's own messages to all peers of the topic
	// it is connected to, not only to its mesh: delivery that does not
	// wait for a mesh, at the price of a duplicate at most peers.
	FloodPublish bool
}

// SmallMeshGossip is the default GossipConfig: D 3 (Dlo 2, Dhi 5), Dlazy
// 1, gossipsub's 1 s heartbeat, flood publish on. Three mesh peers keep a
// message's path redundant (a peer reaches the rest of the mesh through
// any of them), and IHAVE gossip repairs what a broken mesh link missed
// within a heartbeat or two.
//
// Dlazy 1: every heartbeat, a peer advertises the messages of the last
// three heartbeats to one other peer, picked at random, so each message
// is still advertised by each peer three times. At idle, with presence
// refreshes spread over time, IHAVE messages with Dlazy 3 are more than
// half of a node's gossip traffic: 2.4 of the 4.4 messages a second each
// of 40 idle nodes send.
//
// Flood publish stays on: a peer that has just started has no mesh yet,
// and without it its first announcements reach nobody until a refresh
// (without it, an 80-node testnet does not connect within two minutes).
func SmallMeshGossip() GossipConfig {
	return GossipConfig{D: 3, Dlo: 2, Dhi: 5, Dlazy: 1, Heartbeat: time.Second, FloodPublish: true}
}

// withDefaults is d for a zero GossipConfig; otherwise it fills the zero
// fields of g from d (FloodPublish is then taken as given).
func (g GossipConfig) withDefaults(d GossipConfig) GossipConfig {
	if g == (GossipConfig{}) {
		return d
	}
	if g.D <= 0 && g.Dlo <= 0 && g.Dhi <= 0 {
		g.D, g.Dlo, g.Dhi = d.D, d.Dlo, d.Dhi
	}
	if g.Dlazy <= 0 {
		g.Dlazy = d.Dlazy
	}
	if g.Heartbeat <= 0 {
		g.Heartbeat = d.Heartbeat
	}
	return g
}

// PubsubOptions are the gossipsub options for g: its parameters on top of
// gossipsub's defaults. GossipFactor is 0, so IHAVE gossip goes to
// exactly Dlazy peers a heartbeat (gossipsub's 0.25 of the peers outside
// the mesh would be 2–9 on a mesh of tens, whatever Dlazy says). Dout (outbound mesh links, an eclipse defence)
// follows D, as gossipsub requires it below Dlo and D/2; Dscore (links
// kept by score when pruning) may not exceed Dhi. An invalid shape is an
// error here, before the host starts, not inside pubsub.
func (g GossipConfig) PubsubOptions() ([]pubsub.Option, error) {
	if !(g.Dlo <= g.D && g.D <= g.Dhi && g.Dlo >= 1 && g.D >= 2) {
		return nil, fmt.Errorf("gossip mesh degree: want 1 <= Dlo (%d) <= D (%d) <= Dhi (%d) and D >= 2", g.Dlo, g.D, g.Dhi)
	}
	if g.Dlazy < 0 || g.Heartbeat <= 0 {
		return nil, fmt.Errorf("gossip: Dlazy %d and heartbeat %v must not be negative or zero", g.Dlazy, g.Heartbeat)
	}
	p := pubsub.DefaultGossipSubParams()
	p.D, p.Dlo, p.Dhi, p.Dlazy = g.D, g.Dlo, g.Dhi, g.Dlazy
	p.GossipFactor = 0
	p.Dout = min(p.Dout, g.Dlo-1, (g.D/2)-1)
	p.Dout = max(p.Dout, 0)
	p.Dscore = min(p.Dscore, g.Dhi)
	p.HeartbeatInterval = g.Heartbeat
	return []pubsub.Option{pubsub.WithGossipSubParams(p), pubsub.WithFloodPublish(g.FloodPublish)}, nil
}
