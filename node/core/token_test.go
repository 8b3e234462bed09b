package core

import (
	"testing"

	"github.com/bedwe/bedwe/node/sim"
)

func nodeID(n int) sim.NodeID { return sim.NodeID(n) }

// TestTokenOrder checks the one comparison every rule rests on: ballots
// first (epoch, then node), then positions.
func TestTokenOrder(t *testing.T) {
	tok := func(e uint32, n, p int) Token { return Token{Ballot{e, nodeID(n)}, p} }
	for _, c := range []struct {
		a, b Token
		want int
	}{
		{tok(1, 0, 5), tok(1, 0, 5), 0},
		{tok(1, 0, 4), tok(1, 0, 5), -1},
		{tok(1, 0, 9), tok(2, 0, 0), -1}, // a higher ballot beats any position
		{tok(2, 1, 0), tok(2, 0, 7), 1},  // ties of epoch go by node
		{tok(1, -1, 3), tok(1, 0, 0), -1},
	} {
		if got := c.a.Compare(c.b); got != c.want {
			t.Errorf("%s vs %s = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := c.b.Compare(c.a); got != -c.want {
			t.Errorf("%s vs %s = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

// TestExpectedFollowsChoose checks a workflow's fault-free result: a FORK
// joins its branches in order and a CHOICE takes the arm Choose picks
// from the outputs before it.
func TestExpectedFollowsChoose(t *testing.T) {
	w := &Workflow{ID: 3, Steps: []Step{
		{Service: "a"},
		{Service: "FORK", Branches: [][]Step{{{Service: "b"}}, {{Service: "c"}, {Service: "d"}}}},
		{Service: "CHOICE", Choice: true, Branches: [][]Step{{{Service: "x"}}, {{Service: "y"}}}},
	}}
	got := Expected(w, RootChain(3))
	arm := Choose([]string{"a", "[b | c d]"}, 2)
	want := []string{"a", "[b | c d]", ChoiceOutput(arm, []string{[]string{"x", "y"}[arm]})}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("Expected = %q, want %q", got, want)
	}
	if c := BranchChain(3, 1, 1); WorkflowOf(c) != 3 || IsRoot(c) || len(StepsOf(w, c)) != 2 {
		t.Fatalf("branch chain %x: workflow %d, root %v, %d steps", c, WorkflowOf(c), IsRoot(c), len(StepsOf(w, c)))
	}
}
