package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/held"
)

// TestHopStreams counts, on three real peers, the streams a sequence of
// steps opens besides its hand-offs: progress reports for the
// origin are sent in batches, not one stream per step, and a holder beats
// to the guardians of its next steps on the beat streams it already has,
// not a new one per step. The origin (node 0) runs none of the steps, so
// every report crosses the network; the last step sleeps, and the origin
// must count the steps before it while it runs (the batches arrive, not
// only the completion's trace).
func TestHopStreams(t *testing.T) {
	const steps = 24
	nodes := hopMesh(t)
	var src strings.Builder
	for i := range steps {
		fmt.Fprintf(&src, "S%d ", i)
	}
	src.WriteString("slow")

	ctx, cl := hopClient(t, nodes[0])
	st, err := cl.Submit(ctx, "hop.bedwe", src.String(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	sawProgress := false
	final, err := cl.Wait(ctx, st.ID, 50*time.Millisecond, func(s api.Status) {
		if s.State == api.StateRunning && s.StepsDone >= steps {
			sawProgress = true
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if final.State != api.StateSucceeded || final.StepsDone != steps+1 {
		t.Fatalf("workflow %s, %d steps done: %s", final.State, final.StepsDone, final.Error)
	}
	if !sawProgress {
		t.Errorf("the origin never counted the %d steps before slow while slow ran: progress reports did not arrive", steps)
	}

	// Reports are requests whether on a stream of their own or on a
	// shared session (rpc.Mux).
	progress := requestsServed(t, nodes, api.ProtoOriginProgress)
	origin := requestsServed(t, nodes, api.ProtoOrigin)
	beats := scrapeSum(t, nodes, `bedwe_streams_served_total{protocol="`+api.ProtoBeat+`"}`) +
		scrapeSum(t, nodes, `bedwe_streams_served_total{protocol="`+api.ProtoBeatKeys+`"}`) +
		scrapeSum(t, nodes, `bedwe_streams_served_total{protocol="`+api.ProtoBeatHeld+`"}`)
	handoffs := requestsServed(t, nodes, api.ProtoHandoff)
	t.Logf("%d steps: %v hand-off, %v progress, %v origin requests, %v beat streams", steps+1, handoffs, progress, origin, beats)
	// One stream per report would be steps+1; batches of 250 ms over a
	// sequence that takes well under that per step are far fewer.
	if progress+origin > steps/2 {
		t.Errorf("%v progress and %v origin streams for %d steps: the reports were not batched", progress, origin, steps+1)
	}
	// Three peers: a holder's guardians are always among the two others,
	// so it beats on at most two streams (more only if one broke); and
	// steps held on one peer and guarded on another are beaten for.
	if beats == 0 {
		t.Errorf("no beat streams for %d steps on three peers: holders did not beat to their guardians", steps+1)
	}
	if beats > steps/3 {
		t.Errorf("%v beat streams for %d steps: beat streams were not kept for the next step's guardians", beats, steps+1)
	}
}

// hopMesh starts three real peers on loopback and waits until each sees
// the others: node 0 (the origin of the tests' workflows) runs no step,
// nodes 1 and 2 run "S*" (echo), "T*" (a sleep of twice held.RerunCost)
// and slow (a 3 s sleep).
func hopMesh(t *testing.T) []api.NodeFile {
	return startMesh(t, "hop", 3, func(i int, cfg *node.Config) string {
		cfg.HTTP = "127.0.0.1:0"
		if i == 0 {
			return "version: 1\nservices:\n  unused: {kind: echo}\n"
		}
		return fmt.Sprintf("version: 1\npatterns:\n  - {match: \"S*\", kind: echo}\n  - {match: \"T*\", kind: sleep, duration: %s}\nservices:\n  slow: {kind: sleep, duration: 3s}\n", 2*held.RerunCost)
	})
}

// startMesh starts n real peers on loopback in zones z0, z1, ... of one
// network of their own (named after prefix), each bootstrapped from the
// first, and waits until each sees the others. setup returns node i's
// services file and may change its config.
func startMesh(t testing.TB, prefix string, n int, setup func(i int, cfg *node.Config) string) []api.NodeFile {
	network := prefix + "-" + filepath.Base(t.TempDir())
	var nodes []api.NodeFile
	for i := range n {
		cfg := node.TestnetConfig()
		services := setup(i, &cfg)
		cfg = testConfig(t, cfg, services)
		cfg.Network = network
		cfg.Zone = fmt.Sprintf("z%d", i)
		if i > 0 {
			cfg.Bootstrap = nodes[0].Addrs
		}
		nf, _ := runNode(t, cfg)
		nodes = append(nodes, nf)
	}
	for _, nf := range nodes {
		waitPeers(t, nf, len(nodes))
	}
	return nodes
}

// TestQuickStepJournaledWithItsHandOn counts, on three real peers, the
// journal commits of a sequence of quick steps and of a sequence of steps
// that run for longer than held.RerunCost (held H4): the outcome
// of a step that took that long is journaled before it is handed on, one
// commit more a step; a quick step's outcome goes into its hand-on's
// write.
func TestQuickStepJournaledWithItsHandOn(t *testing.T) {
	const steps = 20
	nodes := hopMesh(t)
	ctx, cl := hopClient(t, nodes[0])
	commits := func(prefix string) float64 {
		var src strings.Builder
		for i := range steps {
			fmt.Fprintf(&src, "%s%d ", prefix, i)
		}
		before := journalWrites(t, nodes)
		runSequence(t, ctx, cl, src.String(), steps)
		return journalWrites(t, nodes) - before
	}
	quick := commits("S")
	slow := commits("T")
	t.Logf("%d steps: %v journal commits quick, %v slow", steps, quick, slow)
	// One more a step, give or take a guardian's write more or less.
	if slow-quick < steps/2 {
		t.Errorf("the slow sequence made %v journal commits and the quick one %v: want about one more per step (%d): "+
			"a quick step's outcome was journaled before its hand-on, or a slow one's was not", slow, quick, steps)
	}
}

// runSequence submits source (a sequence of steps services) through cl
// and waits until it has succeeded with every step done.
func runSequence(t testing.TB, ctx context.Context, cl *client.Client, source string, steps int) {
	t.Helper()
	final := submitAndWait(t, ctx, cl, source, json.RawMessage(`{}`), 20*time.Millisecond)
	if final.State != api.StateSucceeded || final.StepsDone != steps {
		t.Fatalf("workflow %s, %d of %d steps done: %s", final.State, final.StepsDone, steps, final.Error)
	}
}

// journalWrites is the number of journal commits the nodes counted (one
// write or a shared batch commit each).
func journalWrites(t testing.TB, nodes []api.NodeFile) float64 {
	return scrapeSum(t, nodes, `bedwe_journal_write_duration_seconds_count{op="update"}`) +
		scrapeSum(t, nodes, `bedwe_journal_write_duration_seconds_count{op="batch"}`)
}

// requestsServed is the number of proto requests the nodes served, on
// streams of their own or on shared sessions (rpc.Mux).
func requestsServed(t testing.TB, nodes []api.NodeFile, proto string) float64 {
	return scrapeSum(t, nodes, `bedwe_streams_served_total{protocol="`+proto+`"}`) +
		scrapeSum(t, nodes, `bedwe_mux_requests_served_total{protocol="`+proto+`"}`)
}

// hopClient dials nf as a client, with a context for the test's
// workflows; both end with the test.
func hopClient(t testing.TB, nf api.NodeFile) (context.Context, *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	cl, err := client.Dial(ctx, nf.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return ctx, cl
}
