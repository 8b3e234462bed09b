package core

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bedwe/bedwe/node/sim"
)

// Step is one position of a chain: a service call, or a FORK whose
// branches run in parallel as chains of their own before the chain goes
// on (SYNC).
type Step struct {
	Service string
	// Once: the step must never run twice (a re-route of a position
	// whose once step may have started fails the workflow instead).
	Once bool
	// Duration is how long the service takes.
	Duration sim.Time
	// Branches, when set, make the step a FORK of these chains (each a
	// sequence of service steps), or with Choice a CHOICE among them.
	Branches [][]Step
	// Choice: only one branch runs, the one Choose picks from the
	// outputs before the step (a guard reads those outputs, so every
	// holder of the position picks the same arm).
	Choice bool
}

// Choose is the arm a CHOICE of n arms takes after the given outputs: a
// pure function of them, standing in for the guards, which read only
// the outputs before the CHOICE.
func Choose(outputs []string, n int) int {
	h := uint64(14695981039346656037)
	for _, o := range outputs {
		for i := 0; i < len(o); i++ {
			h ^= uint64(o[i])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	return int(h % uint64(n))
}

// Workflow is what a client submits: an ID and its chain of steps.
type Workflow struct {
	ID    uint64
	Steps []Step
}

// A chain is the root sequence of a workflow or one branch of one of its
// FORKs; every chain has a register of its own. ChainID packs the
// workflow's ID with the FORK's position and the branch (one level).
type ChainID = uint64

// RootChain is a workflow's root chain.
func RootChain(wf uint64) ChainID { return wf << 16 }

// BranchChain is branch b of the FORK at position pos of a workflow.
func BranchChain(wf uint64, pos, b int) ChainID { return wf<<16 | uint64(pos+1)<<8 | uint64(b+1) }

// WorkflowOf is the workflow a chain belongs to; IsRoot says whether it
// is the root chain.
func WorkflowOf(c ChainID) uint64 { return c >> 16 }

// IsRoot reports whether c is a workflow's root chain.
func IsRoot(c ChainID) bool { return c&0xffff == 0 }

// Pack is what the holder of a position needs: the workflow, the chain,
// and the outputs of the chain's steps before it. Packs are immutable
// once sent.
type Pack struct {
	Workflow *Workflow
	Chain    ChainID
	Outputs  []string
}

// Steps are the steps of the pack's chain.
func (p *Pack) Steps() []Step { return StepsOf(p.Workflow, p.Chain) }

// StepsOf are the steps of one chain of a workflow.
func StepsOf(w *Workflow, c ChainID) []Step {
	if IsRoot(c) {
		return w.Steps
	}
	pos, b := int(c>>8&0xff)-1, int(c&0xff)-1
	return w.Steps[pos].Branches[b]
}

// Output is a service step's output: a pure function of the service, so
// the checker knows every workflow's fault-free result.
func Output(s Step, pos int) string { return s.Service }

// ForkOutput is a FORK's output: its branches' outputs, in branch order.
func ForkOutput(branches [][]string) string {
	parts := make([]string, len(branches))
	for i, b := range branches {
		parts[i] = strings.Join(b, " ")
	}
	return "[" + strings.Join(parts, " | ") + "]"
}

// ChoiceOutput is a CHOICE's output: the arm taken and its outputs.
func ChoiceOutput(arm int, outputs []string) string {
	return fmt.Sprintf("{%d: %s}", arm, strings.Join(outputs, " "))
}

// Expected is a chain's fault-free result.
func Expected(w *Workflow, c ChainID) []string {
	steps := StepsOf(w, c)
	out := make([]string, len(steps))
	for i, s := range steps {
		if s.Branches == nil {
			out[i] = Output(s, i)
			continue
		}
		if s.Choice {
			k := Choose(out[:i], len(s.Branches))
			out[i] = ChoiceOutput(k, Expected(w, BranchChain(w.ID, i, k)))
			continue
		}
		var bs [][]string
		for b := range s.Branches {
			bs = append(bs, Expected(w, BranchChain(w.ID, i, b)))
		}
		out[i] = ForkOutput(bs)
	}
	return out
}

// End says whether a register's value ends the workflow.
type End uint8

// Ends of a workflow.
const (
	Running End = iota // a holder runs the step at Pos
	Done               // every step ran; Pack holds the outputs
	Failed             // a once step's holder was lost: failed, not re-run
)

// Value is a chain's register: who holds which position under which
// ballot, with the pack that position needs.
type Value struct {
	Token  Token
	Holder sim.NodeID
	End    End
	Pack   *Pack
}

func (v Value) same(o Value) bool {
	return v.Token == o.Token && v.Holder == o.Holder && v.End == o.End
}

func (v Value) digest() uint64 {
	return sim.Mix(v.Token.digest(), uint64(v.Holder), uint64(v.End))
}

// Record is an acceptor's journaled register for one workflow: written
// whole at every change, so the newest record of a workflow is its state.
type Record struct {
	Workflow uint64
	Group    []sim.NodeID
	Promised Ballot
	Has      bool
	Value    Value
}

// StartRecord is a holder's journaled word that it starts a once step
// under a token: after a restart it never starts that step again (the
// acceptors then re-route the position, which fails the workflow).
type StartRecord struct {
	Workflow uint64
	Token    Token
}

// Messages. Each carries a chain (its field Workflow holds the ChainID:
// a workflow's root chain or one of its FORK's branches) and a token; the
// acceptor compares tokens in one place (acceptor.go).
type (
	// Accept asks an acceptor to write Value (phase 2).
	Accept struct {
		Workflow uint64
		Group    []sim.NodeID
		Value    Value
	}
	// Accepted says the acceptor's register durably holds the token,
	// whose holder is Holder.
	Accepted struct {
		Workflow uint64
		Token    Token
		Holder   sim.NodeID
	}
	// Reject says the acceptor promised a higher ballot, or holds a
	// later token: the sender's chain is superseded.
	Reject struct {
		Workflow uint64
		Token    Token // the token refused
		Promised Ballot
		Holds    Token
	}
	// Take hands the receiver its pack (it runs the step once a majority
	// accepted the token).
	Take struct {
		Workflow uint64
		Group    []sim.NodeID
		Token    Token
		Pack     *Pack
	}
	// Took says the receiver has the pack of the token.
	Took struct {
		Workflow uint64
		Token    Token
	}
	// Prepare asks acceptors to promise a ballot and say what they hold
	// (phase 1 of a re-route).
	Prepare struct {
		Workflow uint64
		Group    []sim.NodeID
		Ballot   Ballot
	}
	// Promise is an acceptor's durable promise of a ballot, with its
	// register.
	Promise struct {
		Workflow uint64
		Ballot   Ballot
		Has      bool
		Value    Value
	}
	// Query asks an acceptor for its register (a FORK's holder learning
	// whether its branches ended).
	Query struct {
		Workflow uint64
	}
	// State is an acceptor's durable register.
	State struct {
		Workflow uint64
		Has      bool
		Value    Value
	}
	// Beat says the holder of a token is alive; Waiting, that it has not
	// heard a majority hold its token yet (an acceptor that holds it
	// answers Accepted again: the first answer may have been lost).
	Beat struct {
		Workflow uint64
		Token    Token
		Waiting  bool
	}
)

// Digest implements sim.Message.
func (m *Accept) Digest() uint64 { return sim.Mix(1, m.Workflow, m.Value.digest()) }

// Digest implements sim.Message.
func (m *Accepted) Digest() uint64 {
	return sim.Mix(2, m.Workflow, m.Token.digest(), uint64(m.Holder))
}

// Digest implements sim.Message.
func (m *Reject) Digest() uint64 {
	return sim.Mix(3, m.Workflow, m.Token.digest(), uint64(m.Promised.Epoch), uint64(m.Promised.Node), m.Holds.digest())
}

// Digest implements sim.Message.
func (m *Take) Digest() uint64 { return sim.Mix(4, m.Workflow, m.Token.digest()) }

// Digest implements sim.Message.
func (m *Took) Digest() uint64 { return sim.Mix(5, m.Workflow, m.Token.digest()) }

// Digest implements sim.Message.
func (m *Prepare) Digest() uint64 {
	return sim.Mix(6, m.Workflow, uint64(m.Ballot.Epoch), uint64(m.Ballot.Node))
}

// Digest implements sim.Message.
func (m *Promise) Digest() uint64 {
	h := uint64(0)
	if m.Has {
		h = m.Value.digest()
	}
	return sim.Mix(7, m.Workflow, uint64(m.Ballot.Epoch), uint64(m.Ballot.Node), h)
}

// Digest implements sim.Message.
func (m *Query) Digest() uint64 { return sim.Mix(9, m.Workflow) }

// Digest implements sim.Message.
func (m *State) Digest() uint64 {
	h := uint64(0)
	if m.Has {
		h = m.Value.digest()
	}
	return sim.Mix(10, m.Workflow, h)
}

// Digest implements sim.Message.
func (m *Beat) Digest() uint64 {
	w := uint64(0)
	if m.Waiting {
		w = 1
	}
	return sim.Mix(8, m.Workflow, m.Token.digest(), w)
}

// Config holds the protocol's timing. Timers drive liveness only: no
// safety decision waits on one.
type Config struct {
	// GroupSize is how many acceptors keep a workflow's register (in
	// distinct zones where the mesh has them); a majority decides.
	GroupSize int
	// BeatEvery is how often a holder beats to its acceptors.
	BeatEvery sim.Time
	// SuspectAfter is the silence after which an acceptor re-routes; the
	// acceptor of rank r waits r × Stagger more, so that one usually goes
	// first.
	SuspectAfter, Stagger sim.Time
	// RetryEvery is how often an unanswered request is sent again.
	RetryEvery sim.Time
	// TakeWait is how long a proposer waits for its receiver to take the
	// pack before it re-routes the position to another receiver.
	TakeWait sim.Time
}

// DefaultConfig is the timing of the simulated mesh (a testnet's).
func DefaultConfig() Config {
	return Config{
		GroupSize:    3,
		BeatEvery:    250 * time.Millisecond,
		SuspectAfter: 1500 * time.Millisecond,
		Stagger:      500 * time.Millisecond,
		RetryEvery:   300 * time.Millisecond,
		TakeWait:     1 * time.Second,
	}
}

// majority is how many of a group make a quorum.
func majority(group []sim.NodeID) int {
	if bug(BugQuorumOfOne) {
		return 1
	}
	return len(group)/2 + 1
}

func inGroup(group []sim.NodeID, id sim.NodeID) int { return slices.Index(group, id) }

// String keeps traces readable (and free of addresses).
func (p *Pack) String() string {
	return fmt.Sprintf("pack(chain %x, %d outputs)", p.Chain, len(p.Outputs))
}
