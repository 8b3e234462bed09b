package explore

import (
	"strings"
	"testing"

	"github.com/bedwe/bedwe/node/core"
	"github.com/bedwe/bedwe/node/sim"
)

// TestCheckerCountsExecutions feeds the checker what a broken protocol
// would do, and requires a violation for each: a once step run twice, one
// token run at two nodes, a step started before a majority held its
// token, and an acknowledged workflow that never ended. Without it a
// checker that counted nothing would let every seed pass.
func TestCheckerCountsExecutions(t *testing.T) {
	c := newChecker()
	w := &core.Workflow{ID: 1, Steps: []core.Step{{Service: "a", Once: true}, {Service: "b"}}}
	c.workflows[1] = w
	chain := core.RootChain(1)
	group := []sim.NodeID{0, 1, 2}
	tok := core.Token{Ballot: core.Ballot{Epoch: 1, Node: 0}, Pos: 0}
	v := core.Value{Token: tok, Holder: 5, Pack: &core.Pack{Workflow: w, Chain: chain}}
	for _, a := range group[:2] {
		c.durable(a, core.Record{Workflow: chain, Group: group, Promised: tok.Ballot, Has: true, Value: v})
	}
	c.report(sim.Report{Kind: "acked", Workflow: 1})
	c.execute(sim.Execution{Workflow: chain, Pos: 0, Service: "a", Once: true, Token: tok.String(), Node: 5})
	c.execute(sim.Execution{Workflow: chain, Pos: 0, Service: "a", Once: true, Token: tok.String(), Node: 6})
	late := core.Token{Ballot: tok.Ballot, Pos: 1}
	c.execute(sim.Execution{Workflow: chain, Pos: 1, Service: "b", Token: late.String(), Node: 7})
	c.end()
	all := strings.Join(c.violations, "\n")
	for _, want := range []string{"once step 0 (a) ran 2 times", "ran at 2 nodes", "which no majority had durably accepted", "acknowledged but not ended"} {
		if !strings.Contains(all, want) {
			t.Errorf("no violation %q; got:\n%s", want, all)
		}
	}
}
