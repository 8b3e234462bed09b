package core

import (
	"slices"

	"github.com/bedwe/bedwe/node/sim"
)

// Node is one peer's protocol state: the registers it keeps as an
// acceptor, the positions it holds, and the proposals it drives. It does
// no I/O of its own: everything goes through the sim.Host it is handed
// (the simulator, or a runtime over a real transport and journal).
type Node struct {
	cfg Config
	env sim.Host
	// acc holds this node's acceptor registers by workflow.
	acc map[uint64]*acceptor
	// held holds the positions this node runs or waits to run.
	held map[uint64]*holding
	// props holds the proposals this node drives, by workflow.
	props map[uint64]*proposal
	// afterSync holds answers that may leave only once the journal is
	// durable up to their LSN (persist before answering).
	afterSync []deferred
	// heard is when each peer was last heard from (for picking
	// receivers among live peers).
	heard map[sim.NodeID]sim.Time
	// started holds the once steps this node journaled it started.
	started map[StartRecord]bool
	// suspect is when this node last found each peer silent: a receiver
	// is not picked among peers suspected within SuspectAfter × 4.
	suspect map[sim.NodeID]sim.Time
}

type deferred struct {
	lsn sim.LSN
	to  sim.NodeID
	msg sim.Message
}

// New makes a node's machine with the given timing.
func New(cfg Config) *Node { return &Node{cfg: cfg} }

var _ sim.Machine = (*Node)(nil)

// Timer keys: the workflow ID shifted left, and a kind in the low bits.
const (
	timerWatch  = iota + 1 // an acceptor checks its holder's silence
	timerBeat              // a holder beats
	timerRun               // a holder's service finished
	timerResend            // a proposal sends again what is unanswered
	timerJoin              // a FORK's holder asks whether its branches ended
)

func key(wf uint64, kind int) sim.TimerKey { return sim.TimerKey(wf<<3 | uint64(kind)) }

// Boot implements sim.Machine: the registers come back from the journal;
// held positions and proposals do not (their acceptors re-route them).
func (n *Node) Boot(env sim.Host, durable []any) {
	n.env = env
	n.acc = map[uint64]*acceptor{}
	n.held = map[uint64]*holding{}
	n.props = map[uint64]*proposal{}
	n.heard = map[sim.NodeID]sim.Time{}
	n.suspect = map[sim.NodeID]sim.Time{}
	n.started = map[StartRecord]bool{}
	for _, r := range durable {
		switch rec := r.(type) {
		case Record:
			n.acc[rec.Workflow] = &acceptor{rec: rec, durable: true}
		case StartRecord:
			n.started[rec] = true
		}
	}
	for _, wf := range sortedKeys(n.acc) {
		a := n.acc[wf]
		a.heard = env.Now()
		n.watch(wf, a)
	}
}

// Receive implements sim.Machine.
func (n *Node) Receive(env sim.Host, from sim.NodeID, m sim.Message) {
	n.heard[from] = env.Now()
	switch m := m.(type) {
	case *Accept:
		n.onAccept(from, m)
	case *Prepare:
		n.onPrepare(from, m)
	case *Beat:
		n.onBeat(from, m)
	case *Accepted:
		n.onAccepted(from, m)
	case *Reject:
		n.onReject(from, m)
	case *Promise:
		n.onPromise(from, m)
	case *Take:
		n.onTake(from, m)
	case *Took:
		n.onTook(from, m)
	case *Query:
		n.onQuery(from, m)
	case *State:
		n.onState(from, m)
	}
}

// Timer implements sim.Machine.
func (n *Node) Timer(env sim.Host, k sim.TimerKey) {
	wf, kind := uint64(k)>>3, int(k&7)
	switch kind {
	case timerWatch:
		n.onWatch(wf)
	case timerBeat:
		n.onBeatTimer(wf)
	case timerRun:
		n.onRan(wf)
	case timerResend:
		n.onResend(wf)
	case timerJoin:
		n.onJoinTimer(wf)
	}
}

// Synced implements sim.Machine: answers waiting for the journal leave.
func (n *Node) Synced(env sim.Host, lsn sim.LSN) {
	i := 0
	for ; i < len(n.afterSync) && n.afterSync[i].lsn <= lsn; i++ {
		d := n.afterSync[i]
		env.Send(d.to, d.msg)
	}
	n.afterSync = n.afterSync[i:]
	for _, wf := range sortedKeys(n.acc) {
		if a := n.acc[wf]; a.lsn != 0 && a.lsn <= lsn {
			a.durable = true
		}
	}
	for _, wf := range sortedKeys(n.held) {
		if h := n.held[wf]; h.startLSN != 0 && h.startLSN <= lsn && !h.started {
			n.run(wf, h)
		}
	}
}

// persist journals an acceptor's register and returns the LSN an answer
// must wait for.
func (n *Node) persist(a *acceptor) sim.LSN {
	lsn := n.env.Append(a.rec)
	n.env.Sync()
	a.lsn, a.durable = lsn, false
	return lsn
}

// sendAfter sends m once the journal is durable up to lsn.
func (n *Node) sendAfter(lsn sim.LSN, to sim.NodeID, m sim.Message) {
	if bug(BugAnswerBeforeSync) {
		n.env.Send(to, m)
		return
	}
	n.afterSync = append(n.afterSync, deferred{lsn, to, m})
}

// pickReceiver chooses who runs the next position. The holder is kept off
// the workflow's acceptors where it can be, so that one crash costs a
// position its holder or one of its three copies, not both; among the
// rest it prefers peers heard from lately, and it skips peers found
// silent lately (and not heard from since) and those in avoid.
func (n *Node) pickReceiver(group []sim.NodeID, avoid ...sim.NodeID) sim.NodeID {
	now := n.env.Now()
	var tiers [4][]sim.NodeID // outside the group: heard, not; inside: heard, not
	for i := range n.env.Nodes() {
		id := sim.NodeID(i)
		if slices.Contains(avoid, id) {
			continue
		}
		if t, ok := n.suspect[id]; ok && now-t < 4*n.cfg.SuspectAfter && n.heard[id] <= t {
			continue
		}
		tier := 0
		if t, ok := n.heard[id]; !(ok && now-t < n.cfg.SuspectAfter || id == n.env.ID()) {
			tier = 1
		}
		if slices.Contains(group, id) {
			tier += 2
		}
		tiers[tier] = append(tiers[tier], id)
	}
	for _, t := range tiers {
		if len(t) > 0 {
			return t[n.env.Rand().IntN(len(t))]
		}
	}
	return n.env.ID()
}

// PickGroup chooses a workflow's acceptors: GroupSize nodes, one a zone
// while zones last.
func (n *Node) PickGroup() []sim.NodeID {
	perm := n.env.Rand().Perm(n.env.Nodes())
	var group []sim.NodeID
	zones := map[int]bool{}
	for _, i := range perm {
		if len(group) == n.cfg.GroupSize {
			break
		}
		if z := n.env.ZoneOf(sim.NodeID(i)); !zones[z] {
			zones[z] = true
			group = append(group, sim.NodeID(i))
		}
	}
	for _, i := range perm {
		if len(group) == n.cfg.GroupSize {
			break
		}
		if !slices.Contains(group, sim.NodeID(i)) {
			group = append(group, sim.NodeID(i))
		}
	}
	return group
}

// Submit starts a workflow at this node, its origin: it proposes the
// first position under the first ballot and tells the client (Report
// "acked") once a majority of the acceptors holds it.
func (n *Node) Submit(w *Workflow) {
	group := n.PickGroup()
	c := RootChain(w.ID)
	v := Value{
		Token:  Token{Ballot: Ballot{Epoch: 1, Node: n.env.ID()}, Pos: 0},
		Holder: n.pickReceiver(group),
		Pack:   &Pack{Workflow: w, Chain: c},
	}
	if len(w.Steps) == 0 {
		v.End, v.Holder = Done, -1
	}
	n.propose(c, group, v, purposeSubmit)
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
