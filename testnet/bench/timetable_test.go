package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/testnet"
)

// TestWriteComparison writes the report of a made-up comparison and checks
// every file.
func TestWriteComparison(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	mode := func(name string, lat time.Duration, superseded int) *testnet.ModeResult {
		m := &testnet.ModeResult{Mode: name, Submitted: 3, Completed: 2, Lost: 1, CompletionRate: 2.0 / 3, MakespanMs: 5000,
			LatencyP50Ms: float64(lat.Milliseconds()), Superseded: superseded, StepsRerun: superseded, Kills: 4, StartedAt: t0}
		for i := range 3 {
			r := testnet.WorkflowRun{Index: i, Kind: testnet.KindSequence, ID: "wf-" + name + string(rune('a'+i)), Node: i,
				State: "succeeded", SubmitAt: t0.Add(time.Duration(i) * time.Second)}
			r.Submitted = r.SubmitAt
			r.Finished = r.SubmitAt.Add(lat)
			if i == 2 {
				r.State, r.Finished = "lost", time.Time{}
			}
			m.Runs = append(m.Runs, r)
		}
		return m
	}
	c := &testnet.Comparison{Nodes: 4, Zones: []string{"north", "south"}, Workflows: 3, Rate: 1, Speed: 360,
		Timetable: "format: bedwe-schedule/1\n", Kinds: map[string]int{testnet.KindSequence: 3},
		Dark:  []testnet.DarkSpan{{Zone: "south", From: 1, To: 3}},
		Modes: []*testnet.ModeResult{mode("timetable", time.Second, 0), mode("heartbeat", 2*time.Second, 2)}}
	dir := t.TempDir()
	files, err := WriteComparison(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 7 {
		t.Errorf("wrote %v", files)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var back testnet.Comparison
	if err := json.Unmarshal([]byte(read("comparison.json")), &back); err != nil || len(back.Modes) != 2 {
		t.Fatalf("comparison.json: %v, %d modes", err, len(back.Modes))
	}
	sum := strings.Split(strings.TrimSpace(read("comparison.csv")), "\n")
	if len(sum) != 3 || !strings.HasPrefix(sum[1], "timetable,4,3,3,2,0,1,0.667,5,1000,") {
		t.Errorf("comparison.csv:\n%s", strings.Join(sum, "\n"))
	}
	wf := strings.Split(strings.TrimSpace(read("workflows.csv")), "\n")
	if len(wf) != 7 || !strings.Contains(wf[3], ",lost,2,,,") {
		t.Errorf("workflows.csv:\n%s", strings.Join(wf, "\n"))
	}
	for _, svg := range []string{"completions.svg", "latency.svg"} {
		els, _ := svgElements(t, []byte(read(svg)))
		if len(els["polyline"]) != 2 {
			t.Errorf("%s: %d series, want 2", svg, len(els["polyline"]))
		}
	}
	md := read("results.md")
	if !strings.Contains(md, "| heartbeat | 3 | 2 | 0 | 1 | 66.7 % |") || !strings.Contains(md, "completions.svg") {
		t.Errorf("results.md:\n%s", md)
	}
	if read("rotation.yaml") != c.Timetable {
		t.Error("rotation.yaml differs from the timetable")
	}
}
