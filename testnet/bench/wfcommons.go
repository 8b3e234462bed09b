package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/grammar/wfcommons"
)

// WfPrefix is the service prefix of imported workflows; the bench services
// file ([Services]) makes every "wf.*" name a sleep.
const WfPrefix = "wf."

// WfRow is one WfCommons instance run on the testnet.
type WfRow struct {
	// Instance is the file's base name without .json.
	Instance string
	// Tasks, Edges, AddedEdges and AddedPairs come from the conversion
	// (see grammar/wfcommons.Result); SeriesParallel says it was exact.
	Tasks, Edges, AddedEdges, AddedPairs int
	SeriesParallel                       bool
	// CriticalPath is the original DAG's longest runtime path, unscaled;
	// Growth the conversion's relative lengthening of it.
	CriticalPath time.Duration
	Growth       float64
	// Scale multiplied every runtime; Bound is the critical path of the
	// converted workflow with the scaled, rounded sleeps it actually runs:
	// no engine can finish it sooner. PathServices counts the services on
	// that path (the hops that pay the engine's per-hop cost).
	Scale        float64
	Bound        time.Duration
	PathServices int
	// Runs and Summary are the measured makespans.
	Runs []time.Duration
	Summary
}

// Ratio is the median makespan over the bound.
func (w WfRow) Ratio() float64 {
	if w.Bound <= 0 {
		return 0
	}
	return float64(w.Median) / float64(w.Bound)
}

// WfcommonsFiles lists the *.json instances of dirs, one per base name (the
// first directory wins), sorted by name. Missing directories are skipped.
func WfcommonsFiles(dirs ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, "*.json"))
		for _, m := range matches {
			if b := filepath.Base(m); !seen[b] {
				seen[b] = true
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	return out
}

// ConvertInstance loads and converts one WfFormat file for a bench run and
// returns the workflow source, its input and the row without measurements.
func ConvertInstance(path string, scale float64) (string, json.RawMessage, WfRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, WfRow{}, fmt.Errorf("wfcommons: %w", err)
	}
	defer f.Close()
	inst, err := wfcommons.Load(f)
	if err != nil {
		return "", nil, WfRow{}, fmt.Errorf("wfcommons: %s: %w", path, err)
	}
	res, err := wfcommons.Convert(inst, wfcommons.Options{Scale: scale, ServicePrefix: WfPrefix})
	if err != nil {
		return "", nil, WfRow{}, fmt.Errorf("wfcommons: %s: %w", path, err)
	}
	input, err := json.Marshal(map[string]any{"sleep_ms": res.SleepMillis()})
	if err != nil {
		return "", nil, WfRow{}, fmt.Errorf("wfcommons: %s: input: %w", path, err)
	}
	bound, hops := pathOf(res.Workflow)
	row := WfRow{
		Instance: strings.TrimSuffix(filepath.Base(path), ".json"),
		Tasks:    res.Tasks, Edges: res.Edges, AddedEdges: res.AddedEdges, AddedPairs: res.AddedPairs,
		SeriesParallel: res.SeriesParallel, CriticalPath: res.CriticalPath, Growth: res.Growth(),
		Scale: res.Scale, Bound: bound, PathServices: hops,
	}
	return res.Workflow.String(), input, row, nil
}

// pathOf returns the longest expect= path of w (a sequence adds, a FORK
// takes its longest branch) and the number of services on it.
func pathOf(w *grammar.Workflow) (time.Duration, int) {
	var total time.Duration
	hops := 0
	for _, s := range w.Steps {
		switch s := s.(type) {
		case *grammar.Service:
			total += s.Expect()
			hops++
		case *grammar.Fork:
			var best time.Duration
			bestHops := 0
			for _, b := range s.Branches {
				d, h := pathOf(b)
				if d > best || (d == best && h > bestHops) {
					best, bestHops = d, h
				}
			}
			total += best
			hops += bestHops
		}
	}
	return total, hops
}

// RunWfcommons converts and runs every file of c.WfcommonsFiles.
func (r *Runner) RunWfcommons(ctx context.Context, c Config) ([]WfRow, error) {
	var out []WfRow
	for _, path := range c.WfcommonsFiles {
		src, input, row, err := ConvertInstance(path, c.WfcommonsScale)
		if err != nil {
			return out, err
		}
		runs, err := r.Repeat(ctx, ExpWfcommons, row.Instance, max(c.WfcommonsRepeat, 1), src, input)
		if err != nil {
			return out, err
		}
		row.Runs = makespans(runs)
		row.Summary = Summarize(row.Runs)
		out = append(out, row)
	}
	return out, nil
}
