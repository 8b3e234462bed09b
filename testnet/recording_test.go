package testnet_test

import (
	"bytes"
	"fmt"
	"github.com/bedwe/bedwe/internal/tier"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/testnet"
)

// TestACompletionBeingRecordedIsNotRunAgain is node/guard G18 on real
// processes: the origin probes the
// guardians of a completion's last step (b) and stalls before it records
// the completion (node.FailpointStallAfterProbe, 12 s), and b's holder is
// SIGKILLed meanwhile. b's guardians find the holder silent while the
// origin has not recorded anything, and must hold their re-route off until
// its release: the workflow succeeds with a and b run once each, and a
// guardian logged that it waited. Without G18 a guardian would re-route b
// during the stall, b would run a second time, and the origin would then
// record the old chain's completion all the same — a failure a flapping
// link can cause, made here on purpose.
func TestACompletionBeingRecordedIsNotRunAgain(t *testing.T) {
	tier.Faults(t)
	marker := filepath.Join(t.TempDir(), "stalled")
	t.Setenv(node.FailpointStallAfterProbe, "b:"+marker)
	m := up(t, testnet.Options{Nodes: 4, Zones: 4, NodeServices: bApart})
	st := submitAt0(t, m, "a b")
	if origin := firedOn(t, m, marker, "the origin never probed b's completion"); origin != 0 {
		t.Fatalf("the failpoint fired on node %d, want the origin (node 0)", origin)
	}
	holder := ranOn(t, m, st.ID, "b")
	if err := m.Kill(holder, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ask := allBut(m, holder)
	awaitSucceededAt(t, m, ask, st.ID, fmt.Sprintf("b's holder (node %d) was killed while the origin stalled between its probe and its record", holder))
	wantRuns(t, st.ID, runsOf(t, m, st.ID), map[string]int{"a": 1, "b": 1})
	if !anyLogged(m, "a join or an origin is recording the step's next hop") {
		t.Errorf("no guardian logged that it waited for the origin's record: it re-routed during the stall, or did not find the holder silent before it ended (the fault was not made)")
	}
}

// TestABranchEndBeingRecordedIsNotRunAgain is
// TestACompletionBeingRecordedIsNotRunAgain at a join: the join probes the
// guardians of a branch's last step (b) and stalls before it records the
// branch end, and b's holder is SIGKILLed meanwhile. Without G18 a
// flapping node's branch end could be recorded while the branch's last
// step runs again on a re-routed chain.
func TestABranchEndBeingRecordedIsNotRunAgain(t *testing.T) {
	tier.Faults(t)
	marker := filepath.Join(t.TempDir(), "stalled")
	t.Setenv(node.FailpointStallAfterProbe, "b:"+marker)
	m := up(t, testnet.Options{Nodes: 4, Zones: 4, NodeServices: bApart})
	st := submitAt0(t, m, "FORK(b, a) SYNC d")
	killBWhileTheJoinStalls(t, m, st.ID, marker, "the join never probed b's branch end", "between its probe and its record")
	wantRuns(t, st.ID, runsOf(t, m, st.ID), map[string]int{"a": 1, "b": 1, "d": 1})
	if !anyLogged(m, "a join or an origin is recording the step's next hop") {
		t.Errorf("no guardian logged that it waited for the join's record: it re-routed during the stall, or did not find the holder silent before it ended (the fault was not made)")
	}
}

// TestABranchEndRecordedButNotReleasedIsNotRunAgain is what G18 leaves
// open: a join that recorded a branch
// end and did not release the guardians of the branch's last step for
// longer than guard.RecordingHold (here it stalls 30 s after its record,
// node.FailpointStallAfterRecord; a lost release does the same), while
// that step's holder is SIGKILLed. Once the hold is over the guardians may
// re-route, and the workflow has not ended (the other branch, sleepA, runs
// 28 s): before they do, they ask the join's copies whether the branch
// ended (join.BranchEnded), hear that it did, and drop their copies. b and
// d run once and sleepA once, and a guardian logged why it did not
// re-route. Without the question, b would run a second time.
func TestABranchEndRecordedButNotReleasedIsNotRunAgain(t *testing.T) {
	tier.Faults(t)
	marker := filepath.Join(t.TempDir(), "stalled")
	t.Setenv(node.FailpointStallAfterRecord, "b:"+marker)
	m := up(t, testnet.Options{Nodes: 4, Zones: 4, NodeServices: sleepAtOrigin})
	st := submitAt0(t, m, "FORK(b, sleepA) SYNC d", "--input", `{"sleep_ms": 28000}`)
	killBWhileTheJoinStalls(t, m, st.ID, marker, "the join never recorded b's branch end", "between its record and its release")
	wantRuns(t, st.ID, runsOf(t, m, st.ID), map[string]int{"b": 1, "sleepA": 1, "d": 1})
	if !anyLogged(m, "the join recorded the end of this step's branch") {
		t.Errorf("no guardian logged that the join had recorded b's branch end: it re-routed b, or did not find the holder silent before the join released it (the fault was not made)")
	}
}

// killBWhileTheJoinStalls waits for the join of workflow id to stall at its
// failpoint (marker; never says what it means if it does not), SIGKILLs the
// node that ran b (which must not be the join's actor), and waits for the
// workflow to succeed at the other nodes. where says where the join
// stalled, for the messages.
func killBWhileTheJoinStalls(t *testing.T, m *testnet.Manifest, id, marker, never, where string) {
	t.Helper()
	actor := firedOn(t, m, marker, never)
	holder := ranOn(t, m, id, "b")
	if holder == actor {
		t.Fatalf("b ran on node %d, the join's actor: killing it would kill the join too", holder)
	}
	if err := m.Kill(holder, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: b held by node %d, killed while the join at node %d stalled %s", id, holder, actor, where)
	awaitSucceededAt(t, m, allBut(m, holder), id, fmt.Sprintf("b's holder (node %d) was killed while the join (node %d) stalled %s", holder, actor, where))
}

// sleepAtOrigin is the services of a testnet where sleep* and d run on
// node 0 only (the origin, and the join of a FORK submitted there) and b
// on the other nodes only, all recording their executions.
func sleepAtOrigin(i int) string {
	svc := "version: 1\nrecord: " + testnet.RecordFile + "\npatterns:\n"
	if i == 0 {
		return svc + "  - {match: \"sleep*\", kind: sleep, from_request: true, field: sleep_ms, duration: 100ms}\n  - {match: \"d\", kind: echo}\n"
	}
	return svc + "  - {match: \"b\", kind: echo}\n"
}

// anyLogged reports whether any node's log has a line containing s.
func anyLogged(m *testnet.Manifest, s string) bool {
	for _, nd := range m.Nodes {
		if data, _ := os.ReadFile(nd.Log); bytes.Contains(data, []byte(s)) {
			return true
		}
	}
	return false
}

// bApart is the services of a testnet where b never runs on node 0 (the
// origin of the workflows submitted there, and the join of a FORK they
// start with), so that killing b's holder leaves those running.
func bApart(i int) string {
	if i == 0 {
		return "version: 1\nrecord: " + testnet.RecordFile + "\npatterns:\n  - {match: \"a\", kind: echo}\n  - {match: \"d\", kind: echo}\n"
	}
	return ""
}

// ranOn returns the index of the node on which service ran for workflow
// id (its first run), waiting for the record.
func ranOn(t *testing.T, m *testnet.Manifest, id, service string) int {
	t.Helper()
	recs, err := testnet.ReadInvocations(filepath.Join(m.Dir, testnet.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Workflow != id || r.Service != service {
			continue
		}
		for i, nd := range m.Nodes {
			if nd.PeerID == r.Peer {
				return i
			}
		}
		t.Fatalf("%s ran on %s, no node of the testnet", service, r.Peer)
	}
	t.Fatalf("%s has no recorded run of %s", id, service)
	return -1
}
