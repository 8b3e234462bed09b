package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/pack"
)

// TestOldActorStopsHandingOnItsContinuation: a join actor whose
// continuation was refused as unsettled (a copy cut off) keeps trying
// receivers; once its copy of the join knows a newer actor (a replica on a
// flapping link took the join over and forwarded, and its receiver settled
// here) it stops, instead of handing on a second continuation that a copy
// which has not heard of the newer actor would let through (join J7/J10:
// the step after the join would run twice). Its own, current continuation still
// goes on.
func TestOldActorStopsHandingOnItsContinuation(t *testing.T) {
	n, stop, _ := runInternalNode(t, t.TempDir(), "")
	defer stop()
	self := n.self()
	const id = "j-old-actor"
	m := join.New(join.Record{ID: id, WorkflowID: "wf-test", Kind: pack.FrameFork,
		Branches: []*join.Body{{Text: "S0"}, {Text: "S1"}},
		Replicas: []pack.Peer{{ID: "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD"}},
		Created:  time.Now().UTC()}, self)
	for b := range 2 {
		m.Step(join.Deliver{Branch: b, OK: true}, self)
	}
	if m.Phase() != join.PhaseDecided || !m.Acting() {
		t.Fatalf("join %s %s, want acting and decided", m.Role(), m.Phase())
	}
	n.joins.add(id, newJoinCopy(m))

	w, err := grammar.Parse("t", []byte("S1"))
	if err != nil {
		t.Fatal(err)
	}
	grammar.AssignPaths(w)
	cont := func() *pack.Pack {
		return &pack.Pack{WorkflowID: "wf-test", Origin: []pack.Peer{self}, Workflow: w, Input: []byte("null"),
			Settle: []pack.Settle{{Kind: pack.SettleJoinForwarded, Key: id, Peers: m.OtherCopies(self.ID), Epoch: 0, Actor: self.ID}}}
	}
	if n.continuationSuperseded(cont()) {
		t.Fatal("the current actor's own continuation taken as superseded")
	}

	// A replica took the join over at epoch 1 and this copy heard of it.
	next := m.Clone()
	next.Step(join.NewActor{Actor: m.Replicas()[0], Epoch: 1}, self)
	n.joins.get(id).cur.Store(next)
	if !n.continuationSuperseded(cont()) {
		t.Fatal("the old actor's continuation not taken as superseded once a newer actor is known")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = n.handoffExcluding(ctx, cont(), nil, nil)
	if !errors.Is(err, errSuperseded) {
		t.Fatalf("hand-off of the old actor's continuation: %v, want superseded before any peer is tried", err)
	}
	if got := n.helds.len(); got != 0 {
		t.Fatalf("%d held records after the refused hand-off, want none", got)
	}
}
