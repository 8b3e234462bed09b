package testnet_test

import (
	"fmt"
	"github.com/bedwe/bedwe/internal/tier"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/testnet"
)

// TestASenderWhoseGuardiansWereKilledHandsOnToAnotherPeer is I3 ("two
// kills never stall the work") at a sender that lives: both guardians of
// gate (its primary, the node that ran a, and its backup) are SIGKILLed
// while gate runs, and gate's holder, which does not run c, then hands c
// on. c's receivers cannot settle gate at its dead guardians and refuse
// the hand-over as unsettled; after unsettledQuick the holder takes those
// guardians as gone (their items Lenient) and must send the pack again
// with them so marked: sending the pack it had encoded before the
// marking, every receiver would go on refusing and, no peer of its own
// running c, the workflow would stall for minutes (until the sender tried
// itself).
// Counted: a, gate and c each ran once.
func TestASenderWhoseGuardiansWereKilledHandsOnToAnotherPeer(t *testing.T) {
	tier.Faults(t)
	gateOpen := filepath.Join(t.TempDir(), "go")
	m := up(t, testnet.Options{Nodes: 8, Zones: 4, NodeServices: gateApart(gateOpen)})
	st := submitAt0(t, m, "a gate c")
	holder, primary, backup := guardiansOfStep1(t, m, st.ID)
	if primary < 0 || backup < 0 || primary == holder || backup == holder || primary == backup {
		t.Fatalf("gate held by node %d, guarded by nodes %d and %d: want two guardians apart from the holder", holder, primary, backup)
	}
	for _, i := range []int{primary, backup} {
		if err := m.Kill(i, syscall.SIGKILL); err != nil { // waits until it is gone
			t.Fatal(err)
		}
	}
	// Opened at once: gate's holder hands c on before it could recruit
	// new guardians (GuardianLoss), so c's settle names the dead ones.
	if err := os.WriteFile(gateOpen, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live := slices.DeleteFunc(allBut(m, primary), func(i int) bool { return i == backup })
	t.Logf("%s: gate held by node %d; its guardians, nodes %d and %d, killed", st.ID, holder, primary, backup)
	awaitSucceededAt(t, m, live, st.ID, fmt.Sprintf("both guardians of gate (nodes %d and %d) were killed while it ran on node %d", primary, backup, holder))
	wantRuns(t, st.ID, runsOf(t, m, st.ID), map[string]int{"a": 1, "gate": 1, "c": 1})
	// The fault was made: c's hand-over was refused as unsettled first.
	evs, err := events.Read(m.Nodes[holder].Events())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e events.Event) bool {
		return e.Type == events.Handoff && e.Workflow == st.ID && e.Step == "2" && e.Outcome == events.OutcomeRefused && e.Reason == "unsettled"
	}) {
		t.Fatalf("%s: c's hand-over was never refused as unsettled: the guardians' deaths did not reach the settle", st.ID)
	}
}

// gateApart is the services of a testnet where a runs on nodes 1 and 2
// only, gate on nodes 3 and 4 only (it ends once the file gateOpen
// exists), and c on nodes 5 to 7 only; node 0, the origin, runs nothing.
// So gate's holder never runs c itself, and its primary guardian is never
// its holder.
func gateApart(gateOpen string) func(i int) string {
	gate := fmt.Sprintf(`{match: "gate", kind: exec, command: ["/bin/sh", "-c", "while [ ! -e '%s' ]; do sleep 0.05; done; echo '{}'"], timeout: 2m}`, gateOpen)
	return func(i int) string {
		switch {
		case i == 0:
			return recordedServices()
		case i <= 2:
			return recordedServices(`{match: "a", kind: echo}`)
		case i <= 4:
			return recordedServices(gate)
		}
		return recordedServices(`{match: "c", kind: echo}`)
	}
}
