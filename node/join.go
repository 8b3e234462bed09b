package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Joins, in one paragraph: the rules live in package node/join (a machine
// with no I/O and no lock); this file carries out what it says. Each join
// copy has its own lock, held while an event is stepped and its record
// persisted, so the records reach the journal in the order the machine
// produced them and a failed write leaves the copy unchanged (the event is
// refused). Replication to the other holders and the answer to the sender
// come after the write and outside the lock; forwarding, cancelling and
// starting branches run in the background. The table of copies has its own
// lock, never held across I/O.

// joinCopy is one copy of a join this peer holds.
type joinCopy struct {
	// mu serialises stepping and the persisting of the stepped record.
	mu sync.Mutex
	// cur is the committed machine. A machine is never changed once
	// stored (stepJoin steps a clone), so readers load it without a lock.
	cur atomic.Pointer[join.Join]
	// pruned is set (under mu) once the copy was deleted by the retention:
	// nothing steps it again.
	pruned bool
}

func newJoinCopy(m *join.Join) *joinCopy {
	c := &joinCopy{}
	c.cur.Store(m)
	return c
}

// joinTable is every join copy this peer holds, by join ID.
type joinTable struct{ t table[*joinCopy] }

func newJoinTable() *joinTable { return &joinTable{t: newTable[*joinCopy]()} }

func (t *joinTable) get(id string) *joinCopy {
	c, _ := t.t.get(id)
	return c
}

// add stores c unless a copy of the same join is there; it returns the copy
// kept.
func (t *joinTable) add(id string, c *joinCopy) (*joinCopy, bool) {
	return t.t.getOrAdd(id, func() *joinCopy { return c })
}

// remove drops id's copy if it is still c.
func (t *joinTable) remove(id string, c *joinCopy) { t.t.removeIf(id, c) }

// all returns every copy (a snapshot).
func (t *joinTable) all() []*joinCopy { return t.t.values() }

// view runs fn with c's committed machine (reads only; no lock).
func (c *joinCopy) view(fn func(m *join.Join)) { fn(c.cur.Load()) }

func frameKind(k grammar.HeadKind) pack.FrameKind {
	switch k {
	case grammar.HeadFirst:
		return pack.FrameFirst
	case grammar.HeadFailover:
		return pack.FrameFailover
	}
	return pack.FrameFork
}

func kindName(k pack.FrameKind) string {
	switch k {
	case pack.FrameFirst:
		return "FIRST"
	case pack.FrameFailover:
		return "FAILOVER"
	}
	return "FORK"
}

func (n *Node) saveJoin(rec join.Record) error {
	return n.journal.Put(journal.BucketJoins, rec.ID, rpc.MustCBOR(&rec))
}

// stepJoin applies ev to c and carries out what the machine says, in
// order: persist (a failure refuses the event and changes nothing), then
// replicate to the other holders, then answer; forwarding, cancelling and
// starting branches go on in the background.
func (n *Node) stepJoin(c *joinCopy, ev join.Event) join.Ack {
	self := n.self()
	c.mu.Lock()
	if c.pruned {
		c.mu.Unlock()
		return join.Ack{Refusal: join.RefuseMoved, Error: fmt.Sprintf("peer %s deleted join %s after the retention period", rpc.ShortID(n.host.ID()), c.cur.Load().ID())}
	}
	prevActor := c.cur.Load().Actor()
	next := c.cur.Load().Clone()
	rd := next.Step(ev, self)
	if rd.Persist {
		if err := n.saveJoin(next.Record()); err != nil {
			c.mu.Unlock()
			n.log.Error("journal join", "join", next.ID(), "err", err)
			return join.Ack{Refusal: join.RefuseRecovering, Error: fmt.Sprintf("peer %s could not journal join %s: %v", rpc.ShortID(n.host.ID()), next.ID(), err)}
		}
	}
	c.cur.Store(next)
	id, wf, actor, token := next.ID(), next.WorkflowID(), next.Actor(), next.Token()
	others, copies := next.Others(self.ID), next.OtherCopies(self.ID)
	c.mu.Unlock()

	if d, ok := ev.(join.Deliver); ok {
		n.ev.Emit(events.Event{Type: events.Delivery, Workflow: wf, Join: id, Branch: d.Branch, Attempt: d.Attempt, After: lastRan(d.Trace), Stale: !rd.Persist})
	}
	if rd.Replicate != nil {
		// The other holders learn the result before the sender hears the
		// ack (J2): a holder that does not answer is down, gone or cut
		// off, and the copies that did answer keep the result. All at
		// once and within replicateTimeout, well inside the sender's
		// stream timeout: a sender that times out delivers to a replica,
		// which takes the join over from this live actor.
		d := toDelivery(wf, id, *rd.Replicate)
		var wg sync.WaitGroup
		for _, r := range others {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rep, err := n.guardCallRedial(n.ctx, r, api.JoinUpdate{Key: id, Delivery: d}, replicateTimeout)
				if err != nil {
					rep.Error = err.Error()
				}
				if !rep.OK {
					n.log.Info("join replica did not take an update", "join", id, "replica", rpc.ShortIDString(r.ID), "err", rep.Error)
				}
			}()
		}
		wg.Wait()
	}
	for _, d := range rd.Relay {
		// J9: the actor this copy follows may lack this branch end.
		to, msg := rd.RelayTo, api.JoinUpdate{Key: id, Delivery: toDelivery(wf, id, d)}
		n.log.Info("relaying a branch end to the join's actor", "join", id, "actor", rpc.ShortIDString(to.ID), "branch", d.Branch, "attempt", d.Attempt)
		n.spawn(func(ctx context.Context) { n.pushResult(ctx, to, msg) })
	}
	if rd.TookOver != "" {
		n.log.Warn("taking over join", "join", id, "workflow", wf, "why", rd.TookOver, "epoch", token.Epoch,
			"started", fmt.Sprint(next.Record().Started), "starting", fmt.Sprint(rd.StartBranches))
		n.ev.Emit(events.Event{Type: events.JoinTakeover, Workflow: wf, Join: id, Reason: rd.TookOver})
		// Every other copy, the primary included (J7): a live primary
		// that was only suspected stops acting.
		for _, r := range copies {
			n.spawn(func(ctx context.Context) {
				n.callGuard(ctx, r, api.JoinActor{Key: id, Holder: self, Epoch: token.Epoch})
			})
		}
	}
	if len(rd.Cancel) > 0 {
		n.publishCancel(cancelMsg{WorkflowID: wf, JoinID: id, Branches: rd.Cancel})
	}
	if rd.SettleSplit {
		n.spawn(func(ctx context.Context) { n.settleSplit(ctx, c) })
	}
	if len(rd.StartBranches) > 0 {
		idx := rd.StartBranches
		n.spawn(func(ctx context.Context) { n.startBranches(ctx, c, idx) })
	}
	if rd.Forward {
		n.spawn(func(ctx context.Context) { n.forwardJoin(ctx, c) })
	}
	if rd.NotifyForwarded {
		for _, r := range copies {
			n.spawn(func(ctx context.Context) {
				n.callGuard(ctx, r, api.JoinForwarded{Key: id, Epoch: token.Epoch, Actor: token.Actor})
			})
		}
	}
	if rd.AskEarlier {
		n.spawn(func(ctx context.Context) { n.askEarlier(ctx, c) })
	}
	if rd.AskReplicas {
		n.spawn(func(ctx context.Context) { n.askReplicas(ctx, c) })
	}
	if rd.Watch {
		if pid, err := peer.Decode(actor.ID); err == nil && pid != n.host.ID() {
			n.learnAddrs(pid, actor.Addrs)
			n.watchHolder(pid)
		}
	}
	if rd.Unwatch && prevActor.ID != "" && prevActor.ID != self.ID {
		n.unwatchIfIdle(prevActor.ID)
	}
	n.kickBeats()
	n.touchActivity()
	return rd.Ack
}

func toDelivery(wf, joinID string, d join.Deliver) api.Delivery {
	return api.Delivery{WorkflowID: wf, JoinID: joinID, Branch: d.Branch, OK: d.OK, Error: d.Error, Outputs: d.Outputs, Trace: d.Trace, Attempt: d.Attempt}
}

func fromDelivery(d api.Delivery) join.Deliver {
	return join.Deliver{Branch: d.Branch, Attempt: d.Attempt, OK: d.OK, Error: d.Error, Outputs: d.Outputs, Trace: d.Trace}
}

// startJoin makes this peer the join holder of the pattern at the head of p
// and sends its branches out (all at once, or the first for FAILOVER).
func (n *Node) startJoin(ctx context.Context, p *pack.Pack, head grammar.Head, rest *grammar.Workflow) {
	rec := join.Record{
		ID:         newID("j"),
		WorkflowID: p.WorkflowID,
		Kind:       frameKind(head.Kind),
		Rest:       toBody(rest),
		Origin:     p.Origin,
		Input:      p.Input,
		Outputs:    copyOutputs(p.Outputs),
		Trace:      p.Trace,
		Frames:     p.Frames,
		Created:    n.clock.Now().UTC(),
		Split:      p.Settle,
	}
	for _, b := range head.Branches {
		rec.Branches = append(rec.Branches, toBody(b))
	}
	m := join.New(rec, n.self())
	m = n.replicateJoin(ctx, m)
	c := newJoinCopy(m)
	if err := n.saveJoin(m.Record()); err != nil {
		// Nothing was handed on yet: the pack's holder fails this step and
		// its guardian or a restart tries again.
		n.log.Error("journal join", "workflow", p.WorkflowID, "err", err)
		msg := fmt.Sprintf("workflow %s: peer %s could not journal the join of a %s: %v", p.WorkflowID, rpc.ShortID(n.host.ID()), kindName(rec.Kind), err)
		if ferr := n.finishBranch(ctx, p, false, msg); ferr != nil {
			n.log.Error("report failure", "workflow", p.WorkflowID, "err", ferr)
		}
		return
	}
	n.joins.add(rec.ID, c)
	n.kickBeats()
	n.touchActivity()
	n.log.Debug("join started", "workflow", p.WorkflowID, "join", rec.ID, "kind", kindName(rec.Kind), "branches", len(head.Branches), "replicas", len(m.Replicas()))
	// The step before the pattern is released (J5) before any branch
	// starts; the machine then says which branches to start.
	n.settleSplit(ctx, c)
}

// settleSplit settles the split of c (see join J5) and tells the machine.
func (n *Node) settleSplit(ctx context.Context, c *joinCopy) {
	var rec join.Record
	c.view(func(m *join.Join) { rec = m.Record() })
	err := n.settleUntil(ctx, 0, rec.Split)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		n.log.Warn("split superseded: a guardian re-routed the step before it; abandoning the join", "join", rec.ID, "workflow", rec.WorkflowID)
		n.ev.Emit(events.Event{Type: events.Superseded, Workflow: rec.WorkflowID, Join: rec.ID, Reason: "split superseded"})
	}
	n.stepJoin(c, join.SplitSettled{Superseded: err != nil})
}

// startBranches dispatches branches idx of join c, each to a distinct peer
// where possible and never, where another peer can run it, to a holder of
// the join (I3: one failure must not take a branch and a copy of its
// join). Each branch's first holder registers with the join's holders
// before it acknowledges (J6).
func (n *Node) startBranches(ctx context.Context, c *joinCopy, idx []int) {
	m := c.cur.Load()
	if !m.Acting() {
		return // a newer actor took over since: it starts what is needed
	}
	rec, tok := m.Record(), m.Token()
	// Every copy, the primary included, learns of the start (J6), and it
	// names this actor (J7).
	holders := join.Holders(n.self(), m.OtherCopies(n.self().ID))
	used := map[peer.ID]bool{}
	for _, i := range idx {
		b, err := fromBody(rec.Branches[i])
		if err != nil {
			n.log.Error("join branch", "join", rec.ID, "branch", i, "err", err)
			continue
		}
		frames := append(append([]pack.Frame{}, rec.Frames...), pack.Frame{
			JoinID: rec.ID, Kind: rec.Kind, Branch: i, Holders: holders,
		})
		bp := &pack.Pack{
			WorkflowID: rec.WorkflowID,
			Origin:     rec.Origin,
			Workflow:   b,
			Input:      rec.Input,
			Outputs:    copyOutputs(rec.Outputs),
			Frames:     frames,
			Settle:     []pack.Settle{{Kind: pack.SettleBranchStarted, Key: rec.ID, Branch: i, Peers: holders, Epoch: tok.Epoch, Actor: tok.Actor}},
		}
		n.dispatchAvoiding(ctx, bp, used)
	}
}

// dispatchAvoiding is dispatch for a branch: when its head is a service it
// goes to a peer not in used if possible, and the chosen peer joins used.
func (n *Node) dispatchAvoiding(ctx context.Context, p *pack.Pack, used map[peer.ID]bool) {
	head, rest, err := grammar.Peel(p.Workflow, n.selector(p))
	if err != nil || head.Kind != grammar.HeadService {
		n.spawn(func(ctx context.Context) { _ = n.dispatch(ctx, p) })
		return
	}
	steps := []grammar.Step{head.Service}
	if rest != nil {
		steps = append(steps, rest.Steps...)
	}
	p.Workflow = &grammar.Workflow{Steps: steps}
	h, err := n.handoffExcluding(ctx, p, used, nil)
	if err == nil {
		used[h.to] = true
		n.guardHandedOff(p, h, nil)
		return
	}
	if ctx.Err() != nil || errors.Is(err, errCancelled) {
		return
	}
	msg := fmt.Sprintf("step %s (path %s): %v", head.Service.Name, head.Service.Path, err)
	n.spawn(func(ctx context.Context) {
		if ferr := n.finishBranch(ctx, p, false, msg); ferr != nil {
			n.log.Error("report failure", "workflow", p.WorkflowID, "err", ferr)
		}
	})
}

func (n *Node) handleDeliver(_ context.Context, _ peer.ID, req []byte) []byte {
	var d api.Delivery
	if err := rpc.Dec.Unmarshal(req, &d); err != nil {
		return rpc.AckBytes(api.CodeBadPack, "bad delivery: "+err.Error())
	}
	ack := n.deliverHere(d)
	if ack.OK {
		return rpc.AckBytes("", "")
	}
	code := api.CodeInternal
	switch ack.Refusal {
	case join.RefuseMoved:
		code = api.CodeDraining
	case join.RefuseSuperseded:
		code = api.CodeSuperseded
	case join.RefuseUnsettled:
		code = api.CodeUnsettled
	}
	return rpc.AckBytes(code, ack.Error)
}

// deliverHere gives a branch end to this peer's copy of its join.
func (n *Node) deliverHere(d api.Delivery) join.Ack {
	c := n.joins.get(d.JoinID)
	if c == nil {
		return join.Ack{Refusal: join.RefuseMoved, Error: fmt.Sprintf("peer %s holds no join %s", rpc.ShortID(n.host.ID()), d.JoinID)}
	}
	// A branch end of a chain a guardian re-routed away from is refused
	// before it is recorded (I1); the re-routed chain delivers its own.
	if err := n.probeSettle(n.ctx, d.Settle); errors.Is(err, errUnsettled) {
		return join.Ack{Refusal: join.RefuseUnsettled, Error: fmt.Sprintf("workflow %s: the end of branch %d: %v; not recorded at peer %s", d.WorkflowID, d.Branch, err, rpc.ShortID(n.host.ID()))}
	} else if err != nil && !errors.Is(err, errSuperseded) {
		return join.Ack{Refusal: join.RefuseRecovering, Error: fmt.Sprintf("workflow %s: the end of branch %d not recorded at peer %s: %v", d.WorkflowID, d.Branch, rpc.ShortID(n.host.ID()), err)}
	} else if err != nil {
		n.ev.Emit(events.Event{Type: events.Superseded, Workflow: d.WorkflowID, Join: d.JoinID, Branch: d.Branch, Reason: "branch end of a superseded chain refused"})
		return join.Ack{Refusal: join.RefuseSuperseded, Error: fmt.Sprintf("workflow %s: the end of branch %d comes from a chain a guardian re-routed; refused at peer %s", d.WorkflowID, d.Branch, rpc.ShortID(n.host.ID()))}
	}
	n.stallAfterProbe.stall(lastOK(d.Trace).Service, n.cfg.DataDir, n.log)
	ack := n.stepJoin(c, fromDelivery(d))
	if ack.OK {
		n.stallAfterRecord.stallFor(lastOK(d.Trace).Service, n.cfg.DataDir, n.log, failpointLongStall)
		// Recorded (or already counted): the branch's last guardians are
		// released by the join, not by the sender alone.
		switch err := n.settle(n.ctx, d.Attempt, d.Settle, successor{}); {
		case errors.Is(err, errUnsettled):
			n.spawn(func(ctx context.Context) { n.settleUntil(ctx, d.Attempt, d.Settle) })
		case err != nil:
			n.ev.Emit(events.Event{Type: events.Superseded, Workflow: d.WorkflowID, Join: d.JoinID, Branch: d.Branch, Reason: "branch end of a superseded chain"})
		}
	}
	return ack
}

// forwardJoin moves a decided pattern on: the merged data continues with the
// residual after the pattern, or the failure goes up a level. Once the next
// holder acknowledged, the machine hears ForwardDone.
func (n *Node) forwardJoin(ctx context.Context, c *joinCopy) {
	// One snapshot: a copy that stopped acting since the machine said
	// Forward (a newer actor's continuation reached it) forwards nothing,
	// and an acting one names itself, never the actor it may learn of
	// later (J7).
	m := c.cur.Load()
	if !m.Acting() {
		return
	}
	rec, tok := m.Record(), m.Token()
	p := &pack.Pack{}
	var ok bool
	var msg string
	p.Outputs, p.Trace, ok, msg = m.Continuation()
	p.WorkflowID, p.Origin, p.Input, p.Frames = rec.WorkflowID, rec.Origin, rec.Input, rec.Frames
	if others := m.OtherCopies(n.self().ID); len(others) > 0 {
		// Whoever takes the continuation tells the other copies it moved
		// on, naming this actor: a copy that knows a newer one refuses
		// (J7), and the continuation stops there.
		p.Settle = []pack.Settle{{Kind: pack.SettleJoinForwarded, Key: rec.ID, Peers: others, Epoch: tok.Epoch, Actor: tok.Actor}}
	}
	rest, err := fromBody(rec.Rest)
	if err != nil {
		ok, msg = false, err.Error()
	}
	switch {
	case !ok:
		if err := n.finishBranch(ctx, p, false, msg); err != nil {
			return
		}
	case rest == nil:
		if err := n.finishBranch(ctx, p, true, ""); err != nil {
			return
		}
	default:
		p.Workflow = rest
		err := n.dispatch(ctx, p)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errSuperseded) {
			// A newer actor took over (J7) while this copy could not
			// reach the others: branch ends recorded only here would be
			// lost with this continuation. The other copies get them
			// again; the acting one records those it lacks.
			n.pushResults(ctx, c)
			// Or the join moved on already (J10). Either way nothing was
			// taken: this copy stops acting and sends no notice, which
			// would tell the copies a continuation was taken and make
			// them refuse the newer actor's.
			n.stepJoin(c, join.ForwardDone{Superseded: true})
			return
		}
	}
	n.stepJoin(c, join.ForwardDone{})
}

// pushResults sends every branch end this copy recorded to every other
// copy, all at once (an acting copy records an update it lacks as a branch
// end, J2). A copy that does not answer is asked again, on a fresh
// connection, until it answers (callUntilAnswered): this copy learnt of
// the takeover because a cut healed, and the new actor may be the one
// peer that has not got the ends — without them it would wait for ever
// (a single push can fail on libp2p's dial backoff left by the cut, and
// the workflow would stall, as in isolate-join-holder).
func (n *Node) pushResults(ctx context.Context, c *joinCopy) {
	m := c.cur.Load()
	rec := m.Record()
	var wg sync.WaitGroup
	for _, to := range m.OtherCopies(n.self().ID) {
		for b, r := range rec.Results {
			d := toDelivery(rec.WorkflowID, rec.ID, join.Deliver{Branch: b, Attempt: r.Attempt, OK: r.OK, Error: r.Error, Outputs: r.Outputs, Trace: r.Trace})
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.pushResult(ctx, to, api.JoinUpdate{Key: rec.ID, Delivery: d})
			}()
		}
	}
	wg.Wait()
	n.log.Info("a newer actor took this join over: pushed its branch ends to the other copies", "join", rec.ID, "results", len(rec.Results))
}

// pushResult sends one branch end to copy to until it answers
// (callUntilAnswered; pushResults, and join J9's relay).
func (n *Node) pushResult(ctx context.Context, to pack.Peer, msg api.JoinUpdate) {
	rep, tries, err := n.callUntilAnswered(ctx, to, msg, replicateTimeout)
	switch {
	case err != nil:
		n.log.Warn("join copy did not take a branch end sent to it; giving up", "join", msg.Key, "copy", rpc.ShortIDString(to.ID), "branch", msg.Delivery.Branch, "tries", tries, "err", err)
	case !rep.OK:
		n.log.Info("join copy refused a branch end sent to it", "join", msg.Key, "copy", rpc.ShortIDString(to.ID), "branch", msg.Delivery.Branch, "err", rep.Error)
	}
}

// replicateJoin stores copies of a new join at up to JoinReplicas peers,
// each in a zone of its own where the mesh allows, so the peer waiting at
// SYNC is not a single point of loss. The copies are sent in parallel;
// the returned machine lists the replicas that took one.
func (n *Node) replicateJoin(ctx context.Context, m *join.Join) *join.Join {
	picked := n.pickReplicas(n.cfg.JoinReplicas, map[peer.ID]bool{n.host.ID(): true})
	if len(picked) == 0 {
		return m
	}
	rec := m.Record()
	for _, r := range picked {
		rec.Replicas = append(rec.Replicas, r)
	}
	planned := join.New(rec, n.self())
	ok := make([]bool, len(picked))
	var wg sync.WaitGroup
	for i, r := range picked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cp := planned.ReplicaCopy(i)
			rep := n.callGuard(ctx, r, api.JoinReplica{Record: rpc.MustCBOR(&cp)})
			ok[i] = rep.OK
			if !rep.OK {
				n.log.Info("join replica refused", "join", rec.ID, "peer", rpc.ShortIDString(r.ID), "err", rep.Error)
			}
		}()
	}
	wg.Wait()
	rec.Replicas = nil
	for i, r := range picked {
		if ok[i] {
			rec.Replicas = append(rec.Replicas, r)
		}
	}
	return join.New(rec, n.self())
}

// pickReplicas chooses up to k live peers outside exclude to hold copies
// of a record, one zone each where possible: every pick avoids the zones
// of this peer and of the picks before it.
func (n *Node) pickReplicas(k int, exclude map[peer.ID]bool) []pack.Peer {
	var out []pack.Peer
	zones := map[string]bool{}
	for range k {
		id, ok := n.pickGuardianAvoiding(exclude, zones)
		if !ok {
			break
		}
		exclude[id] = true
		ref := n.peerRef(id)
		zones[ref.Zone] = true
		out = append(out, ref)
	}
	return out
}

// callGuard sends one guard message within the stream timeout and returns
// the reply (Error set on failure); see guardCall.
// replicateTimeout bounds one join update to a replica (J2).
const replicateTimeout = 3 * time.Second

func (n *Node) callGuard(ctx context.Context, to pack.Peer, m api.GuardRequest) api.GuardReply {
	return n.guardCall(ctx, to, m, n.cfg.StreamTimeout)
}

// askEarlier asks the replicas ranked before c whether one acts or is alive
// (it will act), in rank order, and tells the machine.
func (n *Node) askEarlier(ctx context.Context, c *joinCopy) {
	var earlier []pack.Peer
	var id string
	c.view(func(m *join.Join) { earlier, id = m.Earlier(), m.ID() })
	ans := join.EarlierAnswered{}
	for _, r := range earlier {
		rep := n.callGuard(ctx, r, api.JoinStatus{Key: id})
		if rep.OK && rep.Known {
			ans.Reached = true
			r := r
			ans.Acting = &r
			break
		}
	}
	if ctx.Err() == nil {
		n.stepJoin(c, ans)
	}
}

// askReplicas asks a restarted primary's replicas whether one took over
// while it was down, and tells the machine.
func (n *Node) askReplicas(ctx context.Context, c *joinCopy) {
	var reps []pack.Peer
	var id string
	c.view(func(m *join.Join) { reps, id = m.Replicas(), m.ID() })
	ans := join.Recovered{}
	for _, r := range reps {
		if rep := n.callGuard(ctx, r, api.JoinStatus{Key: id}); rep.Active {
			n.log.Info("a replica took over this join while we were down", "join", id, "replica", rpc.ShortIDString(r.ID))
			r := r
			ans.TakenBy = &r
			break
		}
	}
	if ctx.Err() == nil {
		n.stepJoin(c, ans)
	}
}

// joinReplicaOp serves the join guard operations.
func (n *Node) joinReplicaOp(from peer.ID, req api.GuardRequest) api.GuardReply {
	reply := func(a join.Ack) api.GuardReply {
		switch {
		case a.OK:
			return api.GuardReply{OK: true}
		case a.Refusal == join.RefuseSuperseded:
			return api.GuardReply{OK: true, Known: true, Superseded: true, Error: a.Error}
		case a.Refusal == join.RefuseTaken:
			return api.GuardReply{OK: true, Known: true, Superseded: true, Holder: pack.Peer{ID: a.TakenBy}, Error: a.Error}
		}
		return api.GuardReply{Error: a.Error}
	}
	switch m := req.(type) {
	case api.JoinReplica:
		var rec join.Record
		if err := rpc.Dec.Unmarshal(m.Record, &rec); err != nil {
			return api.GuardReply{Error: "bad join record: " + err.Error()}
		}
		cp := join.FromReplicaCopy(rec)
		if old := n.joins.get(rec.ID); old != nil {
			return api.GuardReply{OK: true}
		}
		// Durable before acknowledged (I4): a copy the primary counts on
		// must survive this peer's restart.
		if err := n.saveJoin(cp.Record()); err != nil {
			return api.GuardReply{Error: fmt.Sprintf("peer %s could not journal a copy of join %s: %v", rpc.ShortID(n.host.ID()), rec.ID, err)}
		}
		n.joins.add(rec.ID, newJoinCopy(cp))
		n.touchActivity()
		n.ev.Emit(events.Event{Type: events.JoinCopy, Workflow: rec.WorkflowID, Join: rec.ID, Peer: from.String(), Branch: rec.Rank})
		n.learnAddrs(from, rec.Actor.Addrs)
		n.watchHolder(from)
		return api.GuardReply{OK: true}
	case api.JoinUpdate:
		c := n.joins.get(m.Key)
		if c == nil {
			return api.GuardReply{Error: "no copy of join " + m.Key}
		}
		return reply(n.stepJoin(c, join.Update{Deliver: fromDelivery(m.Delivery), From: from.String()}))
	case api.JoinForwarded:
		if c := n.joins.get(m.Key); c != nil {
			return reply(n.stepJoin(c, join.ActorForwarded{Token: join.Token{Epoch: m.Epoch, Actor: m.Actor}, By: m.By, Yield: m.Yield}))
		}
		return api.GuardReply{OK: true}
	case api.JoinBranch:
		c := n.joins.get(m.Key)
		if c == nil {
			return api.GuardReply{OK: true} // not a holder (any more): nothing to record
		}
		return reply(n.stepJoin(c, join.BranchStarted{Branch: m.Branch, Holder: m.Holder, Attempt: m.Attempt, Token: join.Token{Epoch: m.Epoch, Actor: m.Actor}, Yield: m.Yield}))
	case api.JoinActor:
		if c := n.joins.get(m.Key); c != nil {
			var prev pack.Peer
			c.view(func(j *join.Join) { prev = j.Actor() })
			n.stepJoin(c, join.NewActor{Actor: m.Holder, Epoch: m.Epoch})
			n.unwatchIfIdle(prev.ID)
		}
		return api.GuardReply{OK: true}
	case api.JoinHandover:
		return n.joinHandoverOp(from, m)
	case api.JoinStatus:
		c := n.joins.get(m.Key)
		if c == nil {
			return api.GuardReply{OK: true}
		}
		var acting, ended bool
		c.view(func(j *join.Join) { acting, ended = j.Acting(), m.AskBranch && j.BranchEnded(m.Branch) })
		return api.GuardReply{OK: true, Known: true, Active: acting, Released: ended}
	}
	return api.GuardReply{Error: fmt.Sprintf("unknown join request %T", req)}
}
