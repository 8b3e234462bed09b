package node

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/bedwe/bedwe/pack"
)

// A guardian whose release failed while another guardian of the step
// answered is asked again only for a guard item that is not Lenient, and
// when the settle budget has no room left for the call the hand-over is
// unsettled instead of taken on the other guardian's word.
func TestAskMissedGuardiansAgainBudget(t *testing.T) {
	n := &Node{log: slog.New(slog.DiscardHandler)}
	items := []pack.Settle{
		{Kind: pack.SettleGuard, Key: "wf|0", Peers: []pack.Peer{{ID: "p"}, {ID: "b"}}},
		{Kind: pack.SettleGuard, Key: "wf|1", Peers: []pack.Peer{{ID: "p"}, {ID: "b"}}, Lenient: true},
		{Kind: pack.SettleBranchStarted, Key: "j", Peers: []pack.Peer{{ID: "c1"}, {ID: "c2"}}},
	}
	asked := 0
	run := func(again []tookAnswer) []bool { asked += len(again); return make([]bool, len(again)) }

	took := &tookSet{missed: []tookAnswer{{1, pack.Peer{ID: "p"}}, {2, pack.Peer{ID: "c1"}}}}
	if err := n.askMissedGuardiansAgain(context.Background(), items, took, time.Now().Add(time.Minute), run); err != nil || asked != 0 {
		t.Fatalf("a lenient guard item and a join item: err %v, %d asked again; want nil, 0", err, asked)
	}
	if len(took.missed) != 2 {
		t.Errorf("missed %v, want both kept for completeSettle", took.missed)
	}

	took = &tookSet{missed: []tookAnswer{{0, pack.Peer{ID: "p"}}}}
	if err := n.askMissedGuardiansAgain(context.Background(), items, took, time.Now(), run); !errors.Is(err, errUnsettled) || asked != 0 {
		t.Fatalf("no budget left: err %v, %d asked again; want errUnsettled, 0", err, asked)
	}
}
