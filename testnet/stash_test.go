package testnet_test

import (
	"context"
	"encoding/json"
	"github.com/bedwe/bedwe/internal/tier"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/testnet"
)

// TestStashedOutputsSurviveTheOriginCopiesRestart is node/origin O6 on
// real `bedwe node` processes started with --stash-min 1: no step reads an
// earlier output, so the outputs of a, b and c leave the packs and only
// the workflow's origin copies keep them. Both copies are SIGKILLed while
// sleepS runs, and restarted: each reads its stash back from its journal
// (entries of their own beside the record), and the result holds every
// step's output. A copy that lost
// its stash in the restart would end the workflow with those outputs
// missing.
func TestStashedOutputsSurviveTheOriginCopiesRestart(t *testing.T) {
	tier.Faults(t)
	m := up(t, testnet.Options{Nodes: 4, Zones: 4, NodeFlags: []string{"--stash-min", "1"}})
	st := submitAt0(t, m, "a[reads=()] b[reads=()] c[reads=()] sleepS[reads=()] d[reads=()]", "--input", `{"sleep_ms": 8000}`)
	var copies []int
	for i, nd := range m.Nodes {
		for _, addr := range st.Origins {
			if strings.HasSuffix(addr, "/p2p/"+nd.PeerID) {
				copies = append(copies, i)
			}
		}
	}
	if len(copies) < 2 {
		t.Fatalf("workflow %s has origin copies %v on nodes %v: the test needs a primary and a replica", st.ID, st.Origins, copies)
	}

	// Wait until a, b and c have left the packs (their holders' stashed
	// events), which is before sleepS starts.
	deadline := time.Now().Add(time.Minute)
	for stashed := 0; stashed < 3; {
		stashed = 0
		for _, nd := range m.Nodes {
			evs, err := events.Read(nd.Events())
			if err != nil {
				continue // not written yet
			}
			for _, e := range evs {
				if e.Type == events.Stashed && e.Workflow == st.ID && e.Outcome == events.OutcomeOK {
					stashed += e.Outputs
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s: %d outputs left the packs within a minute, want a, b and c", st.ID, stashed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, i := range copies {
		if err := m.Kill(i, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, i := range copies {
		if err := m.Restart(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	awaitSucceeded(t, m, st.ID, "its origin copies were killed and restarted")

	for _, i := range copies {
		out, _, code := bedwe(t, "", "result", st.ID, "--testnet", m.Dir, "--node", strconv.Itoa(i), "-o", "json")
		var final api.Status
		if code != 0 || json.Unmarshal([]byte(out), &final) != nil {
			t.Fatalf("result at node %d: exit %d: %s", i, code, out)
		}
		for _, label := range []string{"a", "b", "c", "sleepS", "d"} {
			if len(final.Result[label]) == 0 {
				t.Errorf("node %d (an origin copy, restarted): the result has no output of %s (it has %d outputs)", i, label, len(final.Result))
			}
		}
	}
	runs := runsOf(t, m, st.ID)
	t.Logf("origin copies on nodes %v killed and restarted while sleepS ran; runs: %v", copies, runs)
	for _, svc := range []string{"a", "b", "c", "d"} {
		if runs[svc] != 1 {
			t.Errorf("%s ran %d times, want once", svc, runs[svc])
		}
	}
}
