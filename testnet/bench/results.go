package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/bedwe/bedwe/pack"
)

// Results is everything one bench run measured.
type Results struct {
	Machine Machine
	// Nodes and Zones size the testnet.
	Nodes, Zones int
	Config       Config
	// Experiments lists what ran, in order.
	Experiments    []string
	Started, Ended time.Time
	Sequential     []Point
	Parallel       []Point
	Nested         []Point
	Overhead       []OverheadRow
	// Floor is measured with the overhead experiment, in the same run.
	Floor Floor
	Packs []PackRow
	// PacksReadsNothing is the same sequence with reads=() on every step,
	// stashed at DefaultStashMin (PackGrowthReadsNothing).
	PacksReadsNothing []PackRow
	Resources         []ResourceRow
	Wfcommons         []WfRow
	LoadAvgAtFinish   string
}

// RunExperiments runs the experiments exps (in the order of [Experiments]) with r and
// returns what was measured; on an error it returns the results so far
// with the error.
func RunExperiments(ctx context.Context, r *Runner, c Config, exps []string) (*Results, error) {
	res := &Results{Machine: ThisMachine(), Nodes: len(r.Net.Nodes), Zones: len(r.Net.Zones), Config: c, Started: time.Now().UTC()}
	defer func() {
		res.Ended = time.Now().UTC()
		res.LoadAvgAtFinish = LoadAvg()
	}()
	if err := r.Warmup(ctx); err != nil {
		return res, err
	}
	for _, e := range Experiments {
		if !slices.Contains(exps, e) {
			continue
		}
		var err error
		switch e {
		case ExpSequential:
			res.Sequential, err = r.RunSequential(ctx, c)
		case ExpParallel:
			res.Parallel, err = r.RunParallel(ctx, c)
		case ExpNested:
			res.Nested, err = r.RunNested(ctx, c)
		case ExpOverhead:
			if res.Floor, err = r.MeasureFloor(ctx); err != nil {
				return res, err
			}
			res.Overhead, err = r.RunOverhead(ctx, c)
			if err == nil {
				res.Packs, err = PackGrowth(c.PackLength, peersOf(r))
				if err == nil {
					res.PacksReadsNothing, err = PackGrowthReadsNothing(c.PackLength, peersOf(r), DefaultStashMin)
				}
			}
		case ExpResources:
			res.Resources, err = r.RunResources(ctx, c)
		case ExpWfcommons:
			res.Wfcommons, err = r.RunWfcommons(ctx, c)
		}
		if err != nil {
			return res, err
		}
		res.Experiments = append(res.Experiments, e)
	}
	return res, nil
}

// peersOf lists the testnet's nodes as pack peers.
func peersOf(r *Runner) []pack.Peer {
	var out []pack.Peer
	for _, nd := range r.Net.Nodes {
		p := pack.Peer{ID: nd.PeerID, Zone: nd.Zone}
		if nd.Listen != "" {
			p.Addrs = []string{nd.Listen}
		}
		out = append(out, p)
	}
	return out
}

// Tables returns one table per experiment that produced rows.
func (res *Results) Tables() []Table {
	var out []Table
	add := func(t Table) {
		if len(t.Rows) > 0 {
			out = append(out, t)
		}
	}
	add(PointTable(ExpSequential, res.Sequential))
	add(PointTable(ExpParallel, res.Parallel))
	add(PointTable(ExpNested, res.Nested))
	add(OverheadTable(res.Overhead))
	add(PackTable(res.Packs))
	add(ResourceTable(res.Resources))
	add(WfTable(res.Wfcommons))
	return out
}

// Plots returns the figures: completion time against size for each
// scaling experiment (one series per mode, whiskers from min to max), and
// the pack size along a sequence.
func (res *Results) Plots() map[string]Plot {
	out := map[string]Plot{}
	scaling := func(name, title, xlabel string, ps []Point) {
		if len(ps) == 0 {
			return
		}
		var series []Series
		for _, p := range ps {
			i := slices.IndexFunc(series, func(s Series) bool { return s.Name == p.Mode })
			if i < 0 {
				series = append(series, Series{Name: p.Mode})
				i = len(series) - 1
			}
			s := &series[i]
			s.X = append(s.X, float64(p.X))
			s.Y = append(s.Y, p.Median.Seconds())
			s.Lo = append(s.Lo, p.Min.Seconds())
			s.Hi = append(s.Hi, p.Max.Seconds())
		}
		out[name] = Plot{Title: fmt.Sprintf("%s (%d nodes, median of %d)", title, res.Nodes, res.Config.Repeat),
			XLabel: xlabel, YLabel: "completion time (s)", Series: series}
	}
	scaling(ExpSequential, "Sequential workflows", "services in sequence", res.Sequential)
	scaling(ExpParallel, fmt.Sprintf("One FORK of branches × %d services", res.Config.ParallelLength), "parallel branches", res.Parallel)
	scaling(ExpNested, fmt.Sprintf("%d services in nested FORKs", res.Config.NestedTotal), "nested FORKs", res.Nested)
	if len(res.Packs) > 0 {
		s := Series{Name: "pack (pack.Encode)"}
		d := Series{Name: "outputs (labels + JSON)"}
		for _, p := range res.Packs {
			s.X = append(s.X, float64(p.Hop))
			s.Y = append(s.Y, float64(p.Bytes)/1024)
			d.X = append(d.X, float64(p.Hop))
			d.Y = append(d.Y, float64(p.DataBytes)/1024)
		}
		out["packsize"] = Plot{Title: fmt.Sprintf("Pack size along a no-op sequence of %d", len(res.Packs)),
			XLabel: "hop", YLabel: "KiB", Series: []Series{s, d}}
	}
	return out
}

// WriteFiles writes NAME.csv for every table, NAME.svg for every plot and
// results.md into dir, with extra Markdown (Go benchmark figures, profile
// notes) appended to results.md; it returns the paths written.
func (res *Results) WriteFiles(dir, extra string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench output: %w", err)
	}
	var written []string
	write := func(name string, fn func(f *os.File) error) error {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("bench output: %w", err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("bench output: %w", err)
		}
		written = append(written, path)
		return nil
	}
	for _, t := range res.Tables() {
		if err := write(t.Name+".csv", func(f *os.File) error { return t.WriteCSV(f) }); err != nil {
			return written, err
		}
	}
	plots := res.Plots()
	for _, name := range sortedKeys(plots) {
		p := plots[name]
		if err := write(name+".svg", func(f *os.File) error { return p.WriteSVG(f) }); err != nil {
			return written, err
		}
	}
	err := write("results.md", func(f *os.File) error { return res.WriteMarkdown(f, plots, extra) })
	return written, err
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
