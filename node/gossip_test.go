package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/rpc"
)

// meshTracer counts, from pubsub's own trace, the peers in one host's
// mesh for each topic (grafted minus pruned).
type meshTracer struct {
	mu     sync.Mutex
	mesh   map[string]map[peer.ID]bool
	pruned int
}

// size is the mesh's size for topic and how many prunes there were.
func (m *meshTracer) size(topic string) (mesh, pruned int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mesh[topic]), m.pruned
}

func (m *meshTracer) Graft(p peer.ID, topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mesh[topic] == nil {
		m.mesh[topic] = map[peer.ID]bool{}
	}
	m.mesh[topic][p] = true
}

func (m *meshTracer) Prune(p peer.ID, topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mesh[topic], p)
	m.pruned++
}

func (*meshTracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (*meshTracer) OnClosedOutboundStream(peer.ID)           {}
func (*meshTracer) AddPeer(peer.ID, string)                  {}
func (*meshTracer) RemovePeer(peer.ID)                       {}
func (*meshTracer) Join(string)                              {}
func (*meshTracer) Leave(string)                             {}
func (*meshTracer) ValidateMessage(*pubsub.Message)          {}
func (*meshTracer) DeliverMessage(*pubsub.Message)           {}
func (*meshTracer) RejectMessage(*pubsub.Message, string)    {}
func (*meshTracer) DuplicateMessage(*pubsub.Message)         {}
func (*meshTracer) ThrottlePeer(peer.ID)                     {}
func (*meshTracer) RecvRPC(*pubsub.RPC)                      {}
func (*meshTracer) SendRPC(*pubsub.RPC, peer.ID)             {}
func (*meshTracer) DropRPC(*pubsub.RPC, peer.ID)             {}
func (*meshTracer) UndeliverableMessage(*pubsub.Message)     {}

// gossipStar starts a real gossipsub host at the centre of leaves real
// leaf hosts, all with g's options, every one subscribed to topic; it
// returns the centre's mesh tracer and every host's subscription.
func gossipStar(t *testing.T, g node.GossipConfig, leaves int, topic string) (*meshTracer, []*pubsub.Topic, []*pubsub.Subscription) {
	t.Helper()
	opts, err := g.PubsubOptions()
	if err != nil {
		t.Fatalf("PubsubOptions(%+v): %v", g, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr := &meshTracer{mesh: map[string]map[peer.ID]bool{}}
	var hosts []host.Host
	var topics []*pubsub.Topic
	var subs []*pubsub.Subscription
	for i := 0; i <= leaves; i++ {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		hostOpts := opts
		if i == 0 {
			hostOpts = append([]pubsub.Option{pubsub.WithRawTracer(tr)}, opts...)
		}
		ps, err := pubsub.NewGossipSub(ctx, h, hostOpts...)
		if err != nil {
			t.Fatalf("gossipsub with %+v: %v", g, err)
		}
		tp, err := ps.Join(topic)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := tp.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		hosts, topics, subs = append(hosts, h), append(topics, tp), append(subs, sub)
	}
	for _, leaf := range hosts[1:] {
		if err := hosts[0].Connect(ctx, peer.AddrInfo{ID: leaf.ID(), Addrs: leaf.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	return tr, topics, subs
}

// The default gossip shape is the small mesh: a peer whose seven
// subscribed neighbours all graft it prunes its mesh back to between Dlo
// and Dhi of them (gossipsub's defaults keep all seven: Dhi is 12), and
// flood publish is on: what the centre publishes reaches every leaf at
// once, also the leaves outside its mesh. (Without flood publish those
// would get it only through IHAVE gossip to a few random peers for three
// heartbeats, which misses a given leaf now and then: a node that has
// just started and has no mesh yet would go unheard.)
func TestSmallMeshGossip(t *testing.T) {
	g := node.DefaultConfig().Gossip
	if g != node.SmallMeshGossip() {
		t.Fatalf("DefaultConfig().Gossip = %+v, want SmallMeshGossip %+v", g, node.SmallMeshGossip())
	}
	if !g.FloodPublish {
		t.Fatal("flood publish is off: a node that has just started (no mesh yet) would go unheard")
	}
	const topic = "small-mesh"
	tr, topics, subs := gossipStar(t, g, 7, topic)
	eventually(t, 20*time.Second, "the centre's mesh pruned to [Dlo, Dhi]", func() error {
		if n, pruned := tr.size(topic); pruned == 0 || n < g.Dlo || n > g.Dhi {
			return fmt.Errorf("%d mesh peers after %d prunes", n, pruned)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := topics[0].Publish(ctx, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	for i, sub := range subs {
		msg, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("host %d got nothing: %v", i, err)
		}
		if string(msg.Data) != "hello" {
			t.Fatalf("host %d got %q", i, msg.Data)
		}
	}
}

// Shapes gossipsub would refuse are refused before any host starts, and
// gossipsub's own defaults are still accepted (a node configured with
// them gets Dout 2, as gossipsub has it).
func TestGossipConfigShapes(t *testing.T) {
	for _, g := range []node.GossipConfig{
		node.SmallMeshGossip(),
		{D: 6, Dlo: 5, Dhi: 12, Dlazy: 6, Heartbeat: time.Second, FloodPublish: true},
		{D: 2, Dlo: 1, Dhi: 2, Dlazy: 0, Heartbeat: 5 * time.Second},
	} {
		opts, err := g.PubsubOptions()
		if err != nil {
			t.Errorf("PubsubOptions(%+v): %v", g, err)
			continue
		}
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pubsub.NewGossipSub(context.Background(), h, opts...); err != nil {
			t.Errorf("gossipsub refused %+v: %v", g, err)
		}
		h.Close()
	}
	for _, g := range []node.GossipConfig{
		{D: 3, Dlo: 4, Dhi: 5, Dlazy: 3, Heartbeat: time.Second},
		{D: 6, Dlo: 2, Dhi: 5, Dlazy: 3, Heartbeat: time.Second},
		{D: 3, Dlo: 2, Dhi: 5, Dlazy: 3},
		{D: 1, Dlo: 1, Dhi: 1, Dlazy: 3, Heartbeat: time.Second}, // Dout 0 is not below D/2
	} {
		if _, err := g.PubsubOptions(); err == nil {
			t.Errorf("PubsubOptions(%+v) accepted", g)
		}
	}
}

// TestNewcomerGreetedDirectly: a node that sees a newcomer (here a
// connection from a member its view lacks: a real libp2p host) sends it
// its presence announcement on a stream of its own, over that connection,
// instead of gossiping an announcement to the whole mesh — at the start of
// a 40-node mesh the gossiped ones overflow gossipsub's queues. A
// greeting the newcomer sends is taken into the node's view,
// and the node answers it with its own announcement and its view, so a
// newcomer learns the mesh from the peers it is connected to and no peer
// has to dial it: a second newcomer's greeting is
// answered with a view that holds the first.
func TestNewcomerGreetedDirectly(t *testing.T) {
	nf := startNode(t, echoServices)
	h := p2ptest.Host(t)
	got := make(chan map[string]any, 4)
	rpc.Serve(h, nil, api.ProtoPresenceHello, 64<<10, 10*time.Second, func(_ context.Context, from peer.ID, req []byte) []byte {
		var a map[string]any
		if err := json.Unmarshal(req, &a); err == nil && from.String() == nf.PeerID {
			got <- a
		}
		return []byte("ok")
	})
	connectHost(t, h, nf) // after the handler is served: the greeting may come at once
	select {
	case a := <-got:
		if a["id"] != nf.PeerID {
			t.Fatalf("greeted with %v, want the node's own announcement (id %s)", a, nf.PeerID)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the newcomer was never greeted")
	}
	// The other way: the newcomer greets the node, which takes the
	// announcement into its view and answers with its own.
	nodeID := mustDecode(t, nf.PeerID)
	first := greetNode(t, h, nodeID, "z9")
	if self, _ := first["self"].(map[string]any); self["id"] != nf.PeerID {
		t.Fatalf("the node answered the newcomer's greeting with %v; want its own announcement (id %s)", first, nf.PeerID)
	}
	second := p2ptest.Host(t)
	connectHost(t, second, nf)
	ans := greetNode(t, second, nodeID, "z8")
	view, _ := ans["view"].([]any)
	found := false
	for _, e := range view {
		r, _ := e.(map[string]any)
		if a, _ := r["ann"].(map[string]any); a["id"] == h.ID().String() && a["zone"] == "z9" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the answer to a second newcomer relays %v; want the first newcomer's announcement (zone z9) in it", view)
	}
}

// A mesh is learnt without every peer dialling every other: ten real
// nodes, each bootstrapped from the first and keeping TargetPeers 2, all
// come to see all ten, while they hold at most 2 × 10 connections (each
// node dials its bootstrap peer and, below TargetPeers, one more).
// Greeting every newcomer by dialling it would connect nearly every pair
// (45 here, 780 on 40 nodes).
func TestMeshLearntWithoutDiallingEveryone(t *testing.T) {
	const n, target = 10, 2
	nodes := startMesh(t, "greet", n, func(_ int, cfg *node.Config) string {
		cfg.TargetPeers = target
		return echoServices
	})
	ends := 0
	for i, nf := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cl, err := client.Dial(ctx, nf.Addrs[0])
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		peers, err := cl.Peers(ctx)
		cl.Close()
		cancel()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		for _, p := range peers {
			if p.Connected && !p.Self {
				ends++
			}
		}
	}
	if ends/2 > n*target {
		t.Fatalf("%d connections among %d nodes that keep %d peers each; want at most %d (the full mesh is %d)", ends/2, n, target, n*target, n*(n-1)/2)
	}
}

// greetNode sends the node id host h's announcement (zone zone) as a
// presence greeting and returns the decoded answer.
func greetNode(t *testing.T, h host.Host, id peer.ID, zone string) map[string]any {
	t.Helper()
	hello, err := json.Marshal(map[string]any{"id": h.ID().String(), "zone": zone, "seq": 1, "boot": 1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rpc.Call(context.Background(), h, id, api.ProtoPresenceHello, hello, 256<<10, 10*time.Second)
	if err != nil {
		t.Fatalf("greeting the node: %v", err)
	}
	var ans map[string]any
	if err := json.Unmarshal(rep, &ans); err != nil {
		t.Fatalf("the node answered a greeting %q: %v", rep, err)
	}
	return ans
}

func mustDecode(t *testing.T, id string) peer.ID {
	t.Helper()
	p, err := peer.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
