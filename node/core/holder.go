package core

import (
	"slices"

	"github.com/bedwe/bedwe/node/sim"
)

// holding is a position this node runs: it starts the step only when it
// has the pack and a majority of the acceptors durably hold its token
// (so a re-route can never miss it), beats to the acceptors until its
// hand-over is chosen, and stops at once when one refuses its token.
type holding struct {
	tok      Token
	group    []sim.NodeID
	pack     *Pack
	accepts  map[sim.NodeID]bool
	started  bool
	finished bool
	// since is when this node learned of the token.
	since sim.Time
	// fork is set while the held position is a FORK waiting for its
	// branches.
	fork *forkState
	// startLSN is the journal append of a once step's StartRecord: the
	// step runs when it is durable.
	startLSN sim.LSN
}

func (n *Node) holdingOf(wf uint64, tok Token, group []sim.NodeID) *holding {
	h := n.held[wf]
	if h != nil && h.tok.Compare(tok) >= 0 {
		return h
	}
	if h != nil {
		// A later token of the chain replaces the one held here: its run
		// and its FORK's questions are moot (the timers are keyed by
		// chain, and must not fire into the new holding).
		n.env.CancelTimer(key(wf, timerRun))
		n.env.CancelTimer(key(wf, timerJoin))
	}
	h = &holding{tok: tok, group: group, accepts: map[sim.NodeID]bool{}, since: n.env.Now()}
	n.held[wf] = h
	n.env.SetTimer(key(wf, timerBeat), 0)
	return h
}

func (n *Node) onTake(from sim.NodeID, m *Take) {
	n.env.Send(from, &Took{Workflow: m.Workflow, Token: m.Token})
	if h := n.held[m.Workflow]; h != nil && h.tok.Compare(m.Token) > 0 {
		return // a stale hand-over: this node already holds a later token
	}
	h := n.holdingOf(m.Workflow, m.Token, m.Group)
	if h.tok != m.Token {
		return
	}
	if h.group == nil {
		h.group = m.Group
	}
	h.pack = m.Pack
	n.maybeStart(m.Workflow, h)
}

func (n *Node) maybeStart(wf uint64, h *holding) {
	if h.started || h.startLSN != 0 || h.pack == nil {
		return
	}
	if len(h.accepts) < majority(h.group) && !bug(BugStartOnTake) {
		return
	}
	if step := h.pack.Steps()[h.tok.Pos]; step.Once && !bug(BugOnceUnjournaled) {
		rec := StartRecord{Workflow: wf, Token: h.tok}
		if n.started[rec] {
			// It may have run before this node restarted: never again.
			n.drop(wf, h)
			return
		}
		n.started[rec] = true
		h.startLSN = n.env.Append(rec)
		n.env.Sync()
		return
	}
	n.run(wf, h)
}

// run starts the held step's service.
func (n *Node) run(wf uint64, h *holding) {
	h.started = true
	step := h.pack.Steps()[h.tok.Pos]
	if step.Branches != nil {
		n.fork(wf, h, step)
		return
	}
	n.env.Execute(sim.Execution{Workflow: wf, Pos: h.tok.Pos, Service: step.Service, Once: step.Once, Token: h.tok.String()})
	n.env.SetTimer(key(wf, timerRun), step.Duration)
}

func (n *Node) onBeatTimer(wf uint64) {
	h := n.held[wf]
	if h == nil {
		return
	}
	if h.finished && n.props[wf] == nil {
		// Its hand-over is no longer driven from here (a re-route took
		// its place): stop vouching for the position, so that its
		// acceptors re-route it if need be.
		n.drop(wf, h)
		return
	}
	for _, id := range h.group { // none yet while the Take is on its way
		n.env.Send(id, &Beat{Workflow: wf, Token: h.tok, Waiting: !h.started})
	}
	if !h.started && h.pack != nil && n.env.Now()-h.since >= 2*n.cfg.RetryEvery {
		// The proposer may have died before a majority held the token:
		// the holder completes the write itself (the same value, so an
		// acceptor that holds it answers again, and one that moved on
		// refuses it).
		v := Value{Token: h.tok, Holder: n.env.ID(), Pack: h.pack}
		for _, id := range h.group {
			if !h.accepts[id] {
				n.env.Send(id, &Accept{Workflow: wf, Group: h.group, Value: v})
			}
		}
	}
	n.env.SetTimer(key(wf, timerBeat), n.cfg.BeatEvery)
}

// onRan hands the next position on: to a receiver, or to the acceptors
// as the workflow's end.
func (n *Node) onRan(wf uint64) {
	h := n.held[wf]
	if h == nil || !h.started || h.finished || h.fork != nil {
		return
	}
	n.handOn(wf, h, Output(h.pack.Steps()[h.tok.Pos], h.tok.Pos), false)
}

// handOn proposes the chain's next position with the held step's output
// (or the chain's end as failed, when a FORK's branch failed).
func (n *Node) handOn(wf uint64, h *holding, out string, failed bool) {
	h.finished = true
	steps := h.pack.Steps()
	next := Value{
		Token: Token{Ballot: h.tok.Ballot, Pos: h.tok.Pos + 1},
		Pack:  &Pack{Workflow: h.pack.Workflow, Chain: h.pack.Chain, Outputs: append(slices.Clone(h.pack.Outputs), out)},
	}
	if failed {
		next.End, next.Holder = Failed, -1
	} else if next.Token.Pos == len(steps) {
		next.End, next.Holder = Done, -1
	} else {
		next.Holder = n.pickReceiver(h.group)
	}
	n.propose(wf, h.group, next, purposeHandOver)
}

// drop ends a holding (its hand-over was chosen, or it was superseded).
func (n *Node) drop(wf uint64, h *holding) {
	if n.held[wf] == h {
		delete(n.held, wf)
		n.env.CancelTimer(key(wf, timerBeat))
		n.env.CancelTimer(key(wf, timerRun))
		n.env.CancelTimer(key(wf, timerJoin))
	}
}
