package testnet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/bedwe/bedwe/internal/tier"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/testnet"
)

// TestQuickStepRunAgainAfterAKillInItsWindow is held H4 with real `bedwe
// node` processes: the holder of a quick step (not once=true, quicker
// than held.RerunCost) is SIGKILLed right after the step ran and before it
// handed anything on — the window in which that step's outcome is not
// journaled (node.FailpointKillAfterRan fires there; no signal from
// outside can hit it on purpose) — and restarted. The step runs again, at
// least once (after the restart, or re-routed by a guardian meanwhile),
// the workflow succeeds, and no other step runs twice — the at-most-once
// step after it (o) included. Counted from the services' invocation
// records, not from the result.
func TestQuickStepRunAgainAfterAKillInItsWindow(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "fired")
	t.Setenv(node.FailpointKillAfterRan, "qk:"+marker)
	m := up(t, testnet.Options{Nodes: 3, Zones: 3})
	st := submitAt0(t, m, "a qk o[once=true] b")

	victim := firedOn(t, m, marker, "the holder of qk was never killed by the failpoint")
	restartKilled(t, m, victim)
	awaitSucceeded(t, m, st.ID, fmt.Sprintf("the holder of qk was killed and restarted (node %d)", victim))
	runs := runsOf(t, m, st.ID)
	t.Logf("node %d killed after qk ran; runs: %v", victim, runs)
	if runs["qk"] < 2 {
		t.Errorf("qk ran %d times; its holder was killed after it ran and before its outcome was journaled, so it must run again", runs["qk"])
	}
	for _, svc := range []string{"a", "o", "b"} {
		if runs[svc] != 1 {
			t.Errorf("%s ran %d times, want once (o is at-most-once)", svc, runs[svc])
		}
	}
}

// TestRefusedHandOverLeavesTheSenderItsWork is node/held H7 with real
// `bedwe node` processes: the receiver
// of b's hand-over settles it — the guardians of o, the step before,
// record their release as taken by that receiver — and then refuses it as
// unsettled (node.FailpointRefuseSettled: as when one guardian's answer
// arrives too late), and the sender, o's holder, is SIGKILLed right after
// that refusal (node.FailpointKillAfterUnsettled) and restarted. Nobody
// holds b. The restarted holder hears from o's guardians that a successor
// released them; dropping o on that word alone would lose the workflow
// with nothing run (H7). It asks that successor, which never took b, goes
// on, and the workflow succeeds with every step run
// exactly once — o is at-most-once, its outcome journaled before its
// hand-off (H4), so it is not run again. Counted from the services'
// invocation records, not from the result.
func TestRefusedHandOverLeavesTheSenderItsWork(t *testing.T) {
	m, st, victim, receiver := refusedThenSenderKilled(t, 3, "a o[once=true] b", "b")
	restartKilled(t, m, victim)
	awaitSucceeded(t, m, st.ID, fmt.Sprintf("the holder of o (node %d) was killed after node %d refused b's settled hand-over, and restarted", victim, receiver))
	runs := runsOf(t, m, st.ID)
	t.Logf("node %d refused b's hand-over after settling it; node %d, o's holder, killed and restarted; runs: %v", receiver, victim, runs)
	for _, svc := range []string{"a", "o", "b"} {
		if runs[svc] != 1 {
			t.Errorf("%s ran %d times, want once", svc, runs[svc])
		}
	}
}

// TestSenderKilledForGoodAfterARefusedHandOverIsRerouted is node/guard
// G17 on real processes: the receiver
// of o (at-most-once) settles its hand-over, so the guardians of c record
// its release, and refuses it as unsettled all the same
// (node.FailpointRefuseSettled); c's holder, the sender, is SIGKILLed at
// that refusal (node.FailpointKillAfterUnsettled) and never comes back.
// The guardians kept their copies as pending, ask the receiver once the
// holder is silent, hear that it never took o, and re-route c: the
// workflow succeeds, c runs again (its holder died before handing it on),
// and a, o and b run once — the refused receiver never ran o, and one
// chain went on, not two. Guardians that dropped their copies with the
// release (no G17) would leave the workflow running with nobody holding
// it.
func TestSenderKilledForGoodAfterARefusedHandOverIsRerouted(t *testing.T) {
	tier.Faults(t)
	m, st, victim, receiver := refusedThenSenderKilled(t, 4, "a c o[once=true] b", "o")
	if err := m.Kill(victim, syscall.SIGKILL); err != nil { // waits until it is gone; never restarted
		t.Fatal(err)
	}
	ask := allBut(m, victim)
	awaitSucceededAt(t, m, ask, st.ID, fmt.Sprintf("the holder of c (node %d) was killed for good after node %d refused o's settled hand-over", victim, receiver))
	runs := runsOf(t, m, st.ID)
	t.Logf("node %d refused o's hand-over after settling it; node %d, c's holder, killed for good; runs: %v", receiver, victim, runs)
	for _, svc := range []string{"a", "o", "b"} {
		if runs[svc] != 1 {
			t.Errorf("%s ran %d times, want once", svc, runs[svc])
		}
	}
	if runs["c"] != 2 {
		t.Errorf("c ran %d times, want twice (its holder died before handing it on, and it was re-routed)", runs["c"])
	}
}

// TestARestartedGuardianStillAsksAboutItsPendingCopy is node/guard G17
// across a restart: the receiver of o
// (at-most-once) settles its hand-over, so the guardians of c record its
// release and keep their copies pending, and refuses it as unsettled all
// the same (node.FailpointRefuseSettled); c's holder, the sender, stalls
// at that refusal (node.FailpointStallAfterUnsettled). Every node but the
// sender is SIGKILLed and restarted (the guardians of c among them), and
// then the sender is SIGKILLed for good. The restarted guardians read
// their pending copies back from the journal, find the holder silent, ask
// the receiver, hear that it never took o, and re-route c: the workflow
// succeeds, c runs twice and a, o and b once. A pending copy kept in
// memory only would leave the restarted guardians just the tombstone, and
// the workflow running with nobody holding it.
func TestARestartedGuardianStillAsksAboutItsPendingCopy(t *testing.T) {
	tier.Faults(t)
	dir := t.TempDir()
	refused, stalled := filepath.Join(dir, "refused"), filepath.Join(dir, "stalled")
	t.Setenv(node.FailpointRefuseSettled, "o:"+refused)
	t.Setenv(node.FailpointStallAfterUnsettled, "o:"+stalled)
	m := up(t, testnet.Options{Nodes: 4, Zones: 4})
	st := submitAt0(t, m, "a c o[once=true] b")
	sender := firedOn(t, m, stalled, "the sender of o never stalled after its hand-over was refused")
	receiver := firedOn(t, m, refused, "o's hand-over was never refused after it settled")
	others := allBut(m, sender)
	// All at once, like a blackout of every zone but the sender's: no
	// guardian keeps its memory while another restarts.
	for _, i := range others {
		if err := m.Kill(i, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range others {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := m.Restart(ctx, i)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Kill(sender, syscall.SIGKILL); err != nil { // never restarted
		t.Fatal(err)
	}
	awaitSucceededAt(t, m, others, st.ID, fmt.Sprintf("node %d refused o's settled hand-over, every other node restarted, and the sender (node %d) killed for good", receiver, sender))
	runs := runsOf(t, m, st.ID)
	t.Logf("node %d refused o's hand-over after settling it; nodes %v restarted; node %d, c's holder, killed for good", receiver, others, sender)
	wantRuns(t, st.ID, runs, map[string]int{"a": 1, "c": 2, "o": 1, "b": 1})
}

// TestHolderKilledAfterItsHandOffWasTakenDropsIt is the other side of
// node/held H7: the holder of a quick step (qk: not at-most-once, its
// outcome journaled only with its hand-on, H4) is SIGKILLed right after
// the receiver of the next step (sleepB, 5 s: the workflow is still
// running when the holder is back) acknowledged the hand-off and before
// the holder journaled it (node.FailpointKillAfterTaken), and restarted.
// The guardians of qk say a successor released them, and that successor
// says it holds sleepB, so the holder drops qk instead of running it
// again: each step runs once. A successor that answered "never took" for
// work it holds makes qk run twice here (tried).
func TestHolderKilledAfterItsHandOffWasTakenDropsIt(t *testing.T) {
	tier.Faults(t)
	killed := filepath.Join(t.TempDir(), "killed")
	t.Setenv(node.FailpointKillAfterTaken, "sleepB:"+killed)
	m := up(t, testnet.Options{Nodes: 3, Zones: 3})
	st := submitAt0(t, m, "a qk sleepB", "--input", `{"sleep_ms": 5000}`)
	victim := firedOn(t, m, killed, "the holder of qk was never killed after sleepB's hand-off was taken")
	restartKilled(t, m, victim)
	awaitSucceeded(t, m, st.ID, fmt.Sprintf("the holder of qk (node %d) was killed after sleepB's hand-off was taken, and restarted", victim))
	runs := runsOf(t, m, st.ID)
	t.Logf("node %d, qk's holder, killed after sleepB's hand-off was taken, and restarted; runs: %v", victim, runs)
	for _, svc := range []string{"a", "qk", "sleepB"} {
		if runs[svc] != 1 {
			t.Errorf("%s ran %d times, want once", svc, runs[svc])
		}
	}
}

// refusedThenSenderKilled starts a testnet of nodes nodes and submits wf
// to node 0 with two failpoints on service: its receiver refuses the
// settled hand-over (node.FailpointRefuseSettled) and the sender SIGKILLs
// itself at that refusal (node.FailpointKillAfterUnsettled). It returns
// once both fired, with the killed sender and the refusing receiver.
func refusedThenSenderKilled(t *testing.T, nodes int, wf, service string) (m *testnet.Manifest, st api.Status, victim, receiver int) {
	t.Helper()
	dir := t.TempDir()
	refused, killed := filepath.Join(dir, "refused"), filepath.Join(dir, "killed")
	t.Setenv(node.FailpointRefuseSettled, service+":"+refused)
	t.Setenv(node.FailpointKillAfterUnsettled, service+":"+killed)
	m = up(t, testnet.Options{Nodes: nodes, Zones: nodes})
	st = submitAt0(t, m, wf)
	victim = firedOn(t, m, killed, "the sender of "+service+" was never killed after its hand-over was refused")
	receiver = firedOn(t, m, refused, service+"'s hand-over was never refused after it settled")
	return m, st, victim, receiver
}

// firedOn waits for a failpoint's marker (written just before it fires;
// nothing announces it otherwise) and returns the index of the node it
// fired on.
func firedOn(t *testing.T, m *testnet.Manifest, marker, never string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var dataDir []byte
	for {
		b, err := os.ReadFile(marker)
		if err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			dataDir = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(never)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, nd := range m.Nodes {
		if nd.DataDir == strings.TrimSpace(string(dataDir)) {
			return i
		}
	}
	t.Fatalf("the failpoint fired on %q, no node of the testnet", dataDir)
	return -1
}

// restartKilled waits until node i (killed by a failpoint) is gone and
// starts it again on its data directory.
func restartKilled(t *testing.T, m *testnet.Manifest, i int) {
	t.Helper()
	if err := m.Kill(i, syscall.SIGKILL); err != nil { // waits until it is gone
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Restart(ctx, i); err != nil {
		t.Fatal(err)
	}
}

// awaitSucceeded waits up to two minutes for workflow id to end, and
// fails unless it succeeded; after says what happened to it.
func awaitSucceeded(t *testing.T, m *testnet.Manifest, id, after string) {
	t.Helper()
	awaitSucceededAt(t, m, []int{0}, id, after)
}

// awaitSucceededAt is awaitSucceeded asking the nodes ask in turn (a node
// that keeps no copy of the workflow's record asks its origin, which may
// be gone).
func awaitSucceededAt(t *testing.T, m *testnet.Manifest, ask []int, id, after string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for try := 0; ; try++ {
		i := ask[try%len(ask)]
		out, _, code := bedwe(t, "", "result", id, "--testnet", m.Dir, "--node", strconv.Itoa(i), "-o", "json")
		if code == 0 || code == 2 {
			var final api.Status
			if err := json.Unmarshal([]byte(out), &final); err != nil {
				t.Fatalf("result: %v\n%s", err, out)
			}
			if final.State != api.StateSucceeded {
				t.Fatalf("workflow %s after %s: %s %s", id, after, final.State, final.Error)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s still running 2 minutes after %s", id, after)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runsOf counts the invocations of each service for workflow id, from the
// testnet's services' records.
func runsOf(t *testing.T, m *testnet.Manifest, id string) map[string]int {
	t.Helper()
	recs, err := testnet.ReadInvocations(filepath.Join(m.Dir, testnet.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, r := range recs {
		if r.Workflow == id {
			runs[r.Service]++
		}
	}
	return runs
}

// wantRuns checks runs (runsOf's counts for workflow id) against want:
// every service named there ran exactly that many times.
func wantRuns(t *testing.T, id string, runs, want map[string]int) {
	t.Helper()
	t.Logf("%s: runs %v", id, runs)
	for _, svc := range slices.Sorted(maps.Keys(want)) {
		if runs[svc] != want[svc] {
			t.Errorf("%s: %s ran %d times, want %d", id, svc, runs[svc], want[svc])
		}
	}
}

// submitAt0 submits wf to node 0 of m with extra arguments, and fails t
// unless it was accepted.
func submitAt0(t *testing.T, m *testnet.Manifest, wf string, extra ...string) api.Status {
	t.Helper()
	args := append([]string{"submit", "-", "--testnet", m.Dir, "--node", "0", "-o", "json"}, extra...)
	stdout, stderr, code := bedwe(t, wf, args...)
	var st api.Status
	if code != 0 || json.Unmarshal([]byte(stdout), &st) != nil || st.ID == "" {
		t.Fatalf("submit: exit %d: %s %s", code, stdout, stderr)
	}
	return st
}

// allBut lists the indexes of every node of m but node i (a killed one).
func allBut(m *testnet.Manifest, i int) []int {
	var out []int
	for j := range m.Nodes {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}
