package core

import (
	"slices"

	"github.com/bedwe/bedwe/node/sim"
)

// branchBallot is the ballot every branch chain starts under. A FORK
// position that is re-routed starts its branches again, and the fixed
// first token makes that safe: an acceptor that holds a branch at that
// token or later refuses the second start (first writer wins), so a
// branch runs under one chain whoever forked it.
var branchBallot = Ballot{Epoch: 1, Node: -1}

// forkState is a FORK position's holder waiting for its branches: it
// starts each branch chain, then asks the branches' acceptors until a
// majority of each holds an end, and hands the FORK's output on.
type forkState struct {
	branches []ChainID
	// answers[branch][acceptor] is an acceptor's last word on a branch
	// that holds an end.
	answers map[ChainID]map[sim.NodeID]Value
	ended   map[ChainID]Value
}

// fork starts the branches of the FORK (or the arm of the CHOICE) held at
// h.
func (n *Node) fork(c ChainID, h *holding, step Step) {
	f := &forkState{answers: map[ChainID]map[sim.NodeID]Value{}, ended: map[ChainID]Value{}}
	h.fork = f
	w := h.pack.Workflow
	n.env.Execute(sim.Execution{Workflow: c, Pos: h.tok.Pos, Service: step.Service, Token: h.tok.String()})
	arms := make([]int, len(step.Branches))
	for b := range arms {
		arms[b] = b
	}
	if step.Choice {
		// A CHOICE is a FORK of the one arm its guard picks: the same
		// arm at whichever holder, so a re-routed CHOICE joins the arm
		// already running.
		arms = []int{Choose(h.pack.Outputs, len(step.Branches))}
	}
	for _, b := range arms {
		bc := BranchChain(w.ID, h.tok.Pos, b)
		f.branches = append(f.branches, bc)
		v := Value{Token: Token{Ballot: branchBallot, Pos: 0}, Holder: n.pickReceiver(h.group), Pack: &Pack{Workflow: w, Chain: bc}}
		if len(step.Branches[b]) == 0 {
			v.End, v.Holder = Done, -1
		}
		if n.props[bc] != nil || n.held[bc] != nil || n.acc[bc] != nil && n.acc[bc].rec.Has {
			continue // this node already knows the branch as started
		}
		n.propose(bc, h.group, v, purposeBranch)
	}
	n.env.SetTimer(key(c, timerJoin), n.cfg.RetryEvery)
}

// onJoinTimer asks the acceptors of every branch that has not ended.
func (n *Node) onJoinTimer(c ChainID) {
	h := n.held[c]
	if h == nil || h.fork == nil || h.finished {
		return
	}
	for _, bc := range h.fork.branches {
		if _, ok := h.fork.ended[bc]; ok {
			continue
		}
		for _, id := range h.group {
			n.env.Send(id, &Query{Workflow: bc})
		}
	}
	n.env.SetTimer(key(c, timerJoin), n.cfg.RetryEvery)
}

func (n *Node) onQuery(from sim.NodeID, m *Query) {
	a := n.acc[m.Workflow]
	if a == nil {
		n.env.Send(from, &State{Workflow: m.Workflow})
		return
	}
	n.answer(a, from, &State{Workflow: m.Workflow, Has: a.rec.Has, Value: a.rec.Value})
}

// onState counts an acceptor's word on a branch: the branch has ended
// once a majority of its acceptors hold the same end (an end held by a
// minority may still be re-routed past).
func (n *Node) onState(from sim.NodeID, m *State) {
	parent := RootChain(WorkflowOf(m.Workflow))
	h := n.held[parent]
	if h == nil || h.fork == nil || h.finished || !m.Has || m.Value.End == Running {
		return
	}
	f := h.fork
	if _, ok := f.ended[m.Workflow]; ok || !slices.Contains(f.branches, m.Workflow) {
		return // already counted, or a late answer about another FORK's branch
	}
	if f.answers[m.Workflow] == nil {
		f.answers[m.Workflow] = map[sim.NodeID]Value{}
	}
	f.answers[m.Workflow][from] = m.Value
	same := 0
	for _, v := range f.answers[m.Workflow] {
		if v.Token == m.Value.Token && v.End == m.Value.End {
			same++
		}
	}
	if same < majority(h.group) {
		return
	}
	f.ended[m.Workflow] = m.Value
	if len(f.ended) < len(f.branches) {
		return
	}
	n.env.CancelTimer(key(parent, timerJoin))
	if step := h.pack.Steps()[h.tok.Pos]; step.Choice {
		v := f.ended[f.branches[0]]
		n.handOn(parent, h, ChoiceOutput(int(f.branches[0]&0xff)-1, v.Pack.Outputs), v.End == Failed)
		return
	}
	var outs [][]string
	for _, bc := range f.branches {
		v := f.ended[bc]
		if v.End == Failed {
			n.handOn(parent, h, "", true)
			return
		}
		outs = append(outs, v.Pack.Outputs)
	}
	n.handOn(parent, h, ForkOutput(outs), false)
}
