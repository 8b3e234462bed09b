package testnet_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/testnet"
)

// TestNetnsGuardiansCutFromEachOtherRerouteOnce is reliability-core Left
// undone 24's first window (node/guard G20), made by a real fault on real
// links: sleepC's two guardians — its sender, the primary, and the backup
// its holder recruited — are cut from each other (and only from each
// other), and the holder is SIGKILLed. Each guardian finds the holder
// silent and cannot hear the other, while both reach the rest of the mesh:
// the backup stands in for the primary it cannot reach (G3), and the
// primary goes ahead once its co-guardian stayed silent (coGuardianWait).
// Both re-route. A re-routed chain's first receiver settles the re-route
// at the attempt's other guardians (G20): a guardian that re-routed the
// attempt too (or claimed to) refuses it, but a backup that stood in gives
// way to its primary, so one chain goes on. Counted
// from the services' records: a, o (at most once) and b run once, sleepC
// twice (its holder died), and at most one re-route's hand-off was taken.
// Before G20 both re-routes' hand-offs were taken in 3 of 4 runs, and
// sleepC ran three times: two chains.
func TestNetnsGuardiansCutFromEachOtherRerouteOnce(t *testing.T) {
	guardiansCutFromEachOther(t, false)
}

// TestNetnsGuardiansCutFromEachOtherBothClaim is the same fault with the
// first guardian to claim its re-route stalled before it hands the pack on
// (node.FailpointStallAfterClaim, 12 s): the other claims the same attempt
// meanwhile, so both re-routes are in flight at once — the case where a
// stood-in backup gives way to its primary's settle and the primary refuses
// the backup's (G20). Both must have claimed (two reroute events), and one
// chain goes on.
func TestNetnsGuardiansCutFromEachOtherBothClaim(t *testing.T) {
	guardiansCutFromEachOther(t, true)
}

// guardiansCutFromEachOther is the fault of the two tests above; with
// bothClaim, the first claim stalls.
func guardiansCutFromEachOther(t *testing.T, bothClaim bool) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "stalled")
	if bothClaim {
		t.Setenv(node.FailpointStallAfterClaim, "sleepC:"+marker)
	}
	m := upNetns(t, testnet.Options{Nodes: 6, Zones: 3, NodeServices: guardiansApart})
	// With bothClaim, sleepC outlasts the stall: the chain of the guardian
	// that claimed second is still running it when the first goes on.
	sleep := 4000
	if bothClaim {
		sleep = 20000
	}
	st := submitAt0(t, m, "a sleepC o[once=true] b", "--input", fmt.Sprintf(`{"sleep_ms": %d}`, sleep))
	var accepted events.Event
	holder := awaitEvent(t, m, "a node accepted sleepC", func(e events.Event) bool {
		if e.Type == events.Accepted && e.Workflow == st.ID && e.Step == "1" {
			accepted = e
			return true
		}
		return false
	})
	primary, backup := nodeOf(m, accepted.From), -1
	if len(accepted.Guardians) > 0 {
		backup = nodeOf(m, accepted.Guardians[0])
	}
	if primary < 0 || backup < 0 || primary == holder || backup == holder || primary == backup {
		t.Fatalf("sleepC held by node %d, guarded by nodes %d and %d: want two guardians apart from the holder (a and sleepC run on different nodes)", holder, primary, backup)
	}
	if err := m.Partition([]int{primary}, []int{backup}); err != nil {
		t.Fatal(err)
	}
	if err := m.Kill(holder, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: sleepC held by node %d (killed), guarded by node %d (primary) and node %d (backup), cut from each other", st.ID, holder, primary, backup)
	ask := allBut(m, holder)
	awaitSucceededAt(t, m, ask, st.ID, fmt.Sprintf("sleepC's holder (node %d) was killed and its guardians cut from each other", holder))
	if err := m.Heal(); err != nil {
		t.Fatal(err)
	}

	// sleepC twice: its holder died before handing it on.
	wantRuns(t, st.ID, runsOf(t, m, st.ID), map[string]int{"a": 1, "o": 1, "b": 1, "sleepC": 2})
	// Every re-route of sleepC and whether its hand-off was taken.
	var rerouted, taken []int
	for i, nd := range m.Nodes {
		evs, _ := events.Read(nd.Events())
		for _, e := range evs {
			if e.Workflow != st.ID || e.Step != "1" || e.Attempt != 1 {
				continue
			}
			if e.Type == events.Reroute {
				rerouted = append(rerouted, i)
			}
			if e.Type == events.Handoff && e.Outcome == events.OutcomeOK && (i == primary || i == backup) {
				taken = append(taken, i)
			}
		}
	}
	t.Logf("%s: re-routed by nodes %v; hand-offs of the new attempt taken from nodes %v", st.ID, rerouted, taken)
	if len(taken) > 1 {
		t.Errorf("%s: both guardians' re-routes were taken (nodes %v): two chains", st.ID, taken)
	}
	if bothClaim {
		stalled := firedOn(t, m, marker, "no guardian claimed a re-route of sleepC within a minute")
		t.Logf("%s: node %d stalled after its claim", st.ID, stalled)
		if !slices.Contains(rerouted, primary) || !slices.Contains(rerouted, backup) {
			t.Errorf("%s: re-routed by nodes %v; want both guardians to have claimed (the first stalled after its claim)", st.ID, rerouted)
		}
	}
}

// guardiansApart is the services of a testnet where a runs on nodes 1
// and 2 only and sleep* on nodes 3 to 5 only, so that sleepC's primary
// guardian (the node that ran a) is never its holder; node 0, the origin,
// runs nothing. o and b run anywhere else, and every node records its
// executions.
func guardiansApart(i int) string {
	svc := "version: 1\nrecord: " + testnet.RecordFile + "\npatterns:\n"
	switch {
	case i == 1 || i == 2:
		svc += "  - {match: \"a\", kind: echo}\n"
	case i >= 3:
		svc += "  - {match: \"sleep*\", kind: sleep, from_request: true, field: sleep_ms, duration: 100ms}\n"
	}
	if i > 0 {
		svc += "  - {match: \"o\", kind: echo}\n  - {match: \"b\", kind: echo}\n"
	}
	return svc
}

// nodeOf is the index of the node with peer ID id, or -1.
func nodeOf(m *testnet.Manifest, id string) int {
	return slices.IndexFunc(m.Nodes, func(nd testnet.Node) bool { return nd.PeerID == id })
}
