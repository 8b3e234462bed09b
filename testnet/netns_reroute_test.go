package testnet_test

import (
	"fmt"
	"github.com/bedwe/bedwe/internal/tier"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/testnet"
)

// TestNetnsGuardiansCutFromEachOtherRerouteOnce is node/guard G20 made by
// a real fault on real links: sleepC's two guardians — its sender, the primary, and the backup
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
// Without G20 both re-routes' hand-offs are usually taken, and sleepC
// runs three times: two chains.
func TestNetnsGuardiansCutFromEachOtherRerouteOnce(t *testing.T) {
	tier.Faults(t)
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
	tier.Faults(t)
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
	holder, primary, backup := guardiansOfStep1(t, m, st.ID)
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
	rerouted, taken := reroutesOfStep1(m, st.ID, primary, backup)
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

// reroutesOfStep1 reads every node's events for the re-routes of step 1
// of workflow id at attempt 1 (the nodes that claimed one) and the
// re-routes' hand-offs that were taken, from the guardians given: a second
// hand-off taken is a second live chain.
func reroutesOfStep1(m *testnet.Manifest, id string, guardians ...int) (rerouted, taken []int) {
	for i, nd := range m.Nodes {
		evs, _ := events.Read(nd.Events())
		for _, e := range evs {
			if e.Workflow != id || e.Step != "1" || e.Attempt != 1 {
				continue
			}
			if e.Type == events.Reroute {
				rerouted = append(rerouted, i)
			}
			if e.Type == events.Handoff && e.Outcome == events.OutcomeOK && slices.Contains(guardians, i) {
				taken = append(taken, i)
			}
		}
	}
	return rerouted, taken
}

// recordedServices is a services file that records every execution
// (testnet.RecordFile) and offers the patterns given, one YAML flow
// mapping each.
func recordedServices(patterns ...string) string {
	svc := "version: 1\nrecord: " + testnet.RecordFile + "\npatterns:\n"
	for _, p := range patterns {
		svc += "  - " + p + "\n"
	}
	return svc
}

// sleepOnRequest is the sleep* pattern of these tests: as long as the
// workflow input's sleep_ms says.
const sleepOnRequest = `{match: "sleep*", kind: sleep, from_request: true, field: sleep_ms, duration: 100ms}`

// guardiansApart is the services of a testnet where a runs on nodes 1
// and 2 only and sleep* on nodes 3 to 5 only, so that sleepC's primary
// guardian (the node that ran a) is never its holder; node 0, the origin,
// runs nothing. o and b run anywhere else, and every node records its
// executions.
func guardiansApart(i int) string {
	switch {
	case i == 0:
		return recordedServices()
	case i <= 2:
		return recordedServices(`{match: "a", kind: echo}`, `{match: "o", kind: echo}`, `{match: "b", kind: echo}`)
	}
	return recordedServices(sleepOnRequest, `{match: "o", kind: echo}`, `{match: "b", kind: echo}`)
}

// nodeOf is the index of the node with peer ID id, or -1.
func nodeOf(m *testnet.Manifest, id string) int {
	return slices.IndexFunc(m.Nodes, func(nd testnet.Node) bool { return nd.PeerID == id })
}

// TestNetnsAGuardianCutOffDoesNotRerouteAStepThatMovedOn is node/guard
// G21 on real links: sleepC's primary
// guardian (the node that ran a) is cut from its co-guardian and from the
// nodes that run o, and only from those. sleepC's holder hands o on — o's
// receiver releases the backup, and cannot reach the primary — and is
// SIGKILLed right after that hand-off was taken
// (node.FailpointKillAfterTaken), before it releases anyone itself. The
// backup confirms the release (the receiver says it took o); the primary,
// which heard of none of it, finds the holder silent, cannot ask its
// co-guardian, and re-routes sleepC to a node it still reaches. That
// node settles the re-route at the backup (G20), which answers that the
// attempt moved on, its release confirmed: the re-route is refused, and
// sleepC runs once. Without G21 the backup would accept it, and sleepC
// would run a second time in a second chain. The test fails unless the primary did
// re-route (the fault was made).
func TestNetnsAGuardianCutOffDoesNotRerouteAStepThatMovedOn(t *testing.T) {
	tier.Faults(t)
	killed := filepath.Join(t.TempDir(), "killed")
	t.Setenv(node.FailpointKillAfterTaken, "o:"+killed)
	m := upNetns(t, testnet.Options{Nodes: 8, Zones: 4, NodeServices: successorsApart})
	// slow (20 s) keeps the workflow running while the primary decides:
	// one that ended would be dropped on the origin's word.
	st := submitAt0(t, m, "a sleepC o[once=true] slow", "--input", `{"sleep_ms": 4000}`)
	holder, primary, backup := guardiansOfStep1(t, m, st.ID)
	if primary < 0 || backup < 0 || primary == holder || backup == holder || primary == backup {
		t.Fatalf("sleepC held by node %d, guarded by nodes %d and %d: want two guardians apart from the holder", holder, primary, backup)
	}
	cut := []int{backup}
	for _, i := range []int{6, 7} {
		if i != backup {
			cut = append(cut, i)
		}
	}
	if err := m.Partition([]int{primary}, cut); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: sleepC held by node %d, guarded by node %d (primary, cut from nodes %v) and node %d", st.ID, holder, primary, cut, backup)
	if victim := firedOn(t, m, killed, "sleepC's holder was never killed after o's hand-off was taken"); victim != holder {
		t.Fatalf("the failpoint fired on node %d, not on sleepC's holder (node %d)", victim, holder)
	}
	if err := m.Kill(holder, syscall.SIGKILL); err != nil { // waits until it is gone
		t.Fatal(err)
	}
	rerouted := awaitEvent(t, m, "sleepC's primary guardian re-routing it", func(e events.Event) bool {
		return e.Type == events.Reroute && e.Workflow == st.ID && e.Step == "1"
	})
	t.Logf("%s: sleepC re-routed by node %d", st.ID, rerouted)
	awaitSucceededAt(t, m, allBut(m, holder), st.ID, fmt.Sprintf("sleepC's holder (node %d) was killed after o's hand-off was taken, its primary guardian cut off", holder))
	if err := m.Heal(); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, st.ID, runsOf(t, m, st.ID), map[string]int{"a": 1, "sleepC": 1, "o": 1, "slow": 1})
	// Live chains: the re-route's hand-off must not have been taken (its
	// receiver refused it), or a second chain began, whatever it ran.
	if _, taken := reroutesOfStep1(m, st.ID, primary, backup); len(taken) > 0 {
		t.Errorf("%s: the re-route of sleepC was taken (from nodes %v): a second chain of a step that had moved on", st.ID, taken)
	}
}

// guardiansOfStep1 waits for a node to accept step 1 (path "1") of
// workflow id and returns that holder and the step's two guardians: its
// sender (the primary) and the first backup the holder recruited (-1 if
// none was named).
func guardiansOfStep1(t *testing.T, m *testnet.Manifest, id string) (holder, primary, backup int) {
	t.Helper()
	var accepted events.Event
	holder = awaitEvent(t, m, "a node accepted step 1", func(e events.Event) bool {
		if e.Type == events.Accepted && e.Workflow == id && e.Step == "1" {
			accepted = e
			return true
		}
		return false
	})
	primary, backup = nodeOf(m, accepted.From), -1
	if len(accepted.Guardians) > 0 {
		backup = nodeOf(m, accepted.Guardians[0])
	}
	return holder, primary, backup
}

// successorsApart is the services of a testnet where a runs on nodes 1
// and 2 only, sleep* on nodes 3 to 5 only, and o on nodes 6 and 7 only,
// so that sleepC's primary guardian is never its holder and o's receiver
// is neither sleepC's primary nor a node it could re-route sleepC to.
// Node 0, the origin, runs nothing; slow (20 s) runs on every other node.
func successorsApart(i int) string {
	const slow = `{match: "slow", kind: sleep, duration: 20s}`
	switch {
	case i == 0:
		return recordedServices()
	case i <= 2:
		return recordedServices(`{match: "a", kind: echo}`, slow)
	case i <= 5:
		return recordedServices(sleepOnRequest, slow)
	}
	return recordedServices(`{match: "o", kind: echo}`, slow)
}
