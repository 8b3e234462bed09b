package node

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-libp2p/x/rate"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/member"
	"github.com/bedwe/bedwe/node/rpc"
)

func (n *Node) startHost(ctx context.Context) error {
	key, err := loadIdentity(n.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	listen := n.cfg.Listen
	if len(listen) == 0 {
		listen = []string{"/ip4/0.0.0.0/tcp/0"}
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return fmt.Errorf("node: identity: %w", err)
	}
	if err := checkListen(listen); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	memberOpts, err := n.startMembership(self, listen)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	raw, err := libp2p.New(append(append([]libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrStrings(listen...),
	}, n.transportOptions()...), memberOpts...)...)
	if err != nil {
		return fmt.Errorf("node: start libp2p host on %v: %w", listen, err)
	}
	// Every protocol handler, pubsub's included, is registered through the
	// gated host: non-members may speak only the client protocol.
	h := &gatedHost{Host: raw, n: n}
	n.host = h
	n.selfID = raw.ID().String()
	// Requests between members share one stream per pair of peers (the
	// session is opened through the gated host, so only members have
	// one); each request is admitted as a stream of its own would be.
	n.calls = rpc.NewMux(h, n.clock, muxLinger, n.admitRequest)
	gossip, err := n.cfg.Gossip.PubsubOptions()
	if err != nil {
		h.Close()
		return fmt.Errorf("node: %w", err)
	}
	ps, err := pubsub.NewGossipSub(ctx, h, append([]pubsub.Option{
		pubsub.WithMessageSigning(true),
		pubsub.WithStrictSignatureVerification(true),
		pubsub.WithMaxMessageSize(1 << 20),
		pubsub.WithValidateQueueSize(presenceQueue),
		pubsub.WithPeerOutboundQueueSize(presenceQueue),
	}, gossip...)...)
	if err != nil {
		h.Close()
		return fmt.Errorf("node: start pubsub: %w", err)
	}
	n.ps = ps
	if n.cfg.MDNS {
		svc := mdns.NewMdnsService(h, "bedwe-"+n.cfg.Network, mdnsNotifee{n})
		if err := svc.Start(); err != nil {
			n.log.Warn("mDNS discovery unavailable", "err", err)
		}
	}
	return nil
}

type mdnsNotifee struct{ n *Node }

// HandlePeerFound connects to a peer found on the local network.
func (m mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	if ai.ID == m.n.host.ID() {
		return
	}
	ctx, cancel := context.WithTimeout(m.n.ctx, 5*time.Second)
	defer cancel()
	_ = m.n.host.Connect(ctx, ai)
}

// bootstrapLoop keeps this peer connected to its bootstrap peers: a board
// whose neighbours were dark keeps trying until they return.
func (n *Node) bootstrapLoop(ctx context.Context) {
	var infos []peer.AddrInfo
	for _, s := range n.cfg.Bootstrap {
		ai, err := peer.AddrInfoFromString(s)
		if err != nil {
			n.log.Warn("ignoring bad bootstrap address", "addr", s, "err", err)
			continue
		}
		if ai.ID != n.host.ID() {
			infos = append(infos, *ai)
		}
	}
	if len(infos) == 0 {
		return
	}
	wait := 200 * time.Millisecond
	for {
		connected := 0
		for _, ai := range infos {
			if n.host.Network().Connectedness(ai.ID) == network.Connected {
				connected++
				continue
			}
			n.clearDialBackoff(ai.ID)
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := n.host.Connect(cctx, ai); err == nil {
				connected++
			}
			cancel()
		}
		if connected == len(infos) {
			wait = 5 * time.Second
		} else if wait < 5*time.Second {
			wait *= 2
		}
		select {
		case <-ctx.Done():
			return
		case <-n.clock.After(wait):
		}
	}
}

// transportOptions are the transports the host speaks: TCP, and QUIC when
// the mesh is not private (a swarm key needs TCP). Not go-libp2p's default
// set: bedwe does not use WebSocket, WebTransport or WebRTC, and each costs
// every node listeners, goroutines and wake-ups at idle (docs/benchmarks.md).
// The circuit relay stays: a host built with libp2p.DisableRelay takes a
// 40-node testnet 62 s instead of 8 s to see every peer (same document).
func (n *Node) transportOptions() []libp2p.Option {
	opts := []libp2p.Option{libp2p.Transport(tcp.NewTCPTransport)}
	if n.cfg.SwarmKeyFile == "" {
		opts = append(opts, libp2p.Transport(quic.NewTransport))
	}
	return opts
}

// clearDialBackoff forgets the dial backoff libp2p keeps for id after
// failed dials, so the next call dials at once.
func (n *Node) clearDialBackoff(id peer.ID) {
	if sw, ok := n.host.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(id)
	}
}

// redial drops id's connections and its dial backoff: the next call
// dials anew instead of waiting on a connection a partition left mute (no
// reset comes through a cut), and is not failed at once by dials that
// failed during the cut.
func (n *Node) redial(id peer.ID) {
	if n.host.Network().Connectedness(id) == network.Connected {
		_ = n.host.Network().ClosePeer(id)
	}
	n.clearDialBackoff(id)
}

// peerReturned is called when presence sees a peer (again): it clears the
// dial backoff libp2p keeps after failed dials, and wakes dispatchers.
func (n *Node) peerReturned(id peer.ID) {
	n.clearDialBackoff(id)
	n.mu.Lock()
	close(n.returned)
	n.returned = make(chan struct{})
	n.mu.Unlock()
}

// maybeConnect dials a peer learnt from presence while this peer holds
// fewer than TargetPeers connections, so gossip does not hinge on one
// bootstrap peer.
//
// Dials in flight count: at start presence names nearly every peer before
// the first dial finishes, and without the count a node dials most of them
// (~22 connections a node at 40 nodes, each costing idle CPU). The sparser
// mesh this leaves is not what slows a start: a start-up storm of
// announcements overflowing gossipsub's 32-message queues is, which is why
// newcomers are greeted directly (presence.greet) and the queues are
// presenceQueue deep (docs/benchmarks.md). A greeting goes only over an
// open connection, so this and the bootstrap peers are what a node dials
// before it has work to hand on.
func (n *Node) maybeConnect(id peer.ID) {
	if n.host.Network().Connectedness(id) == network.Connected {
		return
	}
	// Dials in flight count as connections: at start presence names
	// nearly every peer before the first dial finishes, and without them
	// a node would dial them all.
	if len(n.host.Network().Peers())+int(n.dialing.Load()) >= n.cfg.TargetPeers {
		return
	}
	n.dialing.Add(1)
	n.spawn(func(ctx context.Context) {
		defer n.dialing.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = n.host.Connect(ctx, peer.AddrInfo{ID: id})
	})
}

// startMembership sets up what decides who belongs to the mesh (package
// node/member): the swarm key, the client key of the node's own CLI, the
// connection gater, the per-protocol resource limits and the per-peer rate
// limits. It returns the libp2p options that enforce them.
func (n *Node) startMembership(self peer.ID, listen []string) ([]libp2p.Option, error) {
	var opts []libp2p.Option
	if n.cfg.SwarmKeyFile != "" {
		for _, a := range listen {
			if isUDP(a) {
				return nil, fmt.Errorf("--listen %s: QUIC cannot be used with a private network (--swarm-key); listen on TCP instead, e.g. /ip4/0.0.0.0/tcp/4001", a)
			}
		}
		psk, err := member.ReadSwarmKey(n.cfg.SwarmKeyFile)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(n.cfg.SwarmKeyFile)
		if err != nil {
			return nil, fmt.Errorf("swarm key: %w", err)
		}
		n.swarmKey = abs
		opts = append(opts, libp2p.PrivateNetwork(psk))
	}
	clientKey := n.cfg.ClientKeyFile
	if clientKey == "" {
		clientKey = filepath.Join(n.cfg.DataDir, "client.key")
	}
	ck, err := member.LoadOrCreateKey(clientKey)
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	if n.clientID, err = member.KeyID(ck); err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	if n.clientKey, err = filepath.Abs(clientKey); err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	gate, err := member.NewGate(member.Policy{
		Self:             self,
		TrustedPeersFile: n.cfg.TrustedPeersFile,
		ClientsFile:      n.cfg.ClientsFile,
		Clients:          []peer.ID{n.clientID},
		Logger:           n.log,
	})
	if err != nil {
		return nil, err
	}
	n.gate = gate
	n.handoffRate = member.NewLimiter(n.cfg.Limits.Handoffs, nil)
	n.submitRate = member.NewLimiter(n.cfg.Limits.Submits, nil)
	rm, err := resourceManager(n.cfg.HTTP != "")
	if err != nil {
		return nil, err
	}
	return append(opts, libp2p.ConnectionGater(gate), libp2p.ResourceManager(rm)), nil
}

// checkListen refuses a listen address on a transport the host does not
// speak (see transportOptions) with a message naming the ones it does,
// instead of go-libp2p's "no transport for protocol".
func checkListen(listen []string) error {
	for _, a := range listen {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return fmt.Errorf("--listen %s: %w", a, err)
		}
		var names []string
		for _, p := range m {
			names = append(names, p.Protocol().Name)
		}
		if len(names) == 2 && names[1] == "tcp" || len(names) == 3 && names[1] == "udp" && names[2] == "quic-v1" {
			continue
		}
		return fmt.Errorf("--listen %s: bedwe listens on TCP (/ip4/0.0.0.0/tcp/4001) or QUIC (/ip4/0.0.0.0/udp/4001/quic-v1) only", a)
	}
	return nil
}

// isUDP reports whether a listen address is a UDP transport (QUIC,
// WebTransport, WebRTC), none of which can run a private network.
func isUDP(addr string) bool {
	return strings.Contains(addr, "/udp/") || strings.Contains(addr, "/quic")
}

// resourceManager is libp2p's default resource manager with tighter
// per-peer stream limits on the protocols an abusive peer would flood:
// client requests (a client has no business holding many streams open),
// hand-offs (each holds a pack in memory until it is journaled) and
// request sessions (rpc.Mux: each carries many requests). Its
// metrics (libp2p_rcmgr_*, a trace of every scope change: 3.5 % of a
// node's CPU while it hands steps on) are kept only when they
// are served (--http).
func resourceManager(metrics bool) (network.ResourceManager, error) {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	limits.AddProtocolPeerLimit(protocol.ID(api.ProtoClient),
		rcmgr.BaseLimit{StreamsInbound: 16, StreamsOutbound: 16, Streams: 32, Memory: 32 << 20}, rcmgr.BaseLimitIncrease{})
	limits.AddProtocolPeerLimit(protocol.ID(api.ProtoHandoff),
		rcmgr.BaseLimit{StreamsInbound: 64, StreamsOutbound: 128, Streams: 192, Memory: 64 << 20}, rcmgr.BaseLimitIncrease{})
	// A peer needs one request session each way; a few more cover the
	// ones being retired. Each serves at most 64 requests at once.
	limits.AddProtocolPeerLimit(protocol.ID(rpc.ProtoMux),
		rcmgr.BaseLimit{StreamsInbound: 8, StreamsOutbound: 8, Streams: 16, Memory: 64 << 20}, rcmgr.BaseLimitIncrease{})
	opts := []rcmgr.Option{rcmgr.WithConnRateLimiters(connRateLimiter())}
	if !metrics {
		opts = append(opts, rcmgr.WithMetricsDisabled())
	}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()), opts...)
	if err != nil {
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	return rm, nil
}

// Connections a node accepts from one address (an IPv4 address, an IPv6
// /56): a burst of connRateBurst, then connRatePerSecond. libp2p's default
// (a burst of 16, then one every 5 s, loopback exempt) refused a client
// after its 16th call: every `bedwe status`, `result` or `submit` opens a
// connection of its own, and a user polling a result from a laptop (or a
// testnet's host link) would be refused for minutes ("failed to negotiate
// security protocol"). The limit still bounds a
// flood of handshakes from one address; membership (the swarm key and the
// gate) decides who may stay.
const (
	connRatePerSecond = 10
	connRateBurst     = 100
)

// connRateLimiter is the resource manager's limit on new connections per
// source address (connRatePerSecond, connRateBurst); loopback is not
// limited, as in libp2p's default.
func connRateLimiter() *rate.Limiter {
	per := rate.Limit{RPS: connRatePerSecond, Burst: connRateBurst}
	return &rate.Limiter{
		NetworkPrefixLimits: []rate.PrefixLimit{
			{Prefix: netip.MustParsePrefix("127.0.0.0/8")},
			{Prefix: netip.MustParsePrefix("::1/128")},
		},
		SubnetRateLimiter: rate.SubnetLimiter{
			IPv4SubnetLimits: []rate.SubnetLimit{{PrefixLength: 32, Limit: per}},
			IPv6SubnetLimits: []rate.SubnetLimit{
				{PrefixLength: 56, Limit: per},
				{PrefixLength: 48, Limit: rate.Limit{RPS: 5 * connRatePerSecond, Burst: 5 * connRateBurst}},
			},
			GracePeriod: time.Minute,
		},
	}
}

// gatedHost is the node's libp2p host with every stream handler wrapped by
// gateStream.
type gatedHost struct {
	host.Host
	n *Node
}

// SetStreamHandler registers handler behind the membership check.
func (h *gatedHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, h.n.gateStream(pid, handler))
}

// SetStreamHandlerMatch registers handler behind the membership check.
func (h *gatedHost) SetStreamHandlerMatch(pid protocol.ID, m func(protocol.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, m, h.n.gateStream(pid, handler))
}

// gateStream lets only members open streams of the mesh's own protocols
// (authorized clients reach the client protocol, which checks them per
// request), and applies the per-peer hand-off rate limit.
func (n *Node) gateStream(pid protocol.ID, handler network.StreamHandler) network.StreamHandler {
	client := pid == protocol.ID(api.ProtoClient)
	handoff := pid == protocol.ID(api.ProtoHandoff)
	var served prometheus.Counter
	if n.metrics != nil {
		served = n.metrics.streamsServed.WithLabelValues(string(pid))
	}
	return func(s network.Stream) {
		if served != nil {
			served.Inc()
		}
		from := s.Conn().RemotePeer()
		if !client && !n.gate.IsMember(from) {
			n.gate.Refuse(from, s.Conn().RemoteMultiaddr().String(), "not a member: may not use "+string(pid))
			_ = s.Reset()
			return
		}
		if handoff && !n.handoffRate.Allow(from) {
			n.log.Warn("hand-off refused: the peer exceeds its rate limit", "peer", rpc.ShortID(from),
				"per_second", n.cfg.Limits.Handoffs.PerSecond, "burst", n.cfg.Limits.Handoffs.Burst)
			_ = s.Reset()
			return
		}
		handler(s)
	}
}

// muxLinger is how long a request session with a peer is kept after its
// last request (as beat streams are, beatLinger).
const muxLinger = 15 * time.Second

// admitRequest is gateStream for a request a member sent on a session
// (rpc.Mux): counted by protocol, refused if the sender is no longer a
// member (the session passed the check when it opened, and a peer
// removed from the trusted peers but kept as a client keeps its
// connection), if it is a client request (clients open streams of their
// own), or if it is a hand-off over the sender's rate limit.
func (n *Node) admitRequest(proto string, from peer.ID) bool {
	if n.metrics != nil {
		n.metrics.muxRequests.WithLabelValues(proto).Inc()
	}
	if !n.gate.IsMember(from) {
		n.gate.Refuse(from, "", "not a member: may not use "+proto)
		return false
	}
	switch proto {
	case api.ProtoClient:
		return false
	case api.ProtoHandoff:
		if !n.handoffRate.Allow(from) {
			n.log.Warn("hand-off refused: the peer exceeds its rate limit", "peer", rpc.ShortID(from),
				"per_second", n.cfg.Limits.Handoffs.PerSecond, "burst", n.cfg.Limits.Handoffs.Burst)
			return false
		}
	}
	return true
}

// authorizeClient says whether from may make a client request op: members
// and authorized clients may, within the submission rate limit.
func (n *Node) authorizeClient(from peer.ID, op string) error {
	if !n.gate.IsClient(from) {
		n.gate.Refuse(from, "", "client not authorized")
		return fmt.Errorf("client %s is not authorized: add it to --clients on the node (peer %s serves only its members, its own CLI and listed clients)", from, rpc.ShortID(n.host.ID()))
	}
	if op == api.OpSubmit && !n.submitRate.Allow(from) {
		l := n.cfg.Limits.Submits
		// Refused as busy (capacity.go): nothing recorded, retry later.
		return fmt.Errorf("%w: client %s submits faster than peer %s allows (%g a second, bursts of %d): try again later", errBusy, from, rpc.ShortID(n.host.ID()), l.PerSecond, l.Burst)
	}
	return nil
}

// memberLoop re-reads the membership files when they change and closes
// the connections of peers no longer admitted.
func (n *Node) memberLoop(ctx context.Context) {
	tick := n.clock.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
		if !n.gate.Refresh() {
			continue
		}
		n.log.Info("membership lists changed")
		for _, id := range n.host.Network().Peers() {
			if !n.gate.Admits(id) {
				n.gate.Refuse(id, "", "removed from --trusted-peers")
				_ = n.host.Network().ClosePeer(id)
			}
		}
	}
}

// members describes the membership mode for node.json.
func (n *Node) members() string {
	if n.gate.Closed() {
		return "trusted peers"
	}
	return "open"
}
