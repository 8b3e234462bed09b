package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/testnet"
	"github.com/bedwe/bedwe/testnet/bench"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "reproduce the paper's experiments and run WfCommons workflows on a testnet",
		Description: `Starts a testnet of real 'bedwe node' processes (or uses a running one with --testnet),
runs the experiments of the BEDWE paper (its §5) and real scientific workflows, and
writes one CSV per experiment, SVG plots in the style of the paper's Figs. 9-11 and a
results.md into --out. Progress goes to stderr, a summary table to stdout (-o json for JSON).

Experiments (--experiments, comma-separated, default all):
   sequential  one sequence of 5..200 services                       (Fig. 9)
   parallel    one FORK of 2..20 branches x 10 services              (Fig. 10)
   nested      100 services in 1..5 nested two-way FORKs             (Fig. 11)
   overhead    per-hop time from traces of no-op sequences, and the pack size along one;
               with it the floor, measured in the same run beside the testnet: a 4 KiB fsync,
               a 4 KiB journal commit and a ping to a node, and a hand-over's critical path at
               its floor (three commits and two and a half round trips)
   resources   RSS and CPU of every node, idle and under load (from /proc)
   wfcommons   WfCommons instances converted with --scale, makespan vs the critical path
   idle        (only by itself) idle CPU and RSS of every node, for each size of --nodes in
               turn: start a testnet, wait --settle, sample /proc for --idle-window, stop it;
               before each size waits up to --load-wait for the 1-minute load average to fall
               below --max-load; prints the load average with every row (idle.csv in --out)
   flood       (only by itself) overload: starts a testnet of --nodes (default 16) whose
               nodes run with small limits (--flood-max-concurrent, --flood-queue,
               --flood-max-workflows, and max_concurrent --flood-fb-limit on service fb), and
               --flood-clients clients, client c on node c mod --nodes, each keeping
               --flood-inflight submissions of the two-step workflow "fa fb" going until
               --flood-workflows were accepted; a submission refused busy is submitted again after
               20-50 ms. fa and fb are http services served by the bench itself: each call takes
               --flood-step and the bench counts the calls running at once per node and per
               node and service. Reports accepted, succeeded, failed, refused (by reason) and lost
               workflows, throughput, latency p50/p90/p99, and every node's peak against its
               limits (flood.csv and flood_nodes.csv in --out); exits 1 if a workflow was lost or
               failed, a submission was refused other than busy, or a node went above a limit.

The scaling experiments run twice: with no-op services (engine overhead alone) and with
services that sleep --service-time. Every point runs --repeat times; medians are reported.
A testnet given with --testnet must offer the "wf.*" sleep pattern for wfcommons: start it
with the services file 'bedwe bench --print-services' writes.

Examples:
   bedwe bench --quick                                   # every experiment, tiny, 4 nodes
   bedwe bench --nodes 40 --repeat 5 --out docs/bench
   bedwe bench --experiments sequential,overhead --repeat 3 -o json
   bedwe bench --print-services > bench.yaml && bedwe testnet up --dir /tmp/tn --nodes 40 --services bench.yaml
   bedwe bench --testnet /tmp/tn --experiments wfcommons --scale 0.005
   bedwe bench --nodes 8,16,40,80 --experiments idle --out docs/bench   # idle cost as the mesh grows
   bedwe bench --nodes 16 --experiments flood --flood-workflows 2000 --flood-clients 8   # the standard flood`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "nodes", Usage: "testnet size; for the idle experiment a comma-separated `LIST` of sizes", DefaultText: "40 (flood: 16), 4 with --quick"},
			&cli.DurationFlag{Name: "settle", Usage: "idle: how long each testnet runs before it is sampled", Value: 30 * time.Second},
			&cli.DurationFlag{Name: "idle-window", Usage: "idle: how long each testnet is sampled; 0: two presence refreshes of a mesh that size (at least 30s; 118s a refresh at 80 nodes), so the window holds every node's re-announcements"},
			&cli.Float64Flag{Name: "max-load", Usage: "idle: wait for the 1-minute load average to fall below this before each size (0: do not wait)", Value: 2},
			&cli.DurationFlag{Name: "load-wait", Usage: "idle: wait at most this long for --max-load, then measure anyway", Value: 10 * time.Minute},
			&cli.IntFlag{Name: "zones", Usage: "load-shedding zones of the testnet", Value: 4},
			&cli.IntFlag{Name: "repeat", Usage: "runs per point", DefaultText: "5, 1 with --quick"},
			&cli.StringFlag{Name: "experiments", Usage: "comma-separated `LIST` of experiments, or all", Value: "all"},
			&cli.StringFlag{Name: "out", Usage: "`DIR` for CSV, SVG and results.md (empty: write nothing)", Value: "docs/bench"},
			&cli.BoolFlag{Name: "quick", Usage: "tiny sizes, for tests and a first look"},
			&cli.StringFlag{Name: "testnet", Usage: "use the running testnet in `DIR` instead of starting one"},
			&cli.DurationFlag{Name: "announce", Usage: "how soon a change of presence is announced by the nodes it starts, at most (they do not poll: an idle node announces only at its refresh)", Value: 5 * time.Second},
			&cli.StringFlag{Name: "binary", Usage: "bedwe `EXECUTABLE` for the nodes", DefaultText: "this one"},
			&cli.DurationFlag{Name: "service-time", Usage: "sleep per service in the fixed-time mode; 0: no-op mode only", DefaultText: "100ms, 20ms with --quick"},
			&cli.Float64Flag{Name: "scale", Usage: "WfCommons runtime `FACTOR`", DefaultText: "0.01, 0.0005 with --quick"},
			&cli.StringSliceFlag{Name: "wfcommons-dir", Usage: "`DIR` of WfCommons *.json instances (repeatable)", Value: cli.NewStringSlice("testdata/wfcommons", "../shared/data/wfcommons")},
			&cli.StringFlag{Name: "append", Usage: "append the Markdown in `FILE` to results.md (e.g. Go benchmark figures)"},
			&cli.BoolFlag{Name: "print-services", Usage: "print the services file of a bench testnet and exit"},
			&cli.BoolFlag{Name: "reads-nothing", Usage: "give every step of the sequential, parallel and overhead workflows reads=(): outputs and trace entries nobody ahead reads may leave the packs"},
			outputFlag(),
		}, floodFlags()...),
		Action: runBench,
	}
}

func runBench(c *cli.Context) error {
	stdout, stderr := c.App.Writer, c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	if c.Bool("print-services") {
		_, err := io.WriteString(stdout, bench.Services)
		return err
	}
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("bench takes no arguments (got %q); see bedwe bench --help", c.Args().First()), 1)
	}
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	sizes, err := parseNodeSizes(c.String("nodes"))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if exps, err := bench.ParseExperiments(c.String("experiments")); err == nil && slices.Contains(exps, bench.ExpFlood) {
		if len(exps) > 1 || c.String("testnet") != "" {
			return cli.Exit("the flood experiment runs by itself on a testnet it starts: --experiments flood, without --testnet", 1)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return runFloodBench(ctx, c, sizes, asJSON, stdout, stderr)
	}
	if exps, err := bench.ParseExperiments(c.String("experiments")); err == nil && slices.Contains(exps, bench.ExpIdle) {
		if len(exps) > 1 || c.String("testnet") != "" {
			return cli.Exit("the idle experiment runs by itself on testnets it starts: --experiments idle, without --testnet", 1)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return runIdleBench(ctx, c, sizes, asJSON, stdout, stderr)
	}
	if len(sizes) > 1 {
		return cli.Exit("several --nodes sizes are for --experiments idle only", 1)
	}
	cfg, exps, err := benchConfig(c)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	m, owned, err := benchTestnet(ctx, c, stderr)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if owned {
		defer func() {
			fmt.Fprintf(stderr, "stopping the testnet in %s\n", m.Dir)
			if err := m.Down(); err != nil {
				fmt.Fprintln(stderr, "bedwe: testnet down:", err)
			}
			_ = os.RemoveAll(m.Dir)
		}()
	}
	r, err := bench.NewRunner(ctx, m, stderr)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer r.Close()
	if slices.Contains(exps, bench.ExpWfcommons) {
		if err := checkWfPattern(ctx, r); err != nil {
			return cli.Exit(err.Error(), 1)
		}
	}
	res, runErr := bench.RunExperiments(ctx, r, cfg, exps)

	var extra string
	if f := c.String("append"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return cli.Exit(fmt.Sprintf("--append: %v", err), 1)
		}
		extra = string(b)
	}
	var files []string
	if out := c.String("out"); out != "" && len(res.Experiments) > 0 {
		files, err = res.WriteFiles(out, extra)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		fmt.Fprintf(stderr, "wrote %d files to %s\n", len(files), out)
	}
	if asJSON {
		if err := printBenchJSON(stdout, res, files); err != nil {
			return err
		}
	} else if err := printBenchTable(stdout, res); err != nil {
		return err
	}
	if runErr != nil {
		return cli.Exit(fmt.Sprintf("bench stopped: %v", runErr), 1)
	}
	return nil
}

// benchConfig turns the flags into a configuration and experiment list.
func benchConfig(c *cli.Context) (bench.Config, []string, error) {
	cfg := bench.DefaultConfig()
	if c.Bool("quick") {
		cfg = bench.QuickConfig()
	}
	exps, err := bench.ParseExperiments(c.String("experiments"))
	if err != nil {
		return cfg, nil, err
	}
	if c.IsSet("repeat") {
		if c.Int("repeat") < 1 {
			return cfg, nil, fmt.Errorf("--repeat %d: want at least 1", c.Int("repeat"))
		}
		cfg.Repeat = c.Int("repeat")
		cfg.WfcommonsRepeat = min(cfg.WfcommonsRepeat, cfg.Repeat)
	}
	if c.IsSet("service-time") {
		if d := c.Duration("service-time"); d < 0 {
			return cfg, nil, fmt.Errorf("--service-time %s: want 0 or more", d)
		}
		cfg.ServiceTime = c.Duration("service-time")
	}
	cfg.ReadsNothing = c.Bool("reads-nothing")
	if c.IsSet("scale") {
		if s := c.Float64("scale"); s <= 0 {
			return cfg, nil, fmt.Errorf("--scale %v: want a positive factor like 0.01", s)
		}
		cfg.WfcommonsScale = c.Float64("scale")
	}
	if slices.Contains(exps, bench.ExpWfcommons) {
		cfg.WfcommonsFiles = bench.WfcommonsFiles(c.StringSlice("wfcommons-dir")...)
		if len(cfg.WfcommonsFiles) == 0 {
			return cfg, nil, fmt.Errorf("no WfCommons instances (*.json) in %s; pass --wfcommons-dir or leave wfcommons out of --experiments",
				strings.Join(c.StringSlice("wfcommons-dir"), ", "))
		}
		if c.Bool("quick") {
			cfg.WfcommonsFiles = smallestFile(cfg.WfcommonsFiles)
		}
	}
	return cfg, exps, nil
}

// smallestFile keeps the smallest of files (by size on disk).
func smallestFile(files []string) []string {
	best, size := "", int64(-1)
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && (size < 0 || st.Size() < size) {
			best, size = f, st.Size()
		}
	}
	if best == "" {
		return files[:1]
	}
	return []string{best}
}

// benchTestnet loads --testnet or starts a new testnet (owned: the caller
// stops it).
func benchTestnet(ctx context.Context, c *cli.Context, progress io.Writer) (*testnet.Manifest, bool, error) {
	if dir := c.String("testnet"); dir != "" {
		m, err := testnet.LoadManifest(dir)
		if err != nil {
			return nil, false, err
		}
		for _, st := range m.Status() {
			if !st.Running {
				return nil, false, fmt.Errorf("testnet node %d (pid %d) is not running; restart the testnet", st.Index, st.PID)
			}
		}
		return m, false, nil
	}
	nodes := 0
	if sizes, err := parseNodeSizes(c.String("nodes")); err != nil {
		return nil, false, err
	} else if len(sizes) > 0 {
		nodes = sizes[0]
	}
	if nodes == 0 {
		nodes = 40
		if c.Bool("quick") {
			nodes = 4
		}
	}
	if nodes < 1 {
		return nil, false, fmt.Errorf("--nodes %d: want at least 1", nodes)
	}
	dir, err := os.MkdirTemp("", "bedwe-bench-")
	if err != nil {
		return nil, false, fmt.Errorf("testnet directory: %w", err)
	}
	fmt.Fprintf(progress, "starting a testnet of %d nodes in %s\n", nodes, dir)
	t0 := time.Now()
	m, err := testnet.Up(ctx, testnet.Options{
		Nodes: nodes, Zones: c.Int("zones"), Dir: dir, Binary: c.String("binary"),
		Services: bench.Services, Progress: progress, Announce: c.Duration("announce"),
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, false, fmt.Errorf("start the bench testnet: %w", err)
	}
	fmt.Fprintf(progress, "testnet up in %s\n", time.Since(t0).Round(time.Millisecond))
	return m, true, nil
}

// checkWfPattern fails unless the origin node declares the wf.* pattern.
func checkWfPattern(ctx context.Context, r *bench.Runner) error {
	peers, err := r.Client().Peers(ctx)
	if err != nil {
		return fmt.Errorf("ask testnet node 0 for its services: %w", err)
	}
	for _, p := range peers {
		if p.Self && slices.Contains(p.Patterns, bench.WfPrefix+"*") {
			return nil
		}
	}
	return errors.New(`the testnet does not declare the "wf.*" sleep pattern that WfCommons runs need; ` +
		"start it with the file `bedwe bench --print-services` prints, or leave wfcommons out of --experiments")
}

func printBenchJSON(w io.Writer, res *bench.Results, files []string) error {
	tables := map[string]any{}
	for _, t := range res.Tables() {
		tables[t.Name] = t.Maps()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{
		"machine": res.Machine, "nodes": res.Nodes, "zones": res.Zones, "repeat": res.Config.Repeat,
		"experiments": res.Experiments, "started": res.Started, "ended": res.Ended,
		"tables": tables, "files": files,
	})
}

func printBenchTable(w io.Writer, res *bench.Results) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXPERIMENT\tPOINT\tMEDIAN\tMIN\tMAX\tNOTE")
	sec := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s" }
	for _, ps := range [][]bench.Point{res.Sequential, res.Parallel, res.Nested} {
		for _, p := range ps {
			fmt.Fprintf(tw, "%s\t%s x=%d\t%s\t%s\t%s\t%d services, %.1f ms/hop over floor\n", p.Experiment, p.Mode, p.X,
				sec(p.Median), sec(p.Min), sec(p.Max), p.Services, float64(p.PerHop().Microseconds())/1000)
		}
	}
	if fl := res.Floor; fl.Hop() > 0 {
		fmt.Fprintf(tw, "floor\t4 KiB fsync + ping\t%s\t-\t-\tfsync %.2f ms, ping %.2f ms (gap target: 3 × %.2f ms)\n", sec(fl.Hop()),
			float64(fl.Fsync4K.Microseconds())/1000, float64(fl.StreamRTT.Microseconds())/1000, float64(fl.Hop().Microseconds())/1000)
		if fl.Commit4K > 0 {
			fmt.Fprintf(tw, "floor\t3 commits + 2.5 pings\t%s\t-\t-\ta hand-over's critical path at its floor: %.2f ms (journal commit %.2f ms)\n", sec(fl.HandOver()),
				float64(fl.HandOver().Microseconds())/1000, float64(fl.Commit4K.Microseconds())/1000)
		}
	}
	for _, o := range res.Overhead {
		fmt.Fprintf(tw, "overhead\tnoop n=%d\t%s\t%s\t%s\tgap median %.1f ms, p90 %.1f ms\n", o.N, sec(o.Makespan.Median), sec(o.Makespan.Min), sec(o.Makespan.Max),
			float64(o.GapMedian.Microseconds())/1000, float64(o.GapP90.Microseconds())/1000)
	}
	if n := len(res.Packs); n > 0 {
		fmt.Fprintf(tw, "packsize\thop 1..%d\t-\t-\t-\t%d -> %d bytes\n", n, res.Packs[0].Bytes, res.Packs[n-1].Bytes)
	}
	for _, r := range res.Resources {
		fmt.Fprintf(tw, "resources\t%s\t-\t-\t-\tRSS %.1f MiB/node, CPU %.1f%% all nodes\n", r.Phase, r.RSSMeanMB, r.CPUTotalPct)
	}
	for _, r := range res.Wfcommons {
		fmt.Fprintf(tw, "wfcommons\t%s\t%s\t%s\t%s\t%d tasks, bound %s, ratio %.2f\n", r.Instance, sec(r.Median), sec(r.Min), sec(r.Max), r.Tasks, sec(r.Bound), r.Ratio())
	}
	return tw.Flush()
}
