package testnet_test

import (
	"fmt"
	"github.com/bedwe/bedwe/internal/tier"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/testnet"
)

// TestAReceiverAnswersWhileTheGuardiansBeforeItAreFrozen: the guardians of
// sleepC are frozen with SIGSTOP (a stalled board: not dead, not
// answering) while sleepC runs, so o's receiver can settle with none of
// them. It must refuse the hand-over as unsettled while its sender still
// waits for the answer (node.acceptSettleBudget), so the sender keeps the
// work and tries again; once the guardians are resumed the workflow
// succeeds with every step run once. A receiver that spent two rounds on
// the release its backup's copy rode and then a whole second settle would
// answer past the sender's 10 s call: the sender would hear nothing and,
// with o offered by two nodes, fail the workflow ("no live peer offers
// it"). o is offered only by nodes 4
// and 5, the other steps only by nodes 0 to 3, so o's receiver is never
// sleepC's holder.
func TestAReceiverAnswersWhileTheGuardiansBeforeItAreFrozen(t *testing.T) {
	tier.Faults(t)
	m := up(t, testnet.Options{Nodes: 6, Zones: 3, NodeServices: oApart})
	st := submitAt0(t, m, "a sleepC o[once=true] b", "--input", `{"sleep_ms": 4000}`)

	// sleepC's holder, and its guardians: the nodes keeping a live guard
	// copy once it accepted (a's copies were released by then).
	holder := awaitEvent(t, m, "a node accepted sleepC", func(e events.Event) bool {
		return e.Type == events.Accepted && e.Workflow == st.ID && e.Step == "1"
	})
	var guardians []int
	for deadline := time.Now().Add(3 * time.Second); len(guardians) < 2 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		guardians = guardians[:0]
		for i, nd := range m.Nodes {
			if samples, _ := scrapeNode(t, nd.MetricsURL()); i != holder && samples["bedwe_guard_copies"] >= 1 {
				guardians = append(guardians, i)
			}
		}
	}
	if len(guardians) == 0 || slices.Contains(guardians, 4) && slices.Contains(guardians, 5) {
		t.Fatalf("sleepC's guardians are nodes %v (holder %d): the test needs at least one, and one of o's receivers (nodes 4, 5) running", guardians, holder)
	}
	frozen := map[string]bool{}
	for _, i := range guardians {
		if err := m.Kill(i, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		frozen[m.Nodes[i].PeerID] = true
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, i := range guardians {
				if err := m.Kill(i, syscall.SIGCONT); err != nil {
					t.Error(err)
				}
			}
		}
	}
	defer resume()

	// The first answer (or silence) o's hand-over got from a receiver
	// that is not frozen.
	var first events.Event
	awaitEvent(t, m, "o's hand-over answered by a running receiver", func(e events.Event) bool {
		if e.Type == events.Handoff && e.Workflow == st.ID && e.Step == "2" && !frozen[e.To] {
			first = e
			return true
		}
		return false
	})
	resume()
	t.Logf("sleepC held by node %d; its guardians, nodes %v, frozen; o's first hand-over to a running receiver: %s %s after %.1f s", holder, guardians, first.Outcome, first.Reason, first.Seconds)
	if first.Outcome != events.OutcomeRefused || first.Reason != api.CodeUnsettled {
		t.Errorf("o's receiver answered its sender %s (%s) after %.1f s, want refused as %s within the sender's call: with every guardian of the step before frozen nothing can be settled",
			first.Outcome, first.Reason, first.Seconds, api.CodeUnsettled)
	}

	awaitSucceeded(t, m, st.ID, fmt.Sprintf("sleepC's guardians (nodes %v) were frozen during o's hand-over and resumed", guardians))
	runs := runsOf(t, m, st.ID)
	t.Logf("runs: %v", runs)
	for _, svc := range []string{"a", "sleepC", "o", "b"} {
		if runs[svc] != 1 {
			t.Errorf("%s ran %d times, want once (nothing was killed)", svc, runs[svc])
		}
	}
}

// oApart is the services of a 6-node testnet where o runs only on nodes 4
// and 5, and a, b and the sleep steps only on nodes 0 to 3: o's receiver is
// never the holder of the step before it.
func oApart(i int) string {
	if i >= 4 {
		return "version: 1\nrecord: " + testnet.RecordFile + "\npatterns:\n  - {match: \"o\", kind: echo}\n"
	}
	return "version: 1\nrecord: " + testnet.RecordFile + "\npatterns:\n" +
		"  - {match: \"sleep*\", kind: sleep, from_request: true, field: sleep_ms, duration: 100ms}\n" +
		"  - {match: \"a\", kind: echo}\n  - {match: \"b\", kind: echo}\n"
}

// awaitEvent waits up to a minute for an event matching ok in any node's
// events file and returns that node's index.
func awaitEvent(t *testing.T, m *testnet.Manifest, what string, ok func(events.Event) bool) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for i, nd := range m.Nodes {
			evs, _ := events.Read(nd.Events())
			if slices.ContainsFunc(evs, ok) {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
