package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/bedwe/bedwe/testnet"
)

// ComparisonTables returns the tables of a timetable comparison: one row
// per mode ("comparison") and one row per workflow and mode ("workflows").
func ComparisonTables(c *testnet.Comparison) []Table {
	sum := Table{Name: "comparison", Header: []string{
		"mode", "nodes", "workflows", "submitted", "completed", "failed", "lost", "completion_rate",
		"makespan_s", "latency_p50_ms", "latency_p95_ms", "latency_mean_ms", "critical_p50_ms",
		"superseded", "duplicates", "steps_rerun", "workflows_rerun", "kills", "restarts", "submit_retries",
	}}
	wf := Table{Name: "workflows", Header: []string{
		"mode", "index", "kind", "id", "node", "state", "submit_s", "finished_s", "latency_ms", "critical_ms",
		"steps", "superseded", "duplicates", "error",
	}}
	for _, m := range c.Modes {
		sum.Rows = append(sum.Rows, []any{
			m.Mode, c.Nodes, c.Workflows, m.Submitted, m.Completed, m.Failed, m.Lost, round3(m.CompletionRate),
			round3(float64(m.MakespanMs) / 1000), m.LatencyP50Ms, m.LatencyP95Ms, m.LatencyMeanMs, m.CriticalP50Ms,
			m.Superseded, m.Duplicates, m.StepsRerun, m.WorkflowsRerun, m.Kills, m.Restarts, m.SubmitRetries,
		})
		for _, r := range m.Runs {
			var submit, finished, latency any
			if !r.SubmitAt.IsZero() {
				submit = round3(r.SubmitAt.Sub(m.StartedAt).Seconds())
			}
			if !r.Finished.IsZero() {
				finished = round3(r.Finished.Sub(m.StartedAt).Seconds())
				latency = int(r.Latency().Milliseconds())
			}
			wf.Rows = append(wf.Rows, []any{
				m.Mode, r.Index, r.Kind, r.ID, r.Node, r.State, submit, finished, latency, int(r.CriticalMs),
				r.Steps, r.Superseded, r.Duplicates, r.Error,
			})
		}
	}
	return []Table{sum, wf}
}

// ComparisonPlots returns the figures of a timetable comparison:
// "completions", workflows completed over real time per mode with the
// zones' cuts shaded, and "latency", the distribution of workflow latency
// per mode.
func ComparisonPlots(c *testnet.Comparison) map[string]Plot {
	var done, lat []Series
	for _, m := range c.Modes {
		var fin, ls []float64
		for _, r := range m.Runs {
			if r.State == "succeeded" {
				fin = append(fin, r.Finished.Sub(m.StartedAt).Seconds())
				ls = append(ls, r.Latency().Seconds())
			}
		}
		sort.Float64s(fin)
		sort.Float64s(ls)
		s := Series{Name: m.Mode, X: []float64{0}, Y: []float64{0}}
		for _, x := range thin(fin, 400) {
			s.X = append(s.X, x.v)
			s.Y = append(s.Y, float64(x.i+1))
		}
		done = append(done, s)
		d := Series{Name: m.Mode}
		for _, x := range thin(ls, 200) {
			d.X = append(d.X, x.v)
			d.Y = append(d.Y, 100*float64(x.i+1)/float64(len(ls)))
		}
		if len(d.X) > 0 {
			lat = append(lat, d)
		}
	}
	var bands []Band
	for _, d := range c.Dark {
		bands = append(bands, Band{Name: d.Zone + " dark", From: d.From, To: d.To})
	}
	out := map[string]Plot{}
	title := fmt.Sprintf("%d workflows on %d nodes, zones cut in turn (clock x%g)", c.Workflows, c.Nodes, c.Speed)
	if len(done) > 0 {
		out["completions"] = Plot{Title: title, XLabel: "real time since the first submission (s)", YLabel: "workflows completed",
			Series: done, Bands: bands, Width: 760, Height: 420}
	}
	if len(lat) > 0 {
		out["latency"] = Plot{Title: "Workflow latency, completed workflows", XLabel: "latency (s)", YLabel: "% of completed workflows at or below",
			Series: lat, Width: 640, Height: 400}
	}
	return out
}

type indexed struct {
	i int
	v float64
}

// thin keeps at most n points of the sorted values (always the last one),
// with their indexes.
func thin(sorted []float64, n int) []indexed {
	if len(sorted) == 0 {
		return nil
	}
	step := max(1, len(sorted)/n)
	var out []indexed
	for i := 0; i < len(sorted); i += step {
		out = append(out, indexed{i, sorted[i]})
	}
	if last := len(sorted) - 1; out[len(out)-1].i != last {
		out = append(out, indexed{last, sorted[last]})
	}
	return out
}

// WriteComparison writes a timetable comparison into dir: comparison.json
// (the summary), comparison.csv and workflows.csv, completions.svg and
// latency.svg, the rotation timetable (rotation.yaml) and results.md (a
// Markdown table and the plots). It returns the paths written.
func WriteComparison(dir string, c *testnet.Comparison) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("comparison output: %w", err)
	}
	var written []string
	write := func(name string, fn func(w io.Writer) error) error {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("comparison output: %w", err)
		}
		bw := bufio.NewWriter(f)
		if err := fn(bw); err != nil {
			f.Close()
			return fmt.Errorf("comparison output %s: %w", name, err)
		}
		if err := bw.Flush(); err != nil {
			f.Close()
			return fmt.Errorf("comparison output %s: %w", name, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("comparison output %s: %w", name, err)
		}
		written = append(written, path)
		return nil
	}
	if err := write("comparison.json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(c)
	}); err != nil {
		return written, err
	}
	for _, t := range ComparisonTables(c) {
		if err := write(t.Name+".csv", t.WriteCSV); err != nil {
			return written, err
		}
	}
	plots := ComparisonPlots(c)
	names := make([]string, 0, len(plots))
	for n := range plots {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := write(n+".svg", plots[n].WriteSVG); err != nil {
			return written, err
		}
	}
	if err := write("rotation.yaml", func(w io.Writer) error {
		_, err := io.WriteString(w, c.Timetable)
		return err
	}); err != nil {
		return written, err
	}
	err := write("results.md", func(w io.Writer) error { return ComparisonMarkdown(w, c, plots) })
	return written, err
}

// ComparisonMarkdown writes the comparison as Markdown: the setup, a table
// of the modes and the plots (by file name, next to it).
func ComparisonMarkdown(w io.Writer, c *testnet.Comparison, plots map[string]Plot) error {
	m := ThisMachine()
	f := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	f("# Timetable-aware vs heartbeat-only routing\n\n")
	f("Produced by `bedwe testnet compare` (testnet.Compare). Machine: %s × %d, %d MiB, load %s at the end.\n\n", m.Model, m.CPUs, m.MemoryMiB, LoadAvg())
	hour := time.Duration(float64(time.Hour) / c.Speed)
	f("Each mode ran on a fresh testnet of %d `bedwe node` processes in zones %v, under a rotation (rotation.yaml) that cuts one zone at a time; "+
		"the virtual clock ran at x%g (a timetable hour in %s real) from %s, and every process of a zone was SIGKILLed at its cut and restarted at its restore. "+
		"%d seeded mixed workflows (%s) were submitted at %g/s to live nodes.\n\n",
		c.Nodes, c.Zones, c.Speed, hour.Round(time.Millisecond), c.Start.Format("2006-01-02 15:04 MST"), c.Workflows, kindsText(c.Kinds), c.Rate)
	f("| mode | submitted | completed | failed | lost | completion | makespan s | p50 ms | p95 ms | steps re-run (superseded + duplicates) | workflows with re-runs | kills |\n")
	f("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range c.Modes {
		f("| %s | %d | %d | %d | %d | %.1f %% | %.1f | %.0f | %.0f | %d (%d + %d) | %d | %d |\n",
			r.Mode, r.Submitted, r.Completed, r.Failed, r.Lost, 100*r.CompletionRate, float64(r.MakespanMs)/1000,
			r.LatencyP50Ms, r.LatencyP95Ms, r.StepsRerun, r.Superseded, r.Duplicates, r.WorkflowsRerun, r.Kills)
	}
	f("\n")
	if _, ok := plots["completions"]; ok {
		f("![completions over time](completions.svg)\n\n")
	}
	if _, ok := plots["latency"]; ok {
		f("![latency distribution](latency.svg)\n\n")
	}
	for _, r := range c.Modes {
		if len(r.Errors) == 0 {
			continue
		}
		f("Failures in mode %s:\n\n", r.Mode)
		keys := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return r.Errors[keys[i]] > r.Errors[keys[j]] })
		for _, k := range keys[:min(len(keys), 10)] {
			f("- %d × %s\n", r.Errors[k], k)
		}
		f("\n")
	}
	return nil
}

func kindsText(kinds map[string]int) string {
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d %s", kinds[k], k)
	}
	return s
}
