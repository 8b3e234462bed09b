package testnet_test

import (
	"testing"

	"github.com/bedwe/bedwe/testnet"
)

// TestSmokeForkSurvivesSIGKILL is the quick tier's proof on real
// processes: six bedwe nodes in three zones run the chaos workflow (a
// FORK, a join, three at-most-once steps) while the node executing a step
// is killed with SIGKILL. Every workflow must complete with the fault-free
// result, and the services' own invocation records must show no step run
// after it was handed on and no at-most-once step run twice. The fault
// suites (go test -tags faults) run the same checks over every scenario.
func TestSmokeForkSurvivesSIGKILL(t *testing.T) {
	m := up(t, testnet.Options{Nodes: 6, Zones: 3})
	sum := runChaos(t, m, "smoke", testnet.ChaosOptions{Scenario: "executor", Seed: 42})
	if len(sum.KilledPIDs) == 0 {
		t.Fatal("no node was killed")
	}
	if sum.Completed == 0 {
		t.Fatal("no workflow completed")
	}
}
