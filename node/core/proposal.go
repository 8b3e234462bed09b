package core

import (
	"strings"

	"github.com/bedwe/bedwe/node/sim"
)

const (
	purposeSubmit = iota + 1
	purposeHandOver
	purposeReroute
	purposeBranch // a FORK starting one of its branches
)

const (
	phasePrepare = iota + 1
	phaseAccept
	phaseChosen
)

// proposal drives one value into a majority of a workflow's acceptors: a
// submission's first position, a holder's hand-over of the next one, or a
// re-route (a promise round under a higher ballot first).
type proposal struct {
	group    []sim.NodeID
	purpose  int
	phase    int
	ballot   Ballot
	value    Value
	promises map[sim.NodeID]*Promise
	accepts  map[sim.NodeID]bool
	took     bool
	// since is when the current phase began (for the receiver's wait).
	since sim.Time
}

func (n *Node) propose(wf uint64, group []sim.NodeID, v Value, purpose int) {
	p := &proposal{group: group, purpose: purpose, phase: phaseAccept, ballot: v.Token.Ballot, value: v, accepts: map[sim.NodeID]bool{}, since: n.env.Now()}
	n.props[wf] = p
	n.sendProposal(wf, p)
}

func (n *Node) sendProposal(wf uint64, p *proposal) {
	switch p.phase {
	case phasePrepare:
		for _, id := range p.group {
			if p.promises[id] == nil {
				n.env.Send(id, &Prepare{Workflow: wf, Group: p.group, Ballot: p.ballot})
			}
		}
	case phaseAccept:
		for _, id := range p.group {
			if !p.accepts[id] {
				n.env.Send(id, &Accept{Workflow: wf, Group: p.group, Value: p.value})
			}
		}
	}
	if p.phase != phasePrepare && p.value.End == Running && !p.took {
		n.env.Send(p.value.Holder, &Take{Workflow: wf, Group: p.group, Token: p.value.Token, Pack: p.value.Pack})
	}
	n.env.SetTimer(key(wf, timerResend), n.cfg.RetryEvery)
}

func (n *Node) onResend(wf uint64) {
	p := n.props[wf]
	if p == nil {
		return
	}
	if p.phase != phasePrepare && p.value.End == Running && !p.took && n.env.Now()-p.since >= n.cfg.TakeWait {
		// The receiver has not taken the pack: it is most likely down.
		// Re-route the position now rather than wait for the acceptors
		// to miss its beats; a re-route is safe at any time, and it
		// avoids this receiver.
		n.suspect[p.value.Holder] = n.env.Now()
		n.reroute(wf, p.group, p.ballot.Epoch)
		return
	}
	n.sendProposal(wf, p)
}

// reroute starts a promise round under a ballot above every one this node
// has seen for the workflow: the holder of its position went silent (an
// acceptor's watch), or never took its pack (a proposer's wait). Any node
// may propose; the acceptors' promises decide.
func (n *Node) reroute(wf uint64, group []sim.NodeID, epoch uint32) {
	if a := n.acc[wf]; a != nil {
		epoch = max(epoch, a.rec.Promised.Epoch, a.rec.Value.Token.Ballot.Epoch, a.seen)
	}
	if p := n.props[wf]; p != nil {
		epoch = max(epoch, p.ballot.Epoch)
	}
	p := &proposal{group: group, purpose: purposeReroute, phase: phasePrepare, since: n.env.Now(),
		ballot: Ballot{Epoch: epoch + 1, Node: n.env.ID()}, promises: map[sim.NodeID]*Promise{}}
	n.props[wf] = p
	n.sendProposal(wf, p)
}

func (n *Node) onPromise(from sim.NodeID, m *Promise) {
	p := n.props[m.Workflow]
	if p == nil || p.phase != phasePrepare || p.ballot != m.Ballot {
		return
	}
	p.promises[from] = m
	if len(p.promises) < majority(p.group) {
		return
	}
	// The value to carry on: the highest token a majority holds. Every
	// chosen token is at one member of any majority, so a re-route never
	// goes back past a chosen position.
	var best *Value
	for _, id := range p.group {
		if pr := p.promises[id]; pr != nil && pr.Has && (best == nil || pr.Value.Token.Compare(best.Token) > 0) {
			best = &pr.Value
		}
	}
	if bug(BugRerouteOwnValue) {
		if a := n.acc[m.Workflow]; a != nil && a.rec.Has {
			best = &a.rec.Value
		}
	}
	if best == nil {
		delete(n.props, m.Workflow) // nothing was ever accepted: nothing to carry on
		return
	}
	v := Value{Token: Token{Ballot: p.ballot, Pos: best.Token.Pos}, End: best.End, Holder: -1, Pack: best.Pack}
	if v.End == Running {
		if best.Pack.Steps()[best.Token.Pos].Once && !bug(BugRerouteOnce) {
			// The step may have started at the silent holder: fail the
			// workflow rather than run it twice.
			v.End = Failed
		} else {
			v.Holder = n.pickReceiver(p.group, best.Holder)
		}
	}
	p.phase, p.value, p.accepts, p.since = phaseAccept, v, map[sim.NodeID]bool{}, n.env.Now()
	n.sendProposal(m.Workflow, p)
}

func (n *Node) onAccepted(from sim.NodeID, m *Accepted) {
	if m.Holder == n.env.ID() {
		// This node holds the token: count the acceptors that hold it.
		h := n.held[m.Workflow]
		if h == nil || h.tok.Compare(m.Token) < 0 {
			h = n.holdingOf(m.Workflow, m.Token, nil)
		}
		if h.tok == m.Token {
			h.accepts[from] = true
			n.maybeStart(m.Workflow, h)
		}
	}
	p := n.props[m.Workflow]
	if p == nil || p.phase != phaseAccept || p.value.Token != m.Token {
		return
	}
	p.accepts[from] = true
	if len(p.accepts) >= majority(p.group) {
		n.chosen(m.Workflow, p)
	}
}

func (n *Node) chosen(wf uint64, p *proposal) {
	p.phase = phaseChosen
	v := p.value
	if p.purpose == purposeSubmit {
		n.env.Report(sim.Report{Kind: "acked", Workflow: WorkflowOf(wf)})
	}
	switch {
	case !IsRoot(wf): // a branch's end is read by its FORK's holder
	case v.End == Done:
		n.env.Report(sim.Report{Kind: "done", Workflow: WorkflowOf(wf), Detail: strings.Join(v.Pack.Outputs, " ")})
	case v.End == Failed:
		n.env.Report(sim.Report{Kind: "failed", Workflow: WorkflowOf(wf)})
	}
	if h := n.held[wf]; h != nil && h.tok.Compare(v.Token) < 0 {
		n.drop(wf, h) // the position this node held is handed on
	}
	if v.End != Running || p.took {
		n.endProposal(wf, p)
	}
}

func (n *Node) endProposal(wf uint64, p *proposal) {
	if n.props[wf] == p {
		delete(n.props, wf)
		n.env.CancelTimer(key(wf, timerResend))
	}
}

func (n *Node) onTook(from sim.NodeID, m *Took) {
	p := n.props[m.Workflow]
	if p == nil || p.value.Token != m.Token {
		return
	}
	p.took = true
	if p.phase == phaseChosen {
		n.endProposal(m.Workflow, p)
	}
}

// onReject: an acceptor holds a later token or promised a higher ballot,
// so the chain this node drives or holds is superseded and stops here.
func (n *Node) onReject(from sim.NodeID, m *Reject) {
	if a := n.acc[m.Workflow]; a != nil {
		a.seen = max(a.seen, m.Promised.Epoch, m.Holds.Ballot.Epoch)
	}
	if p := n.props[m.Workflow]; p != nil {
		stale := p.phase == phaseAccept && p.value.Token == m.Token ||
			p.phase == phasePrepare && m.Token.Pos == -1 && m.Token.Ballot == p.ballot
		if stale {
			n.endProposal(m.Workflow, p)
			if h := n.held[m.Workflow]; h != nil && h.tok.Compare(m.Token) < 0 {
				n.drop(m.Workflow, h)
			}
		}
	}
	if h := n.held[m.Workflow]; h != nil && h.tok == m.Token {
		n.drop(m.Workflow, h)
	}
}
