package node

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/heartbeat"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// beatConn beats to one guardian on a long-lived stream. The stream
// outlives the beating: when the peer stops being a target its beater
// stops but the stream is kept for beatLinger, and a peer that becomes a
// target again (the next step's guardian, on a small mesh usually a peer
// beaten to before) is beaten to on the same stream. Opening one was most
// of a stream a hop (1.3 beat streams per step on an 8-node testnet);
// an idle stream costs nothing but its place in the muxer.
type beatConn struct {
	id     peer.ID
	cancel context.CancelFunc
	mu     sync.Mutex
	lastOK time.Time
	// s is the stream, used by one beatTo run at a time: a run starts
	// only after the previous one closed done.
	s    network.Stream
	done chan struct{}
	// idleSince is when the peer stopped being a target (zero while it
	// is one).
	idleSince time.Time
}

// beatLinger is how long a beat stream is kept after its peer stopped
// being a target: shorter than serveBeat's read deadline (30 s), so the
// guardian does not reset a stream the holder may still use.
const beatLinger = 15 * time.Second

func (b *beatConn) ok() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastOK
}

// beatTargets is every peer this one must beat to: the guardians of what it
// holds and the replicas of the joins it is primary of.
func (n *Node) beatTargets() map[peer.ID]pack.Peer {
	out := map[peer.ID]pack.Peer{}
	add := func(p pack.Peer) {
		if id, err := peer.Decode(p.ID); err == nil && id != n.host.ID() {
			out[id] = p
		}
	}
	for _, s := range n.helds.all() {
		if m := s.view(); m.Beats() {
			for _, g := range m.Guardians() {
				add(g)
			}
		}
	}
	for _, c := range n.joins.all() {
		c.view(func(m *join.Join) {
			if m.Pending() {
				for _, r := range m.Others(n.selfID) {
					add(r)
				}
			}
		})
	}
	return out
}

// idleBeatCheck is how often beatLoop looks for work while the node holds
// nothing (every change also kicks it through beatsChanged).
const idleBeatCheck = 2 * time.Second

// beatLoop keeps one beat stream per target open and recruits a new
// guardian for held work whose guardians all stopped answering.
func (n *Node) beatLoop(ctx context.Context) {
	conns := map[peer.ID]*beatConn{}
	// lingering are conns whose peer is no longer a target, kept for
	// beatLinger with their stream (beatConn).
	lingering := map[peer.ID]*beatConn{}
	tick := n.clock.NewTicker(n.cfg.Heartbeat.Interval)
	defer tick.Stop()
	// Idle (nothing held, nothing to beat to) the loop waits for
	// beatsChanged, with a slow timer as a safety net, instead of waking
	// every beat interval.
	idle := n.clock.NewTimer(idleBeatCheck)
	defer idle.Stop()
	for {
		ticks := tick.Chan()
		if len(conns) == 0 && n.helds.len() == 0 {
			ticks = nil
			idle.Reset(idleBeatCheck)
		}
		select {
		case <-ctx.Done():
			for _, c := range conns {
				c.cancel()
				c.close()
			}
			for _, c := range lingering {
				c.close()
			}
			return
		case <-ticks:
		case <-idle.Chan():
		case <-n.beatsChanged:
		}
		targets := n.beatTargets()
		now := n.clock.Now()
		for id, c := range conns {
			if _, ok := targets[id]; !ok {
				c.cancel()
				c.idleSince = now
				lingering[id] = c
				delete(conns, id)
			}
		}
		for id, c := range lingering {
			if now.Sub(c.idleSince) > beatLinger {
				c.close()
				delete(lingering, id)
			}
		}
		for id, p := range targets {
			if _, ok := conns[id]; ok {
				continue
			}
			c, ok := lingering[id]
			if ok {
				delete(lingering, id)
			} else {
				c = &beatConn{id: id, done: closedChan}
				n.learnAddrs(id, p.Addrs)
			}
			conns[id] = c
			n.startBeating(ctx, c)
		}
		n.checkGuardians(conns)
	}
}

// closedChan is the done channel of a beatConn that never ran.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// startBeating starts a beatTo run on c once its previous run (if any)
// has let go of the stream.
func (n *Node) startBeating(ctx context.Context, c *beatConn) {
	cctx, cancel := context.WithCancel(ctx)
	prev, done := c.done, make(chan struct{})
	c.cancel, c.done, c.idleSince = cancel, done, time.Time{}
	c.mu.Lock()
	c.lastOK = n.clock.Now()
	c.mu.Unlock()
	go func() {
		defer close(done)
		<-prev
		n.beatTo(cctx, c)
	}()
}

// close resets the kept stream of a conn that is not beating, once its
// last run has ended.
func (c *beatConn) close() {
	done := c.done
	go func() {
		<-done
		if c.s != nil {
			_ = c.s.Reset()
			c.s = nil
		}
	}()
}

// beatTo beats to c's peer (heartbeat.Beater paces it: one frame per
// interval, never flooding a slow stream) on c's long-lived stream,
// reopened after errors; a failed beat is not an error, the next one
// tries again. It leaves the stream open when ctx ends (beatConn).
//
// Every frame lists the held work the peer guards and the work it guarded
// that was handed on lately (beatFrame, on api.ProtoBeatHeld; older peers
// get what they read): a guardian keeping a copy released by a successor
// lets go of it once its holder says it let go (node/guard G17). When the
// peer stops being a target, one last frame says so (most often: the
// work just handed on, let go).
func (n *Node) beatTo(ctx context.Context, c *beatConn) {
	interval := n.cfg.Heartbeat.Interval
	target := c.id.String()
	send := func() error { // c.s is used only here while the Beater runs
		if c.s == nil {
			octx, cancel := context.WithTimeout(ctx, interval*4)
			st, err := n.host.NewStream(octx, c.id, protocol.ID(api.ProtoBeatHeld), protocol.ID(api.ProtoBeatKeys), protocol.ID(api.ProtoBeat))
			cancel()
			if err != nil {
				return nil
			}
			c.s = st
		}
		_ = c.s.SetWriteDeadline(n.clock.Now().Add(interval * 4))
		if err := pack.WriteFrame(c.s, n.beatFrame(c.s, target)); err != nil {
			_ = c.s.Reset()
			c.s = nil
			return nil
		}
		c.mu.Lock()
		c.lastOK = n.clock.Now()
		c.mu.Unlock()
		return nil
	}
	b, err := heartbeat.StartBeater(ctx, n.clock, interval, send)
	if err != nil {
		n.log.Error("heartbeat", "peer", rpc.ShortID(c.id), "err", err)
		return
	}
	<-ctx.Done()
	b.Stop()
	if c.s != nil && n.ctx.Err() == nil {
		_ = c.s.SetWriteDeadline(n.clock.Now().Add(interval))
		if err := pack.WriteFrame(c.s, n.beatFrame(c.s, target)); err != nil {
			_ = c.s.Reset()
			c.s = nil
		}
	}
}

// serveBeat feeds every frame on a beat stream to the failure detector.
func (n *Node) serveBeat(s network.Stream) {
	remote := s.Conn().RemotePeer()
	from := remote.String()
	defer s.Reset()
	for {
		_ = s.SetReadDeadline(n.clock.Now().Add(30 * time.Second))
		frame, err := pack.ReadFrame(s, maxBeatFrame)
		if err != nil {
			return
		}
		if !n.watcher.Beat(from) && n.takeFirstBeat(from) {
			n.startWatch(from)
		}
		n.holderListed(remote, from, frame)
	}
}

// checkGuardians recruits a replacement guardian for held work none of
// whose guardians has taken a beat for GuardianLoss (when the machine
// allows it: not once the settle list is taken, H3).
func (n *Node) checkGuardians(conns map[peer.ID]*beatConn) {
	now := n.clock.Now()
	for _, s := range n.helds.all() {
		m := s.view()
		if !m.MayRecruit() || now.Sub(s.recruitedAt()) < n.cfg.GuardianLoss {
			continue
		}
		alive := false
		for _, g := range m.Guardians() {
			id, err := peer.Decode(g.ID)
			if err != nil {
				continue
			}
			if c, ok := conns[id]; ok && now.Sub(c.ok()) < n.cfg.GuardianLoss {
				alive = true
			}
		}
		if alive {
			continue
		}
		s.rt.Lock()
		s.recruited = now
		s.rt.Unlock()
		rd, err := n.stepHeld(s, held.GuardiansLost{})
		if err == nil && rd.Recruit {
			n.spawn(func(ctx context.Context) { n.recruitGuardian(ctx, s, rd.Exclude) })
		}
	}
}

// recruitGuardian asks a live peer in another zone to guard a held pack
// whose guardians are gone (the peer becomes its primary guardian).
func (n *Node) recruitGuardian(ctx context.Context, s *heldSlot, gone []pack.Peer) {
	rec := s.view().Record()
	packRaw, _, err := n.journal.Get(journal.BucketPackBytes, rec.Key)
	if err != nil || packRaw == nil {
		return
	}
	exclude := map[peer.ID]bool{n.host.ID(): true}
	for _, g := range gone {
		if id, err := peer.Decode(g.ID); err == nil {
			exclude[id] = true
		}
	}
	g, ok := n.pickGuardian(exclude, n.cfg.Zone)
	if !ok {
		return
	}
	ref := n.peerRef(g)
	msg := api.GuardStore{Key: rec.GuardKey, Attempt: rec.Attempt(), Pack: packRaw, Holder: n.self()}
	if rep := n.guardCall(ctx, ref, msg, n.cfg.StreamTimeout); !rep.OK {
		return
	}
	if r := n.offerWatcher(rec.GuardKey, rec.Attempt(), ref); !r.OK || r.Released {
		// Moved on meanwhile: the new guardian has nothing to watch.
		n.guardCall(ctx, ref, api.GuardRelease{Key: rec.GuardKey, Attempt: rec.Attempt()}, n.cfg.StreamTimeout)
		return
	}
	n.log.Info("recruited a new guardian", "key", rec.GuardKey, "guardian", rpc.ShortID(g))
}

func (n *Node) kickBeats() {
	select {
	case n.beatsChanged <- struct{}{}:
	default:
	}
}

// confirmAlive is asked by the failure detector before it declares a
// holder silent (see "Confirming a late subject" in the heartbeat package
// doc). In order:
//
//   - A holder whose connection is gone is not confirmed: a killed process's
//     socket is reset by its kernel at once, so a true detection is not
//     delayed by the confirmation.
//   - A connected holder must answer a libp2p ping before the confirmation
//     times out (Heartbeat.ConfirmTimeout: 2 s on the testnet and on a
//     mesh). Connected but silent is what a holder starved of CPU looks
//     like on a busy machine, so it gets a long chance; a hung or
//     powered-off board (no reset) is still reported after
//     SuspectAfter + ConfirmTimeout.
//   - A holder that does not answer is not accused if nothing needs it
//     watched any more (nothing guarded is held by it and no join replica
//     waits on it: a release raced the watch): the watch is dropped, since
//     an accusation would only make peer choice avoid a live peer.
//
// Nothing here takes n.mu before the ping: on a busy peer the lock can be
// held across journal fsyncs for longer than the whole budget.
//
// A holder that answers but does not beat may have moved on with its
// release to this peer lost (or added this peer as a watcher after it had
// started releasing): afterSpared follows that up in the background.
func (n *Node) confirmAlive(ctx context.Context, key string) bool {
	id, err := peer.Decode(key)
	if err != nil {
		return false
	}
	if n.host.Network().Connectedness(id) != network.Connected {
		n.log.Info("holder not confirmed", "peer", rpc.ShortID(id), "reason", "not connected")
		n.ev.Emit(events.Event{Type: events.ConfirmFailed, Peer: key, Reason: "not connected"})
		return false
	}
	start := n.clock.Now()
	reason, detail := "ping timeout", ""
	rtt, err := rpc.Ping(ctx, n.host, id)
	switch {
	case err == nil:
		n.log.Info("late beats but the holder answers a ping", "peer", rpc.ShortID(id), "rtt", rtt.Round(time.Millisecond))
		n.ev.Emit(events.Event{Type: events.Spared, Peer: key})
		n.spawn(func(ctx context.Context) { n.afterSpared(ctx, id) })
		return true
	case ctx.Err() == nil:
		reason, detail = "ping failed", err.Error()
	}
	took := n.clock.Since(start).Round(time.Millisecond)
	if n.dropStaleWatch(key) {
		n.log.Info("dropped a stale watch", "peer", rpc.ShortID(id), "after", reason)
		return false
	}
	n.ev.Emit(events.Event{Type: events.ConfirmFailed, Peer: key, Reason: reason})
	if detail != "" {
		n.log.Info("holder not confirmed", "peer", rpc.ShortID(id), "reason", reason, "err", detail, "after", took)
	} else {
		n.log.Info("holder not confirmed", "peer", rpc.ShortID(id), "reason", reason, "after", took)
	}
	return false
}

// watchNeededLocked reports whether this peer has a reason to watch
// holder: a guard copy of work it holds, or a join replica whose primary it
// is (the conditions unwatchIfIdle keeps a watch for). n.mu must be held.
func (n *Node) watchNeededLocked(holder string) bool {
	return len(n.guards.holding(holder)) > 0 || len(n.joinsWatching(holder)) > 0
}

// joinsWatching returns the passive join copies whose actor is holder.
func (n *Node) joinsWatching(holder string) []*joinCopy {
	var out []*joinCopy
	for _, c := range n.joins.all() {
		c.view(func(m *join.Join) {
			if a, ok := m.Watching(); ok && a.ID == holder {
				out = append(out, c)
			}
		})
	}
	return out
}

// dropStaleWatch unwatches holder if nothing needs it watched, and reports
// whether it did. The check and the unwatch happen under n.mu, so a guard
// copy added meanwhile (which calls watchHolder after adding itself) is
// never left unwatched.
func (n *Node) dropStaleWatch(holder string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.watchNeededLocked(holder) {
		return false
	}
	delete(n.firstBeat, holder)
	n.watcher.Unwatch(holder)
	return true
}

// reconcileEvery is how often a guardian may ask one live holder that does
// not beat to it what it still holds.
const reconcileEvery = 10 * time.Second

// reconcileLast remembers, per node and holder, when reconcileHolder last
// started, so a holder that is only slow is not asked at every late beat.
var reconcileLast sync.Map // reconcileKey -> time.Time

type reconcileKey struct {
	n      *Node
	holder peer.ID
}

// reconcileDue reports whether holder may be reconciled now, and if so
// records that it is.
func (n *Node) reconcileDue(holder peer.ID) bool {
	k := reconcileKey{n, holder}
	now := n.clock.Now()
	for {
		last, loaded := reconcileLast.LoadOrStore(k, now)
		if !loaded {
			return true
		}
		if now.Sub(last.(time.Time)) < reconcileEvery {
			return false
		}
		if reconcileLast.CompareAndSwap(k, last, now) {
			return true
		}
	}
}

// afterSpared follows up on a holder that answered a ping although its
// beats were late: a watch nobody needs is dropped at once, and the holder
// is asked what it still holds (at most every reconcileEvery).
func (n *Node) afterSpared(ctx context.Context, holder peer.ID) {
	if n.dropStaleWatch(holder.String()) {
		n.log.Info("dropped a stale watch", "peer", rpc.ShortID(holder), "after", "it answered a ping")
		return
	}
	if n.reconcileDue(holder) {
		n.reconcileHolder(ctx, holder)
	}
}

// reconcileHolder asks a live holder about every guard copy this peer keeps
// of its work, with the holder-side add-watcher operation: work it still
// holds at that attempt gets this peer (back) among its watchers, so its
// beats resume; work it no longer holds has moved on and the release to
// this peer was lost, so the copy is dropped (as a release would have).
// A holder restarted since is resuming from its journal and would answer
// the same way only after this peer's connection to it had been reset and
// the holder suspected, so a live answer here is about the same process.
func (n *Node) reconcileHolder(ctx context.Context, holder peer.ID) {
	type copyRef struct {
		key     string
		attempt int
	}
	var copies []copyRef
	hid := holder.String()
	// A copy younger than FirstBeatTimeout may be of work the holder has
	// acked but not registered yet; it is asked about next time.
	settled := n.clock.Now().Add(-n.cfg.FirstBeatTimeout)
	for _, g := range n.guards.holding(hid) {
		if c := g.Watched(); c.Since.Before(settled) {
			copies = append(copies, copyRef{c.Key, c.Attempt})
		}
	}
	if len(copies) == 0 {
		return
	}
	self := n.self()
	kept := 0
	var dropped []string
	for _, c := range copies {
		var rep api.GuardReply
		msg := api.HeldAddWatcher{Key: c.key, Attempt: c.attempt, Watcher: self}
		if err := n.calls.CallCBOR(ctx, holder, msg.Protocol(), msg, &rep, n.cfg.StreamTimeout); err != nil || !rep.OK {
			n.log.Debug("reconcile with holder", "peer", rpc.ShortID(holder), "key", c.key, "err", err, "reply", rep.Error)
			return
		}
		if rep.NeverTook {
			// G10: nobody took the step there; the machine decides.
			n.log.Info("the holder never took this step (it refused it as unsettled)", "peer", rpc.ShortID(holder), "key", c.key, "attempt", c.attempt)
			rd, err := n.stepGuard(c.key, guard.NeverTook{Holder: hid, Attempt: c.attempt, At: n.clock.Now().UTC(),
				Why: "holder " + rpc.ShortID(holder) + " never took it (refused the hand-over as unsettled)"})
			if err != nil {
				n.log.Error("step guard", "event", "NeverTook", "key", c.key, "err", err)
			}
			if rd.Dropped {
				dropped = append(dropped, c.key)
			} else {
				kept++
			}
			continue
		}
		if !rep.Released {
			kept++
			continue
		}
		if n.dropGuardIf(c.key, hid, c.attempt) {
			dropped = append(dropped, c.key)
		}
	}
	if len(dropped) > 0 {
		n.log.Info("dropped guard copies of work the holder had moved on from", "peer", rpc.ShortID(holder),
			"dropped", len(dropped), "kept", kept, "keys", dropped)
	}
}

// dropGuardIf drops the guard copy under key if it still names holder at
// attempt, as a release at that attempt would, and reports whether it did.
func (n *Node) dropGuardIf(key, holder string, attempt int) bool {
	rd, err := n.stepGuard(key, guard.MovedOn{Holder: holder, Attempt: attempt, At: n.clock.Now().UTC()})
	if err != nil {
		n.log.Error("drop guard copy", "key", key, "err", err)
		return false
	}
	return rd.Dropped
}
