package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Drain, in one paragraph: when the timetable says this node's zone goes
// dark within the outage view's DrainMargin (or is dark now, and the board
// runs on a battery), the node drains. It announces itself as draining, so
// peer choice everywhere passes it over, and refuses new packs. It hands
// every join it is the acting primary of to a replica whose zone stays
// powered (the replica is already among the holders every branch end
// tries, so nothing in flight needs to learn a new address), and asks the
// guardian of every step it holds that would not finish before the cut to
// re-route it now (the guardian's ordinary re-route with attempt+1, so
// fencing is unchanged). Steps that finish in time run to the end and are
// forwarded to powered peers as usual. When power is back (Drain turns
// false) the node announces it and accepts work again. With heartbeat
// routing, or without a timetable, the node never drains.

// kickDrain asks the drain loop to look at the timetable now.
func (n *Node) kickDrain() {
	select {
	case n.drainKick <- struct{}{}:
	default:
	}
}

// drainPoll is how often the drain loop reads the timetable: a quarter of
// the drain margin in real time, between 100 ms and 5 s.
func (n *Node) drainPoll() time.Duration {
	d := n.tt.clock.Real(n.tt.view.Config().DrainMargin) / 4
	return min(max(d, 100*time.Millisecond), 5*time.Second)
}

// drainLoop starts and ends drains as the timetable says.
func (n *Node) drainLoop(ctx context.Context) {
	tick := n.clock.NewTicker(n.drainPoll())
	defer tick.Stop()
	for {
		n.checkDrain()
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		case <-n.drainKick:
		}
	}
}

// checkDrain starts or ends a drain when the timetable's answer changed.
func (n *Node) checkDrain() {
	drain, cutAt := false, time.Time{}
	if n.cfg.Routing == RoutingTimetable {
		drain, cutAt = n.tt.view.Drain(n.cfg.Zone)
	}
	if n.draining.Load() == drain {
		return
	}
	n.draining.Store(drain)
	n.pres.poke()
	n.touchActivity()
	if !drain {
		n.log.Info("power is back by the timetable; accepting work again", "zone", n.cfg.Zone)
		return
	}
	realCut := n.tt.clock.RealAt(cutAt)
	n.log.Warn("draining before a power cut", "zone", n.cfg.Zone,
		"cut_at", cutAt.Format(time.RFC3339), "in", n.clock.Until(realCut).Round(time.Millisecond))
	n.spawn(func(ctx context.Context) { n.drain(ctx, cutAt) })
}

// drain hands off what this node holds before the cut at cutAt (timetable
// time).
func (n *Node) drain(ctx context.Context, cutAt time.Time) {
	n.handOverJoins(ctx)
	n.handBackSteps(ctx, cutAt)
}

// handOverJoins gives every join this node acts for to a powered replica.
func (n *Node) handOverJoins(ctx context.Context) {
	var joins []*joinCopy
	for _, c := range n.joins.all() {
		c.view(func(m *join.Join) {
			if m.Pending() && len(m.Others(n.selfID)) > 0 {
				joins = append(joins, c)
			}
		})
	}
	for _, c := range joins {
		n.handOverJoin(ctx, c)
	}
}

// handOverJoin sends c's current record to the first of its replicas that
// is powered and takes it; this copy then stops acting (the machine makes
// it Moved, so branch ends reaching it go on to the replica).
func (n *Node) handOverJoin(ctx context.Context, c *joinCopy) {
	var others []pack.Peer
	var id string
	c.view(func(m *join.Join) { others, id = m.Others(n.selfID), m.ID() })
	for _, r := range others {
		if vd := n.tt.view.CanRun(r.ID, 0); !vd.OK {
			n.log.Info("join replica not powered; not handing over to it", "join", id, "replica", rpc.ShortIDString(r.ID), "why", vd.Reason)
			continue
		}
		var rec join.Record
		pending := false
		c.view(func(m *join.Join) { rec, pending = m.Record(), m.Pending() })
		if !pending {
			return
		}
		rep := n.callGuard(ctx, r, api.JoinHandover{Key: id, Record: rpc.MustCBOR(&rec)})
		if !rep.OK {
			n.log.Info("join hand-over refused", "join", id, "replica", rpc.ShortIDString(r.ID), "err", rep.Error)
			continue
		}
		n.stepJoin(c, join.HandedOver{To: r})
		n.log.Info("join handed over before the cut", "join", id, "to", rpc.ShortIDString(r.ID))
		return
	}
}

// joinHandoverOp makes this replica the acting holder of a join whose
// primary drains before a power cut. The record it brings is the primary's
// latest, so it replaces the replica's copy.
func (n *Node) joinHandoverOp(from peer.ID, m api.JoinHandover) api.GuardReply {
	if n.draining.Load() {
		return api.GuardReply{Error: "peer " + rpc.ShortID(n.host.ID()) + " is draining too"}
	}
	var rec join.Record
	if err := rpc.Dec.Unmarshal(m.Record, &rec); err != nil {
		return api.GuardReply{Error: "bad join record: " + err.Error()}
	}
	c := n.joins.get(rec.ID)
	if c == nil {
		cp := rec
		cp.Role = join.RoleReplica
		c, _ = n.joins.add(rec.ID, newJoinCopy(join.FromReplicaCopy(cp)))
	}
	ack := n.stepJoin(c, join.TakeHandOver{Record: rec, From: n.peerRef(from)})
	if !ack.OK {
		return api.GuardReply{Error: ack.Error}
	}
	n.log.Info("took over a join from a draining primary", "join", rec.ID, "workflow", rec.WorkflowID, "from", rpc.ShortID(from))
	return api.GuardReply{OK: true}
}

// handBackSteps asks the guardians of every step still running here that
// would not end before the cut to re-route it now.
func (n *Node) handBackSteps(ctx context.Context, cutAt time.Time) {
	view := n.tt.view
	now := view.Now()
	for _, s := range n.helds.all() {
		m := s.view()
		if !m.CanHandBack() {
			continue
		}
		head, err := m.Record().Pack.Head()
		if err != nil {
			continue
		}
		s.rt.Lock()
		since := s.since
		s.rt.Unlock()
		expected := view.Expected(head.Name, n.tt.clock.Virtual(head.Expect()))
		ran := n.tt.clock.Virtual(n.clock.Since(since))
		if now.Add(max(expected-ran, 0) + view.Config().Margin).Before(cutAt) {
			continue // it ends in time and is forwarded as usual
		}
		n.handBack(ctx, m.Record(), m.Guardians(), head)
	}
}

// handBack asks h's guardians, primary first, to re-route h now.
func (n *Node) handBack(ctx context.Context, h *held.Record, gs []pack.Peer, head *grammar.Service) {
	for _, g := range gs {
		if g.ID == n.selfID {
			continue
		}
		rep := n.callGuard(ctx, g, api.GuardHandback{Key: h.GuardKey, Attempt: h.Attempt()})
		if rep.OK {
			n.log.Info("step handed back before the cut", "key", h.Key, "step", head.Name, "guardian", rpc.ShortIDString(g.ID))
			return
		}
		n.log.Info("hand-back refused", "key", h.Key, "guardian", rpc.ShortIDString(g.ID), "err", rep.Error)
	}
}

// handbackOp serves a holder's request to re-route a step before its cut.
// The guardian re-routes as if the holder had gone silent (attempt+1, never
// back to it); the re-route tells the holder it was superseded, which stops
// the step there.
func (n *Node) handbackOp(from peer.ID, m api.GuardHandback) api.GuardReply {
	rep := n.stepGuardReply(m.Key, guard.Handback{From: from.String(), Attempt: m.Attempt, Why: "handed the step back before a power cut"})
	if rep.OK {
		n.log.Info("holder hands a step back before a power cut", "key", m.Key, "holder", rpc.ShortID(from))
	}
	return rep
}
