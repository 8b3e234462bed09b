package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleResults is a Results with one row in every experiment.
func sampleResults() *Results {
	ms := time.Millisecond
	pt := func(exp, mode string, x int, d time.Duration) Point {
		runs := []time.Duration{d, d + ms, d - ms}
		return Point{Experiment: exp, Mode: mode, X: x, Services: x, CriticalPath: x, Runs: runs, Summary: Summarize(runs)}
	}
	packs, _ := PackGrowth(5, nil)
	return &Results{
		Machine: ThisMachine(), Nodes: 4, Zones: 2, Config: QuickConfig(),
		Experiments: Experiments,
		Started:     time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Ended: time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC),
		Sequential: []Point{pt(ExpSequential, "noop", 2, 20*ms), pt(ExpSequential, "noop", 4, 40*ms), pt(ExpSequential, "sleep20ms", 2, 60*ms)},
		Parallel:   []Point{pt(ExpParallel, "noop", 2, 30*ms)},
		Nested:     []Point{pt(ExpNested, "noop", 1, 30*ms)},
		Overhead:   []OverheadRow{{N: 4, Repeats: 1, Makespan: Summarize([]time.Duration{40 * ms}), PerService: 10 * ms, GapMedian: 8 * ms}},
		Packs:      packs,
		Resources:  []ResourceRow{{Phase: "idle", Window: time.Second, Nodes: 4, RSSMeanMB: 40}},
		Wfcommons:  []WfRow{{Instance: "blast", Tasks: 3, Bound: 50 * ms, PathServices: 2, Runs: []time.Duration{70 * ms}, Summary: Summarize([]time.Duration{70 * ms})}},
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	res := sampleResults()
	files, err := res.WriteFiles(dir, "## Go benchmarks\n\nBenchmarkX 1 ns/op\n")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	slices.Sort(names)
	want := []string{"nested.csv", "nested.svg", "overhead.csv", "packsize.csv", "packsize.svg", "parallel.csv", "parallel.svg",
		"resources.csv", "results.md", "sequential.csv", "sequential.svg", "wfcommons.csv"}
	if !slices.Equal(names, want) {
		t.Errorf("wrote %v, want %v", names, want)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"![Sequential workflows (paper Fig. 9)](sequential.svg)", "| CPU |", "| Go | " + res.Machine.GoVersion,
		"## Per-hop overhead", "## Node resources", "## Real scientific workflows", "BenchmarkX 1 ns/op", "| blast | 3 |"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("results.md lacks %q", s)
		}
	}
	// The sequential plot has one line per mode.
	svg, err := os.ReadFile(filepath.Join(dir, "sequential.svg"))
	if err != nil {
		t.Fatal(err)
	}
	els, _ := svgElements(t, svg)
	if got := len(els["polyline"]); got != 2 {
		t.Errorf("sequential.svg has %d lines, want 2 (noop, sleep20ms)", got)
	}
}

func TestMarkdownSkipsEmpty(t *testing.T) {
	res := &Results{Machine: ThisMachine(), Config: QuickConfig(), Sequential: sampleResults().Sequential}
	var buf bytes.Buffer
	if err := res.WriteMarkdown(&buf, res.Plots(), ""); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Per-hop", "Node resources", "WfCommons", "Nested"} {
		if strings.Contains(buf.String(), "## "+s) {
			t.Errorf("results.md has a %s section without data", s)
		}
	}
}
