package node

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// At start presence names many peers within a moment, before any dial
// finishes. maybeConnect must count the dials it has in flight, or a node
// dials every peer it hears of instead of TargetPeers (a 40-node testnet
// kept ~28 connections a node instead of 8: docs/bench/notes.md, "Fewer
// connections at idle").
func TestMaybeConnectCountsDialsInFlight(t *testing.T) {
	newHost := func() host.Host {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	self := newHost()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := &Node{host: self, ctx: ctx, cfg: Config{TargetPeers: 2}}
	var others []peer.ID
	for range 6 {
		o := newHost()
		self.Peerstore().AddAddrs(o.ID(), o.Addrs(), time.Hour)
		others = append(others, o.ID())
	}
	// All six are named before any dial can finish, as at start.
	for _, id := range others {
		n.maybeConnect(id)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n.dialing.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d dials still in flight after 30s", n.dialing.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(self.Network().Peers()); got != 2 {
		t.Fatalf("connected to %d peers, want TargetPeers (2): dials in flight were not counted", got)
	}
	// Connected to TargetPeers, it dials nobody else.
	n.maybeConnect(others[len(others)-1])
	if d := n.dialing.Load(); d != 0 {
		t.Fatalf("dialled a peer beyond TargetPeers")
	}
}
