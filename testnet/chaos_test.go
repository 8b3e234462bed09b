package testnet_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/bedwe/bedwe/internal/tier"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/bedwe/bedwe/testnet"
)

var (
	chaosTrials   = flag.Int("chaos.trials", 0, "TestChaosTrials: run each chaos scenario this many times with random seeds, each on a fresh testnet (0: skip)")
	chaosScenario = flag.String("chaos.scenario", "", "TestChaosTrials: run only this scenario")
	chaosReport   = flag.String("chaos.report", "", "TestChaosTrials: append one JSON summary per trial to this file")
	chaosNodes    = flag.Int("chaos.nodes", 8, "TestChaosTrials: testnet size")
	chaosStash    = flag.Bool("chaos.stash", false, "TestChaosTrials: run the chaos workflow with reads=() on every step, on nodes with --stash-min 1 (every output and trace entry nobody ahead reads leaves the packs)")
)

// TestChaos runs every scenario on real processes killed with SIGKILL and
// asserts that nothing is lost, nothing ran again after it was handed on,
// no at-most-once step ran twice, nothing was counted twice, and every
// result equals the fault-free one.
func TestChaos(t *testing.T) {
	tier.Faults(t)
	for _, scenario := range testnet.Scenarios {
		t.Run(scenario, func(t *testing.T) {
			m := up(t, testnet.Options{Nodes: 6, Zones: 3})
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			sum, err := m.Chaos(ctx, testnet.ChaosOptions{
				Scenario: scenario, Workflows: 3, StepMillis: 500, Seed: 42,
				Timeout: 2 * time.Minute, FlapFor: 6 * time.Second, Progress: logWriter{t},
			})
			if err != nil {
				t.Fatalf("chaos %s: %v", scenario, err)
			}
			out, _ := json.Marshal(sum)
			t.Logf("chaos %s: %s", scenario, out)
			if os.Getenv("BEDWE_CHAOS_REPORT") != "" {
				f, err := os.OpenFile(os.Getenv("BEDWE_CHAOS_REPORT"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
				if err == nil {
					f.Write(append(out, '\n'))
					f.Close()
				}
			}
			if len(sum.PausedNodes) > 0 && sum.JoinTakeovers == 0 {
				// The join may end before its replicas suspect the frozen
				// holder (about 1 run in 10): the counts still hold, but
				// the fence was not exercised; the trials count how often.
				t.Logf("chaos %s: froze nodes %v but no join copy took over this time", scenario, sum.PausedNodes)
			}
			for _, msg := range chaosFailures(sum) {
				t.Error(msg)
			}
		})
	}
}

// TestChaosStashed runs scenarios with chaosWorkflowReads on nodes that
// stash every output nobody ahead reads (--stash-min 1): the origin
// primary killed (the replica assembles the result from its stash),
// consecutive holders, a zone. Besides TestChaos's assertions, every
// workflow must have met stashes (holders dropped outputs after both
// origin copies stored them, or kept them because a copy was down), at
// least one scenario must have dropped outputs, and every result must
// equal the fault-free one (which holds every output): the outputs that
// left the packs came back.
func TestChaosStashed(t *testing.T) {
	tier.Faults(t)
	dropped := 0
	for _, scenario := range []string{"origin", "consecutive", "zone"} {
		t.Run(scenario, func(t *testing.T) {
			m := up(t, testnet.Options{Nodes: 6, Zones: 3, NodeFlags: []string{"--stash-min", "1"}})
			sum := runChaos(t, m, "stashed", testnet.ChaosOptions{Scenario: scenario, Seed: 43, Reads: true})
			if sum.Stashes+sum.StashesKept < sum.Completed {
				t.Errorf("%d stashes (%d kept) for %d completed workflows: holders did not try to drop outputs", sum.Stashes, sum.StashesKept, sum.Completed)
			}
			dropped += sum.Stashes
		})
	}
	if dropped == 0 {
		t.Error("no scenario dropped an output from a pack")
	}
}

// TestChaosLocalChains runs scenarios where the chaos workflow's steps
// hand on locally: only nodes 1 and 4, of one zone, offer its services,
// so a holder keeps the next step (a peer of its own zone ranks below
// itself). After a local hand-off the step before has one guardian, its
// backup in another zone, and the next receiver's backup copy rides the
// release of that step (api.GuardStoreRelease) — the path this test
// SIGKILLs through: the executing node, a sender right after its
// receiver's ack, the origin (a backup of some chains: the backups are
// the nodes of the other zones), and every node at once (the copies that
// rode releases are read back from the journals). Besides TestChaos's
// assertions, copies must have ridden releases (requests served on
// /bedwe/guard/store-release/1.0.0, counted at the nodes not killed: in
// blackout every count restarted with its node).
func TestChaosLocalChains(t *testing.T) {
	tier.Faults(t)
	for _, scenario := range []string{"executor", "sender-after-ack", "origin", "blackout"} {
		t.Run(scenario, func(t *testing.T) {
			offers := func(i int) bool { return i == 1 || i == 4 }
			m := up(t, testnet.Options{Nodes: 6, Zones: 3, NodeServices: func(i int) string {
				if offers(i) {
					return ""
				}
				return "version: 1\nrecord: " + testnet.RecordFile + "\nservices:\n  unused: {kind: echo}\n"
			}})
			if m.Nodes[1].Zone != m.Nodes[4].Zone {
				t.Fatalf("nodes 1 and 4 are in zones %s and %s: the test needs them in one", m.Nodes[1].Zone, m.Nodes[4].Zone)
			}
			sum := runChaos(t, m, "local chains", testnet.ChaosOptions{Scenario: scenario, Seed: 44})
			if scenario == "blackout" {
				return
			}
			rides := 0.0
			for _, nd := range m.Nodes {
				if offers(nd.Index) || slices.Contains(sum.KilledNodes, nd.Index) {
					continue // backups are in other zones; a killed node's counts restarted
				}
				samples, _ := scrapeNode(t, nd.MetricsURL())
				rides += samples[`bedwe_mux_requests_served_total{protocol="/bedwe/guard/store-release/1.0.0"}`] +
					samples[`bedwe_streams_served_total{protocol="/bedwe/guard/store-release/1.0.0"}`]
			}
			t.Logf("chaos %s (local chains): %v backup copies rode a release", scenario, rides)
			if rides == 0 {
				t.Error("no backup copy rode a release: the hops were not local, or the receivers did not take the lone guardian as their backup")
			}
		})
	}
}

// runChaos runs opts's scenario on m with three workflows of 500 ms
// steps (2 min budget), logs the summary under label and fails t with
// every chaosFailures finding.
func runChaos(t *testing.T, m *testnet.Manifest, label string, opts testnet.ChaosOptions) *testnet.ChaosSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	opts.Workflows, opts.StepMillis, opts.Timeout, opts.Progress = 3, 500, 2*time.Minute, logWriter{t}
	sum, err := m.Chaos(ctx, opts)
	if err != nil {
		t.Fatalf("chaos %s: %v", opts.Scenario, err)
	}
	out, _ := json.Marshal(sum)
	t.Logf("chaos %s (%s): %s", opts.Scenario, label, out)
	for _, msg := range chaosFailures(sum) {
		t.Error(msg)
	}
	return sum
}

// chaosFailures lists what a chaos summary shows went wrong.
func chaosFailures(sum *testnet.ChaosSummary) []string {
	var out []string
	if len(sum.KilledPIDs) == 0 && len(sum.PausedNodes) == 0 && len(sum.IsolatedNodes) == 0 && sum.Scenario != "lossy" {
		out = append(out, fmt.Sprintf("scenario %s killed nothing", sum.Scenario))
	}
	if sum.Completed+sum.FailedAtMostOnce != sum.Submitted || sum.Lost != 0 {
		out = append(out, fmt.Sprintf("completed %d + failed at-most-once %d of %d submitted, lost %d, failed %d: %v",
			sum.Completed, sum.FailedAtMostOnce, sum.Submitted, sum.Lost, sum.Failed, sum.Errors))
	}
	if sum.ExecutionsDuplicated != 0 {
		out = append(out, fmt.Sprintf("%d executions started after their step was handed on: %v", sum.ExecutionsDuplicated, sum.ExecutionDetails))
	}
	if sum.OnceViolations != 0 {
		out = append(out, fmt.Sprintf("%d extra executions of at-most-once steps: %v", sum.OnceViolations, sum.ExecutionDetails))
	}
	if len(sum.IsolatedNodes) > 0 && !sum.IsolatedChainStopped {
		out = append(out, fmt.Sprintf("I1: a cut-off holder's superseded chain went on past its next hop: %v", sum.Notes))
	}
	if sum.DuplicateOutputs != 0 {
		out = append(out, fmt.Sprintf("%d step outputs counted twice", sum.DuplicateOutputs))
	}
	if sum.ResultMismatches != 0 {
		out = append(out, fmt.Sprintf("%d results differ from the fault-free result", sum.ResultMismatches))
	}
	// Every step of a completed workflow ran at least once: fewer records
	// mean the record file is not being written, and nothing is counted.
	if want := 9 * sum.Completed; sum.Executions < want {
		out = append(out, fmt.Sprintf("%d executions recorded, want at least %d for %d completed workflows of 9 steps (is the record file written?)", sum.Executions, want, sum.Completed))
	}
	return out
}

// trialReport is one line of the -chaos.report file.
type trialReport struct {
	Trial int `json:"trial"`
	*testnet.ChaosSummary
	// Error is set when the harness could not carry the trial out.
	Error    string   `json:"error,omitempty"`
	Failures []string `json:"failures,omitempty"`
}

// TestChaosTrials runs each scenario (or -chaos.scenario) -chaos.trials
// times with random seeds, each trial on a fresh testnet of -chaos.nodes
// nodes in 3 zones (a fresh one, so no trial inherits the journals,
// breakers or suspicions of the last), with the assertions of TestChaos,
// and appends one JSON summary per trial to -chaos.report. It runs only
// with -chaos.trials:
//
//	go test ./testnet -run TestChaosTrials -chaos.trials 100 -chaos.scenario sender-after-ack -chaos.report trials.jsonl -timeout 10h
//
// With -chaos.stash every trial runs the chaos workflow with reads=() on
// nodes that stash from the first byte (as TestChaosStashed).
func TestChaosTrials(t *testing.T) {
	tier.Faults(t)
	if *chaosTrials <= 0 {
		t.Skip("randomized chaos trials take minutes: run with -chaos.trials N [-chaos.scenario NAME] [-chaos.report FILE]")
	}
	scenarios := testnet.Scenarios
	if *chaosScenario != "" {
		if !slices.Contains(testnet.Scenarios, *chaosScenario) {
			t.Fatalf("-chaos.scenario %q: choose from %v", *chaosScenario, testnet.Scenarios)
		}
		scenarios = []string{*chaosScenario}
	}
	var report *os.File
	if *chaosReport != "" {
		f, err := os.OpenFile(*chaosReport, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatalf("open the chaos report: %v", err)
		}
		defer f.Close()
		report = f
	}
	for _, scenario := range scenarios {
		for trial := range *chaosTrials {
			t.Run(fmt.Sprintf("%s/%d", scenario, trial), func(t *testing.T) {
				seed := testnet.RandomSeed()
				opts := testnet.Options{Nodes: *chaosNodes, Zones: 3}
				if *chaosStash {
					opts.NodeFlags = []string{"--stash-min", "1"}
				}
				m := up(t, opts)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				sum, err := m.Chaos(ctx, testnet.ChaosOptions{
					Scenario: scenario, Workflows: 3, StepMillis: 500, Seed: seed, Reads: *chaosStash,
					Timeout: 2 * time.Minute, FlapFor: 6 * time.Second,
				})
				line := trialReport{Trial: trial, ChaosSummary: sum}
				if err != nil {
					line.ChaosSummary = &testnet.ChaosSummary{Scenario: scenario, Seed: seed}
					line.Error = err.Error()
					t.Errorf("chaos %s seed %d: %v", scenario, seed, err)
				} else {
					line.Failures = chaosFailures(sum)
					for _, msg := range line.Failures {
						t.Errorf("seed %d: %s", seed, msg)
					}
				}
				out, _ := json.Marshal(line)
				t.Logf("trial %d: %s", trial, out)
				if report != nil {
					if _, err := report.Write(append(out, '\n')); err != nil {
						t.Errorf("write the chaos report: %v", err)
					}
				}
			})
		}
	}
}
