package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Table is one experiment's rows: CSV on disk, a map per row in JSON.
// Cells are strings, ints, float64s or bools.
type Table struct {
	// Name is the experiment; the CSV file is Name.csv.
	Name   string
	Header []string
	Rows   [][]any
}

// WriteCSV writes the header and every row; floats keep up to three
// decimals, a nil cell is empty.
func (t Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Header); err != nil {
		return fmt.Errorf("write %s.csv: %w", t.Name, err)
	}
	for i, row := range t.Rows {
		if len(row) != len(t.Header) {
			return fmt.Errorf("write %s.csv: row %d has %d cells, header %d", t.Name, i+1, len(row), len(t.Header))
		}
		rec := make([]string, len(row))
		for k, c := range row {
			rec[k] = cell(c)
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write %s.csv: %w", t.Name, err)
		}
	}
	cw.Flush()
	return cw.Error()
}

// Maps returns the rows as header → cell maps (for JSON output).
func (t Table) Maps() []map[string]any {
	out := make([]map[string]any, len(t.Rows))
	for i, row := range t.Rows {
		m := make(map[string]any, len(row))
		for k, c := range row {
			m[t.Header[k]] = c
		}
		out[i] = m
	}
	return out
}

func cell(c any) string {
	switch v := c.(type) {
	case nil:
		return ""
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(c)
}

// round3 keeps three decimals.
func round3(v float64) float64 {
	return float64(int64(v*1000+0.5*sign(v))) / 1000
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

// runsCell lists makespans in ms separated by spaces.
func runsCell(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strconv.FormatFloat(ms(d), 'f', -1, 64)
	}
	return strings.Join(parts, " ")
}

// PointTable is the table of a scaling experiment.
func PointTable(name string, ps []Point) Table {
	t := Table{Name: name, Header: []string{"experiment", "mode", "x", "services", "critical_path", "repeats",
		"median_ms", "min_ms", "max_ms", "floor_ms", "per_hop_ms", "runs_ms"}}
	for _, p := range ps {
		t.Rows = append(t.Rows, []any{p.Experiment, p.Mode, p.X, p.Services, p.CriticalPath, p.N,
			ms(p.Median), ms(p.Min), ms(p.Max), ms(p.Floor), ms(p.PerHop()), runsCell(p.Runs)})
	}
	return t
}

// OverheadTable is the table of the overhead experiment.
func OverheadTable(rows []OverheadRow) Table {
	t := Table{Name: ExpOverhead, Header: []string{"services", "repeats", "makespan_median_ms", "makespan_min_ms", "makespan_max_ms",
		"per_service_ms", "gap_median_ms", "gap_p90_ms", "gap_max_ms", "in_step_median_ms", "start_delay_ms", "finish_delay_ms"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []any{r.N, r.Repeats, ms(r.Makespan.Median), ms(r.Makespan.Min), ms(r.Makespan.Max),
			ms(r.PerService), ms(r.GapMedian), ms(r.GapP90), ms(r.GapMax), ms(r.Service), ms(r.StartDelay), ms(r.FinishDelay)})
	}
	return t
}

// PackTable is the table of the pack size estimate.
func PackTable(rows []PackRow) Table {
	t := Table{Name: "packsize", Header: []string{"hop", "remaining_services", "outputs", "trace_entries", "data_bytes", "pack_bytes"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []any{r.Hop, r.Remaining, r.Outputs, r.Trace, r.DataBytes, r.Bytes})
	}
	return t
}

// ResourceTable is the table of the resources experiment.
func ResourceTable(rows []ResourceRow) Table {
	t := Table{Name: ExpResources, Header: []string{"phase", "window_s", "nodes", "rss_mean_mib", "rss_max_mib", "threads_mean",
		"cpu_total_pct", "cpu_mean_pct", "cpu_max_pct", "workflows", "load"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []any{r.Phase, round3(r.Window.Seconds()), r.Nodes, round3(r.RSSMeanMB), round3(r.RSSMaxMB), round3(r.ThreadsMean),
			round3(r.CPUTotalPct), round3(r.CPUMeanPct), round3(r.CPUMaxPct), r.Workflows, r.LoadDesc})
	}
	return t
}

// WfTable is the table of the wfcommons experiment.
func WfTable(rows []WfRow) Table {
	t := Table{Name: ExpWfcommons, Header: []string{"instance", "tasks", "edges", "added_edges", "added_pairs", "series_parallel",
		"critical_path_s", "cp_growth_pct", "scale", "bound_ms", "path_services", "repeats", "median_ms", "min_ms", "max_ms", "ratio", "overhead_per_path_service_ms"}}
	for _, r := range rows {
		perHop := 0.0
		if r.PathServices > 0 {
			perHop = ms((r.Median - r.Bound) / time.Duration(r.PathServices))
		}
		t.Rows = append(t.Rows, []any{r.Instance, r.Tasks, r.Edges, r.AddedEdges, r.AddedPairs, r.SeriesParallel,
			round3(r.CriticalPath.Seconds()), round3(100 * r.Growth), r.Scale, ms(r.Bound), r.PathServices, r.N,
			ms(r.Median), ms(r.Min), ms(r.Max), round3(r.Ratio()), perHop})
	}
	return t
}
