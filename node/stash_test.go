package node_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/pack"
)

// TestPackDropsOutputsNobodyAheadReads runs two workflows of 40 echo steps
// that read nothing (reads=()) on three real nodes: in the first, nothing
// ahead names the outputs, so holders have the origin copies keep them and
// hand on packs without them (node/origin O6); in the second, a last step
// that reads everything keeps them all in the pack. Both results hold
// every step's own output, and the first workflow's packs on the wire stay
// under a third of the second's.
func TestPackDropsOutputsNobodyAheadReads(t *testing.T) {
	dir := t.TempDir()
	evFile := filepath.Join(dir, "events.jsonl")
	recFile := filepath.Join(dir, "invocations.jsonl")
	// Node i runs the steps whose names start with "ABC"[i], so every
	// hand-off crosses to another node and its pack is on the wire; every
	// invocation is recorded.
	nodes := startMesh(t, "stash", 3, func(i int, cfg *node.Config) string {
		cfg.EventsFile = evFile
		cfg.StashMin = 1024
		return fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"%c*\", kind: echo}\n", recFile, "ABC"[i])
	})
	const steps = 40
	name := func(i int) string { return fmt.Sprintf("%c%d", "ABC"[i%3], i) }
	var seq []string
	for i := 1; i <= steps; i++ {
		seq = append(seq, name(i)+"[reads=()]")
	}
	last := name(steps + 1)
	trimmed := strings.Join(seq, " ") + " " + last + "[reads=(" + name(1) + ")]" // the first output stays: the last step names it
	kept := strings.Join(seq, " ") + " " + last                                  // the last step reads everything

	run := func(src string) api.Status {
		t.Helper()
		// Each echo output repeats the input: 600 bytes an output.
		final := runWorkflowInput(t, nodes[0].Addrs[0], src, json.RawMessage(`{"x":"`+strings.Repeat("x", 600)+`"}`))
		if final.State != api.StateSucceeded {
			t.Fatalf("%s: state %s: %s", final.ID, final.State, final.Error)
		}
		return final
	}
	checkResult := func(st api.Status, lastSaw []string) {
		t.Helper()
		if len(st.Result) != steps+1 {
			t.Errorf("%s: result has %d outputs, want %d", st.ID, len(st.Result), steps+1)
		}
		// The trace entries that left the packs are back, each step once.
		ran := map[string]int{}
		for _, e := range st.Trace {
			if e.Outcome == pack.OutcomeStashed {
				t.Errorf("%s: the result's trace still holds a stashed run %s", st.ID, e.Stash)
			}
			if e.Outcome == pack.OutcomeOK {
				ran[e.Path]++
			}
		}
		if st.StepsDone != steps+1 || len(ran) != steps+1 {
			t.Errorf("%s: trace shows %d steps (steps done %d), want %d", st.ID, len(ran), st.StepsDone, steps+1)
		}
		for i := 1; i <= steps+1; i++ {
			var out struct {
				Echo struct {
					Step string `json:"step"`
				} `json:"echo"`
				Outputs []string `json:"outputs"`
			}
			label := name(i)
			if err := json.Unmarshal(st.Result[label], &out); err != nil {
				t.Errorf("%s: output of %s: %v", st.ID, label, err)
				continue
			}
			if out.Echo.Step != strconv.Itoa(i-1) {
				t.Errorf("%s: %s holds the output of step %q, want step %d", st.ID, label, out.Echo.Step, i-1)
			}
			if i == steps+1 && !slices.Equal(out.Outputs, lastSaw) {
				t.Errorf("%s: %s was given %v, want %v", st.ID, label, out.Outputs, lastSaw)
			}
		}
	}
	a := run(trimmed)
	checkResult(a, []string{name(1)})
	b := run(kept)
	var all []string
	for i := 1; i <= steps; i++ {
		all = append(all, name(i))
	}
	slices.Sort(all)
	checkResult(b, all)

	// Count what ran: with no fault, every step of both workflows exactly
	// once (a pack that lost its place would run a step again or never).
	runs := runsPerStep(t, recFile)
	for _, st := range []api.Status{a, b} {
		for i := 0; i <= steps; i++ {
			if n := runs[st.ID+" "+strconv.Itoa(i)]; n != 1 {
				t.Errorf("%s: step %d ran %d times, want once", st.ID, i, n)
			}
		}
	}
	if len(runs) != 2*(steps+1) {
		t.Errorf("%d steps ran, want %d", len(runs), 2*(steps+1))
	}

	evs, err := events.Read(evFile)
	if err != nil {
		t.Fatal(err)
	}
	maxBytes := map[string]int{}
	var stashes, stashed, traceRuns int
	for _, e := range evs {
		switch {
		case e.Type == events.Handoff && e.Outcome == events.OutcomeOK:
			maxBytes[e.Workflow] = max(maxBytes[e.Workflow], e.Bytes)
		case e.Type == events.Stashed && e.Workflow == b.ID:
			t.Errorf("%s: outputs stashed although its last step reads them all", b.ID)
		case e.Type == events.Stashed && e.Outcome == events.OutcomeOK:
			stashes++
			stashed += e.Outputs
			if e.TraceEntries > 0 {
				traceRuns++
			}
		}
	}
	if stashes == 0 || stashed < steps-10 || traceRuns == 0 {
		t.Errorf("%s: %d stashes of %d outputs, %d with trace entries; want most of the %d outputs stashed, with trace entries", a.ID, stashes, stashed, traceRuns, steps)
	}
	t.Logf("largest pack handed to another node: %d bytes with stashing, %d without; %d stashes of %d outputs", maxBytes[a.ID], maxBytes[b.ID], stashes, stashed)
	if maxBytes[b.ID] == 0 || maxBytes[a.ID]*3 > maxBytes[b.ID] {
		t.Errorf("largest pack handed on: %d bytes with stashing, %d without; want well under", maxBytes[a.ID], maxBytes[b.ID])
	}
}
