package testnet_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
	stdout, stderr, code := bedwe(t, "a qk o[once=true] b", "submit", "-", "--testnet", m.Dir, "--node", "0", "-o", "json")
	var st api.Status
	if code != 0 || json.Unmarshal([]byte(stdout), &st) != nil || st.ID == "" {
		t.Fatalf("submit: exit %d: %s %s", code, stdout, stderr)
	}

	// The failpoint leaves its marker just before the kill; nothing
	// announces it otherwise.
	deadline := time.Now().Add(time.Minute)
	var victimDir []byte
	for {
		b, err := os.ReadFile(marker)
		if err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			victimDir = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder of qk was never killed by the failpoint")
		}
		time.Sleep(20 * time.Millisecond)
	}
	victim := -1
	for i, nd := range m.Nodes {
		if nd.DataDir == strings.TrimSpace(string(victimDir)) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("the failpoint fired on %q, no node of the testnet", victimDir)
	}
	if err := m.Kill(victim, syscall.SIGKILL); err != nil { // waits until it is gone
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}

	deadline = time.Now().Add(2 * time.Minute)
	for {
		out, _, code := bedwe(t, "", "result", st.ID, "--testnet", m.Dir, "--node", "0", "-o", "json")
		if code == 0 || code == 2 {
			var final api.Status
			if err := json.Unmarshal([]byte(out), &final); err != nil {
				t.Fatalf("result: %v\n%s", err, out)
			}
			if final.State != api.StateSucceeded {
				t.Fatalf("workflow %s after the kill: %s %s", st.ID, final.State, final.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s still running 2 minutes after the holder of qk was killed and restarted (node %d)", st.ID, victim)
		}
		time.Sleep(200 * time.Millisecond)
	}

	recs, err := testnet.ReadInvocations(filepath.Join(m.Dir, testnet.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, r := range recs {
		if r.Workflow == st.ID {
			runs[r.Service]++
		}
	}
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
