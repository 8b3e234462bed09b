package node

import (
	"context"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
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
	h, err := libp2p.New(
		libp2p.Identity(key),
		libp2p.ListenAddrStrings(listen...),
		// The resource manager is on by default; keep its defaults.
	)
	if err != nil {
		return fmt.Errorf("node: start libp2p host on %v: %w", listen, err)
	}
	n.host = h
	ps, err := pubsub.NewGossipSub(ctx, h,
		pubsub.WithMessageSigning(true),
		pubsub.WithStrictSignatureVerification(true),
		pubsub.WithMaxMessageSize(1<<20),
	)
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
			if sw, ok := n.host.Network().(*swarm.Swarm); ok {
				sw.Backoff().Clear(ai.ID)
			}
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
		case <-time.After(wait):
		}
	}
}

// peerReturned is called when presence sees a peer (again): it clears the
// dial backoff libp2p keeps after failed dials, and wakes dispatchers.
func (n *Node) peerReturned(id peer.ID) {
	if sw, ok := n.host.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(id)
	}
	n.mu.Lock()
	close(n.returned)
	n.returned = make(chan struct{})
	n.mu.Unlock()
}

// maybeConnect dials a peer learnt from presence while this peer holds
// fewer than TargetPeers connections, so gossip does not hinge on one
// bootstrap peer.
func (n *Node) maybeConnect(id peer.ID) {
	if n.host.Network().Connectedness(id) == network.Connected {
		return
	}
	if len(n.host.Network().Peers()) >= n.cfg.TargetPeers {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		defer cancel()
		_ = n.host.Connect(ctx, peer.AddrInfo{ID: id})
	}()
}
