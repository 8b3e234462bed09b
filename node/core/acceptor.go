package core

import "github.com/bedwe/bedwe/node/sim"

// acceptor is one copy of a workflow's register. The rules, all in terms
// of the token's one comparison:
//   - A write (Accept) under a ballot below the promised one is refused.
//   - A write of a token below the held one is refused; of the held token
//     with another value, refused too (the first writer of a token wins);
//     of the held token with the same value, answered again.
//   - A promise (Prepare) is given only to a ballot above the promised one
//     (or the same ballot again, to its own writer).
//   - Every change is journaled, and answered only once durable.
type acceptor struct {
	rec     Record
	durable bool
	lsn     sim.LSN
	// heard is when the holder of the held value was last heard of.
	heard sim.Time
	// watching: a watch timer is pending.
	watching bool
	// seen is the highest epoch heard of in refusals (not journaled: a
	// ballot that is too low is only refused, never unsafe).
	seen uint32
}

func (n *Node) acceptorOf(wf uint64, group []sim.NodeID) *acceptor {
	a := n.acc[wf]
	if a == nil {
		a = &acceptor{rec: Record{Workflow: wf, Group: group}, durable: true, heard: n.env.Now()}
		n.acc[wf] = a
	}
	return a
}

func (n *Node) reject(to sim.NodeID, wf uint64, refused Token, a *acceptor) {
	n.env.Send(to, &Reject{Workflow: wf, Token: refused, Promised: a.rec.Promised, Holds: a.rec.Value.Token})
}

// answer sends m once a's register is durable.
func (n *Node) answer(a *acceptor, to sim.NodeID, m sim.Message) {
	if a.durable {
		n.env.Send(to, m)
		return
	}
	n.sendAfter(a.lsn, to, m)
}

func (n *Node) onAccept(from sim.NodeID, m *Accept) {
	a := n.acceptorOf(m.Workflow, m.Group)
	v := m.Value
	if v.Token.Ballot.Compare(a.rec.Promised) < 0 && !bug(BugNoBallotFence) {
		n.reject(from, m.Workflow, v.Token, a)
		return
	}
	if a.rec.Has {
		switch c := a.rec.Value.Token.Compare(v.Token); {
		case c > 0:
			n.reject(from, m.Workflow, v.Token, a)
			return
		case c == 0 && a.rec.Value.same(v):
			n.answerAccepted(a, from, v)
			return
		case c == 0:
			n.reject(from, m.Workflow, v.Token, a)
			return
		}
	}
	if v.Token.Ballot.Compare(a.rec.Promised) > 0 {
		a.rec.Promised = v.Token.Ballot
	}
	a.rec.Has, a.rec.Value = true, v
	a.heard = n.env.Now()
	n.persist(a)
	n.answerAccepted(a, from, v)
	n.watch(m.Workflow, a)
}

// answerAccepted tells the proposer and the value's holder that a holds v.
func (n *Node) answerAccepted(a *acceptor, from sim.NodeID, v Value) {
	msg := &Accepted{Workflow: a.rec.Workflow, Token: v.Token, Holder: v.Holder}
	n.answer(a, from, msg)
	if v.End == Running && v.Holder != from {
		n.answer(a, v.Holder, msg)
	}
}

func (n *Node) onPrepare(from sim.NodeID, m *Prepare) {
	a := n.acceptorOf(m.Workflow, m.Group)
	switch c := m.Ballot.Compare(a.rec.Promised); {
	case c < 0:
		n.reject(from, m.Workflow, Token{Ballot: m.Ballot, Pos: -1}, a)
		return
	case c > 0:
		a.rec.Promised = m.Ballot
		n.persist(a)
	}
	a.heard = n.env.Now()
	n.answer(a, from, &Promise{Workflow: m.Workflow, Ballot: m.Ballot, Has: a.rec.Has, Value: a.rec.Value})
}

func (n *Node) onBeat(from sim.NodeID, m *Beat) {
	a := n.acc[m.Workflow]
	if a == nil {
		return
	}
	if m.Token.Ballot.Compare(a.rec.Promised) < 0 {
		n.reject(from, m.Workflow, m.Token, a) // a superseded holder: stop
		return
	}
	if !m.Waiting && (!a.rec.Has || m.Token.Compare(a.rec.Value.Token) >= 0) {
		// A holder that runs this token or a later one. A holder still
		// waiting for a majority does not count: if it never gets one,
		// its position must be re-routed.
		a.heard = n.env.Now()
	}
	if m.Waiting && a.rec.Has && a.rec.Value.Token == m.Token {
		n.answer(a, from, &Accepted{Workflow: m.Workflow, Token: m.Token, Holder: a.rec.Value.Holder})
	}
}

// rank is this node's place in the workflow's group: rank r re-routes
// r × Stagger later than rank 0, so that one acceptor usually goes first
// (a duel is safe, only slower).
func (n *Node) rank(a *acceptor) int {
	if r := inGroup(a.rec.Group, n.env.ID()); r >= 0 {
		return r
	}
	return len(a.rec.Group)
}

func (n *Node) patience(a *acceptor) sim.Time {
	return n.cfg.SuspectAfter + sim.Time(n.rank(a))*n.cfg.Stagger
}

// watch arms a's silence check while it holds a running position.
func (n *Node) watch(wf uint64, a *acceptor) {
	if a.watching || !a.rec.Has || a.rec.Value.End != Running {
		return
	}
	a.watching = true
	n.env.SetTimer(key(wf, timerWatch), n.patience(a))
}

func (n *Node) onWatch(wf uint64) {
	a := n.acc[wf]
	if a == nil {
		return
	}
	a.watching = false
	if !a.rec.Has || a.rec.Value.End != Running {
		return
	}
	if silent := n.env.Now() - a.heard; silent < n.patience(a) {
		a.watching = true
		n.env.SetTimer(key(wf, timerWatch), n.patience(a)-silent)
		return
	}
	a.heard = n.env.Now()
	n.suspect[a.rec.Value.Holder] = n.env.Now()
	n.reroute(wf, a.rec.Group, 0)
	n.watch(wf, a)
}
