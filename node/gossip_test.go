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
// its presence announcement on a stream of its own, instead of gossiping
// an announcement to the whole mesh — at the start of a 40-node mesh the
// gossiped ones overflowed gossipsub's queues (fifteenth session). The
// newcomer gets the node's announcement, signed by the stream's peer; and
// a greeting the newcomer sends is taken into the node's view (the node,
// seeing a newcomer, greets it back).
func TestNewcomerGreetedDirectly(t *testing.T) {
	nf := startNode(t, echoServices)
	h := p2ptest.Host(t)
	got := make(chan map[string]any, 4)
	rpc.Serve(h, api.ProtoPresenceHello, 64<<10, 10*time.Second, func(_ context.Context, from peer.ID, req []byte) []byte {
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
	// announcement into its view as a newcomer's and so greets it again.
	hello, err := json.Marshal(map[string]any{"id": h.ID().String(), "zone": "z9", "seq": 1, "boot": 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := rpc.Call(context.Background(), h, mustDecode(t, nf.PeerID), api.ProtoPresenceHello, hello, 16, 10*time.Second); err != nil || string(rep) != "ok" {
		t.Fatalf("the node answered the newcomer's greeting %q, %v; want ok", rep, err)
	}
	select {
	case <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the node did not take the newcomer's greeting into its view (no greeting back)")
	}
}

func mustDecode(t *testing.T, id string) peer.ID {
	t.Helper()
	p, err := peer.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
