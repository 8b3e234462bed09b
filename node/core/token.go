package core

import (
	"fmt"

	"github.com/bedwe/bedwe/node/sim"
)

// Ballot is who may write a chain's register and since when: raised only
// by a re-route, to one above every ballot its writer has seen, and tied
// by the writer's node ID (as raft's terms and Paxos' ballots are).
type Ballot struct {
	Epoch uint32
	Node  sim.NodeID
}

// Compare orders ballots: -1, 0 or +1.
func (b Ballot) Compare(o Ballot) int {
	switch {
	case b.Epoch != o.Epoch:
		return cmp(b.Epoch < o.Epoch)
	case b.Node != o.Node:
		return cmp(b.Node < o.Node)
	}
	return 0
}

// Token is a chain's one ordering token: the ballot it was written under
// and the position (the index of the step it hands to). Every message and
// every journaled register carries one, and Compare is the only place
// two are ordered.
type Token struct {
	Ballot Ballot
	Pos    int
}

// Compare orders tokens by ballot, then position: -1, 0 or +1.
func (t Token) Compare(o Token) int {
	if c := t.Ballot.Compare(o.Ballot); c != 0 {
		return c
	}
	switch {
	case t.Pos != o.Pos:
		return cmp(t.Pos < o.Pos)
	}
	return 0
}

func (t Token) String() string { return fmt.Sprintf("%d.%d/%d", t.Ballot.Epoch, t.Ballot.Node, t.Pos) }

func (t Token) digest() uint64 {
	return sim.Mix(uint64(t.Ballot.Epoch), uint64(t.Ballot.Node), uint64(t.Pos))
}

func cmp(less bool) int {
	if less {
		return -1
	}
	return 1
}
