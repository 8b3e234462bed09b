package node

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// heldItem is work this peer holds and must keep its guardians informed of:
// an accepted pack, or the origin's first pack before its first hand-off.
type heldItem struct {
	key       string
	guardKey  string
	attempt   int
	guardians []pack.Peer
	cancel    context.CancelFunc
	recruited time.Time
	state     *heldState
}

// beatConn beats to one guardian on a long-lived stream.
type beatConn struct {
	id     peer.ID
	cancel context.CancelFunc
	mu     sync.Mutex
	lastOK time.Time
}

func (b *beatConn) ok() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastOK
}

// beatTargets is every peer this one must beat to: the guardians of what it
// holds and the replicas of the joins it is primary of.
func (n *Node) beatTargets() map[peer.ID]pack.Peer {
	out := map[peer.ID]pack.Peer{}
	n.mu.Lock()
	defer n.mu.Unlock()
	add := func(p pack.Peer) {
		if id, err := peer.Decode(p.ID); err == nil && id != n.host.ID() {
			out[id] = p
		}
	}
	for _, h := range n.held {
		for _, g := range h.guardians {
			add(g)
		}
	}
	for _, j := range n.joins {
		if !j.Replica && !j.Forwarded {
			for _, r := range j.Replicas {
				add(r)
			}
		}
	}
	return out
}

// beatLoop keeps one beat stream per target open and recruits a new
// guardian for held work whose guardians all stopped answering.
func (n *Node) beatLoop(ctx context.Context) {
	conns := map[peer.ID]*beatConn{}
	tick := time.NewTicker(n.cfg.Heartbeat.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, c := range conns {
				c.cancel()
			}
			return
		case <-tick.C:
		case <-n.beatsChanged:
		}
		targets := n.beatTargets()
		for id, c := range conns {
			if _, ok := targets[id]; !ok {
				c.cancel()
				delete(conns, id)
			}
		}
		for id, p := range targets {
			if _, ok := conns[id]; !ok {
				cctx, cancel := context.WithCancel(ctx)
				c := &beatConn{id: id, cancel: cancel, lastOK: time.Now()}
				conns[id] = c
				n.learnAddrs(id, p.Addrs)
				go n.beatTo(cctx, c)
			}
		}
		n.checkGuardians(conns)
	}
}

// beatTo writes one frame per interval to c's peer, reopening the stream
// after errors.
func (n *Node) beatTo(ctx context.Context, c *beatConn) {
	frame := []byte{1}
	var s network.Stream
	defer func() {
		if s != nil {
			_ = s.Reset()
		}
	}()
	tick := time.NewTicker(n.cfg.Heartbeat.Interval)
	defer tick.Stop()
	for {
		if s == nil {
			octx, cancel := context.WithTimeout(ctx, n.cfg.Heartbeat.Interval*4)
			st, err := n.host.NewStream(octx, c.id, protocol.ID(api.ProtoBeat))
			cancel()
			if err == nil {
				s = st
			}
		}
		if s != nil {
			_ = s.SetWriteDeadline(time.Now().Add(n.cfg.Heartbeat.Interval * 4))
			if err := pack.WriteFrame(s, frame); err != nil {
				_ = s.Reset()
				s = nil
			} else {
				c.mu.Lock()
				c.lastOK = time.Now()
				c.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// serveBeat feeds every frame on a beat stream to the failure detector.
func (n *Node) serveBeat(s network.Stream) {
	from := s.Conn().RemotePeer().String()
	defer s.Reset()
	for {
		_ = s.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := pack.ReadFrame(s, 16); err != nil {
			return
		}
		if !n.watcher.Beat(from) && n.takeFirstBeat(from) {
			n.startWatch(from)
		}
	}
}

// checkGuardians recruits a replacement guardian for held work none of
// whose guardians has taken a beat for GuardianLoss.
func (n *Node) checkGuardians(conns map[peer.ID]*beatConn) {
	now := time.Now()
	var orphans []*heldItem
	n.mu.Lock()
	for _, h := range n.held {
		if now.Sub(h.recruited) < n.cfg.GuardianLoss {
			continue
		}
		alive := false
		for _, g := range h.guardians {
			id, err := peer.Decode(g.ID)
			if err != nil {
				continue
			}
			if c, ok := conns[id]; ok && now.Sub(c.ok()) < n.cfg.GuardianLoss {
				alive = true
			}
		}
		if !alive {
			h.recruited = now
			orphans = append(orphans, h)
		}
	}
	n.mu.Unlock()
	for _, h := range orphans {
		n.spawn(func(ctx context.Context) { n.recruitGuardian(ctx, h) })
	}
}

// recruitGuardian asks a live peer in another zone to guard a held pack
// whose guardians are gone (the peer becomes its primary guardian).
func (n *Node) recruitGuardian(ctx context.Context, h *heldItem) {
	packRaw, _, err := n.journal.Get(journalPacks, h.key+packSuffix)
	if err != nil || packRaw == nil {
		return
	}
	exclude := map[peer.ID]bool{n.host.ID(): true}
	n.mu.Lock()
	for _, g := range h.guardians {
		if id, err := peer.Decode(g.ID); err == nil {
			exclude[id] = true
		}
	}
	n.mu.Unlock()
	g, ok := n.pickGuardian(exclude, n.cfg.Zone)
	if !ok {
		return
	}
	msg := api.GuardMsg{Op: api.GuardStore, Key: h.guardKey, Attempt: h.attempt, Pack: packRaw, Holder: n.self()}
	var rep api.GuardReply
	if err := rpc.CallCBOR(ctx, n.host, g, api.ProtoGuard, msg, &rep, n.cfg.StreamTimeout); err != nil || !rep.OK {
		return
	}
	n.log.Info("recruited a new guardian", "key", h.guardKey, "guardian", rpc.ShortID(g))
	n.addWatcher(h.guardKey, h.attempt, n.peerRef(g))
}

// addWatcher adds a guardian to held work; false if nothing is held under
// key at that attempt (already released).
func (n *Node) addWatcher(gkey string, attempt int, g pack.Peer) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.held {
		if h.guardKey == gkey && h.attempt == attempt {
			for _, x := range h.guardians {
				if x.ID == g.ID {
					return true
				}
			}
			h.guardians = append(h.guardians, g)
			n.persistGuardians(h)
			n.kickBeats()
			return true
		}
	}
	return false
}

func (n *Node) kickBeats() {
	select {
	case n.beatsChanged <- struct{}{}:
	default:
	}
}

// supersedeHeld stops held work under gkey older than attempt: a guardian
// re-routed it, so this copy is stale.
func (n *Node) supersedeHeld(gkey string, attempt int) {
	n.mu.Lock()
	var stale []*heldItem
	for _, h := range n.held {
		if h.guardKey == gkey && h.attempt < attempt {
			stale = append(stale, h)
		}
	}
	n.mu.Unlock()
	for _, h := range stale {
		n.log.Warn("held work superseded by a re-route", "key", h.key, "attempt", h.attempt, "newer", attempt)
		h.cancel()
		n.forgetHeld(h.key)
		_ = n.dropHeld(h.key)
	}
}

// releaseGuardians tells every guardian of h that the work moved on.
func (n *Node) releaseGuardians(ctx context.Context, h *heldItem) {
	n.mu.Lock()
	gs := append([]pack.Peer{}, h.guardians...)
	n.mu.Unlock()
	for _, g := range gs {
		id, err := peer.Decode(g.ID)
		if err != nil || id == n.host.ID() {
			continue
		}
		n.learnAddrs(id, g.Addrs)
		var rep api.GuardReply
		msg := api.GuardMsg{Op: api.GuardRelease, Key: h.guardKey, Attempt: h.attempt}
		for try := 0; try < 3; try++ {
			if err := rpc.CallCBOR(ctx, n.host, id, api.ProtoGuard, msg, &rep, 2*time.Second); err == nil {
				break
			}
		}
	}
}

// confirmAlive is asked by the failure detector before it declares a
// holder silent: beats can be late while the holder is only starved of CPU.
// A holder whose connection is gone (a killed process's socket is reset at
// once) is not confirmed, so true detections stay fast; otherwise a libp2p
// ping within the confirmation timeout spares a holder that is alive.
func (n *Node) confirmAlive(ctx context.Context, key string) bool {
	id, err := peer.Decode(key)
	if err != nil {
		return false
	}
	if n.host.Network().Connectedness(id) != network.Connected {
		return false
	}
	select {
	case res := <-ping.Ping(ctx, n.host, id):
		if res.Error == nil {
			n.log.Debug("late beats but the holder answers a ping; not suspecting it", "peer", rpc.ShortID(id), "rtt", res.RTT)
			return true
		}
		return false
	case <-ctx.Done():
		return false
	}
}
