package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Two receivers that each refuse a hand-off as taken by the other (each
// says the other took the step first) make handToFirst go back and forth
// between them until UnsettledGiveUp passes; it must back off between
// rounds and give up at the deadline. Real libp2p hosts answer the
// hand-offs and count them. A sender that asked a peer named a second
// time again at once and never checked the deadline would spin on two
// requests for as long as its context lived (here: thousands of
// hand-offs in 10 s).
func TestHandToFirstBacksOffWhenTwoPeersNameEachOther(t *testing.T) {
	n := choiceNode(t, 0)
	n.calls = rpc.NewMux(n.host, nil, time.Second, nil)
	n.cfg.UnsettledGiveUp = 2 * time.Second
	a, b := p2ptest.Host(t), p2ptest.Host(t)
	var served atomic.Int32
	serve := func(h, other host.Host) {
		rpc.Serve(h, nil, api.ProtoHandoff, api.MaxControlFrame, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
			served.Add(1)
			return rpc.MustCBOR(api.Ack{Code: api.CodeTaken, Error: "taken", Guardians: []pack.Peer{{ID: other.ID().String()}}})
		})
		n.host.Peerstore().AddAddrs(h.ID(), h.Addrs(), peerstore.PermanentAddrTTL)
	}
	serve(a, b)
	serve(b, a)
	w, err := grammar.Parse("t", []byte("S1 S2"))
	if err != nil {
		t.Fatal(err)
	}
	grammar.AssignPaths(w)
	p := &pack.Pack{WorkflowID: "wf-test", Origin: []pack.Peer{{ID: n.selfID}}, Workflow: w, Input: []byte("null")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hd, err := n.handToFirst(ctx, p, a.ID())
	if err != nil {
		t.Fatalf("handToFirst: %v, want the hand-off counted as made at the deadline", err)
	}
	if hd.to != a.ID() && hd.to != b.ID() {
		t.Errorf("counted as handed to %s, want one of the two that named each other", hd.to)
	}
	// 2 s with backoffs of 0.25, 0.5, 1 and 2 s: a handful of hand-offs.
	if got := served.Load(); got > 12 {
		t.Errorf("%d hand-offs in %v: asked again without backing off", got, n.cfg.UnsettledGiveUp)
	}
}
