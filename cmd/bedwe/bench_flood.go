package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/testnet"
	"github.com/bedwe/bedwe/testnet/bench"
)

// floodFlags are the flags of the flood experiment.
func floodFlags() []cli.Flag {
	d := bench.DefaultFloodConfig()
	return []cli.Flag{
		&cli.IntFlag{Name: "flood-workflows", Usage: "flood: `N` two-step workflows to submit in all", Value: d.Workflows, DefaultText: "2000, 100 with --quick"},
		&cli.IntFlag{Name: "flood-clients", Usage: "flood: `N` concurrent clients; client c dials node c mod --nodes and submits its share", Value: d.Clients, DefaultText: "8, 2 with --quick"},
		&cli.IntFlag{Name: "flood-inflight", Usage: "flood: `N` submissions each client keeps going at once", Value: d.Inflight},
		&cli.DurationFlag{Name: "flood-step", Usage: "flood: how long (`DURATION`) each service call takes", Value: d.Step},
		&cli.IntFlag{Name: "flood-max-concurrent", Usage: "flood: every node's --max-concurrent `N`", Value: d.MaxConcurrent},
		&cli.IntFlag{Name: "flood-queue", Usage: "flood: every node's --queue `N`", Value: d.Queue},
		&cli.IntFlag{Name: "flood-max-workflows", Usage: "flood: every node's --max-workflows `N`", Value: d.MaxWorkflows},
		&cli.IntFlag{Name: "flood-fb-limit", Usage: "flood: max_concurrent `N` of service fb in the services file", Value: d.FbLimit},
		&cli.DurationFlag{Name: "flood-timeout", Usage: "flood: bound (`DURATION`) on the whole flood; a workflow accepted and not ended by then counts as lost", Value: d.Timeout},
	}
}

// floodConfig turns the flags into a flood configuration.
func floodConfig(c *cli.Context) (bench.FloodConfig, error) {
	fc := bench.DefaultFloodConfig()
	if c.Bool("quick") {
		fc.Workflows, fc.Clients = 100, 2
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"flood-workflows", &fc.Workflows}, {"flood-clients", &fc.Clients}, {"flood-inflight", &fc.Inflight},
		{"flood-max-concurrent", &fc.MaxConcurrent}, {"flood-queue", &fc.Queue}, {"flood-max-workflows", &fc.MaxWorkflows},
		{"flood-fb-limit", &fc.FbLimit}} {
		if c.IsSet(f.name) {
			if v := c.Int(f.name); v < 1 {
				return fc, fmt.Errorf("--%s %d: want at least 1", f.name, v)
			}
			*f.dst = c.Int(f.name)
		}
	}
	fc.Step, fc.Timeout = c.Duration("flood-step"), c.Duration("flood-timeout")
	if fc.Step < 0 {
		return fc, fmt.Errorf("--flood-step %s: want 0 or more", fc.Step)
	}
	if fc.Timeout <= 0 {
		return fc, fmt.Errorf("--flood-timeout %s: want a positive duration", fc.Timeout)
	}
	return fc, fc.Check()
}

// runFloodBench runs the flood experiment on a testnet of its own: nodes
// with the flood's limits, fa and fb served by the bench's counting
// service.
func runFloodBench(ctx context.Context, c *cli.Context, sizes []int, asJSON bool, stdout, stderr io.Writer) error {
	fc, err := floodConfig(c)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	nodes := 16
	if c.Bool("quick") {
		nodes = 4
	}
	if len(sizes) > 1 {
		return cli.Exit("the flood experiment runs on one testnet: give one --nodes size", 1)
	}
	if len(sizes) == 1 {
		nodes = sizes[0]
	}
	started := time.Now().UTC()
	row, runErr := floodOnce(ctx, c, nodes, fc, stderr)
	var rows []bench.FloodRow
	if runErr == nil {
		rows = append(rows, row)
	}
	var files []string
	if out := c.String("out"); out != "" && len(rows) > 0 {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return cli.Exit(fmt.Sprintf("--out: %v", err), 1)
		}
		for _, t := range []bench.Table{bench.FloodTable(rows), bench.FloodNodesTable(rows)} {
			path := filepath.Join(out, t.Name+".csv")
			if err := writeTable(path, t); err != nil {
				return cli.Exit(err.Error(), 1)
			}
			files = append(files, path)
		}
		fmt.Fprintf(stderr, "wrote %s\n", strings.Join(files, ", "))
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{
			"machine": bench.ThisMachine(), "nodes": nodes, "zones": c.Int("zones"), "experiments": []string{bench.ExpFlood},
			"started": started, "ended": time.Now().UTC(), "files": files,
			"tables": map[string]any{bench.ExpFlood: bench.FloodTable(rows).Maps(), bench.ExpFlood + "_nodes": bench.FloodNodesTable(rows).Maps()},
		}); err != nil {
			return err
		}
	} else if len(rows) > 0 {
		if err := printFloodTable(stdout, row); err != nil {
			return err
		}
	}
	if runErr != nil {
		return cli.Exit(fmt.Sprintf("bench stopped: %v", runErr), 1)
	}
	if len(row.Problems) > 0 {
		return cli.Exit(fmt.Sprintf("flood: %d problem(s): %s", len(row.Problems), strings.Join(row.Problems, "; ")), 1)
	}
	return nil
}

// writeTable writes t as CSV to path.
func writeTable(path string, t bench.Table) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	werr := t.WriteCSV(f)
	if cerr := f.Close(); werr == nil && cerr != nil {
		werr = fmt.Errorf("--out: %w", cerr)
	}
	return werr
}

// floodOnce starts the counting service and a testnet of n nodes with the
// flood's limits, floods it and stops both.
func floodOnce(ctx context.Context, c *cli.Context, n int, fc bench.FloodConfig, progress io.Writer) (bench.FloodRow, error) {
	svc, err := bench.StartCountingService(fc.Step)
	if err != nil {
		return bench.FloodRow{}, err
	}
	defer svc.Close()
	dir, err := os.MkdirTemp("", "bedwe-flood-")
	if err != nil {
		return bench.FloodRow{}, fmt.Errorf("testnet directory: %w", err)
	}
	defer os.RemoveAll(dir)
	binary := c.String("binary")
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return bench.FloodRow{}, fmt.Errorf("find the bedwe binary: %w", err)
		}
	}
	fmt.Fprintf(progress, "starting a testnet of %d nodes in %s (node flags %s)\n", n, dir, strings.Join(fc.NodeArgs(), " "))
	t0 := time.Now()
	m, err := testnet.Up(ctx, testnet.Options{
		Nodes: n, Zones: c.Int("zones"), Dir: dir, Binary: binary, NodeFlags: fc.NodeArgs(),
		Services: bench.FloodServices(svc.URL(), fc.FbLimit), Progress: progress, Announce: c.Duration("announce"),
	})
	if err != nil {
		return bench.FloodRow{}, fmt.Errorf("start a flood testnet of %d nodes: %w", n, err)
	}
	defer func() {
		fmt.Fprintf(progress, "stopping the testnet in %s\n", dir)
		if err := m.Down(); err != nil {
			fmt.Fprintln(progress, "bedwe: testnet down:", err)
		}
	}()
	fmt.Fprintf(progress, "testnet up in %s\n", time.Since(t0).Round(time.Millisecond))
	return bench.RunFlood(ctx, m, fc, svc, progress)
}

// printFloodTable prints the flood's figures and one line per node.
func printFloodTable(w io.Writer, r bench.FloodRow) error {
	c := r.Config
	busy, other := 0, 0
	for k, n := range r.Refused {
		if bench.IsBusyReason(k) {
			busy += n
		} else {
			other += n
		}
	}
	sec := func(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }
	peak, tpeak := r.Peak(false)
	peakFb, tpeakFb := r.Peak(true)
	traced := func(v int) string {
		if v < 0 {
			return "not read"
		}
		return fmt.Sprint(v)
	}
	queued, occupied, origins := r.GaugeMax()
	within := "yes"
	if len(r.LimitBreaches()) > 0 {
		within = "NO (see problems)"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	f := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	f("flood", "%d nodes (%d zones), %d clients x %d in flight, workflow \"fa fb\", %s per service call", r.Nodes, r.Zones, c.Clients, c.Inflight, c.Step)
	f("limits per node", "--max-concurrent %d, --queue %d, --max-workflows %d, fb max_concurrent %d", c.MaxConcurrent, c.Queue, c.MaxWorkflows, c.FbLimit)
	f("workflows", "%d, in %d submission calls", r.Workflows, r.Attempts)
	f("accepted", "%d", r.Accepted)
	f("succeeded", "%d", r.Succeeded)
	f("failed", "%d", r.Failed)
	f("lost", "%d (accepted, not ended within %s)", r.Lost, c.Timeout)
	f("not accepted", "%d given up (refused other than busy), %d never accepted before the timeout", r.GivenUp, r.Unsubmitted)
	f("refused", "%d busy, %d other: %s", busy, other, bench.RefusalSummary(r.Refused))
	f("throughput", "%.1f workflows/s (%d succeeded in %s; the last accepted after %s)", r.Throughput, r.Succeeded, sec(r.Wall), sec(r.SubmitSpan))
	f("latency", "p50 %s, p90 %s, p99 %s, max %s (origin: submitted -> finished)", sec(r.Latency.P50), sec(r.Latency.P90), sec(r.Latency.P99), sec(r.Latency.Max))
	f("from first try", "p50 %s, p99 %s (client's first attempt -> finished, busy refusals included)", sec(r.FirstTry.P50), sec(r.FirstTry.P99))
	f("calls at once", "max %d per node (limit %d), %d of fb (limit %d): counted by the service", peak, c.MaxConcurrent, peakFb, c.FbLimit)
	f("from traces", "max %s per node, %s of fb (overlap of trace Start..End; End is stamped just after the slot's release)", traced(tpeak), traced(tpeakFb))
	f("gauges (sampled)", "running or waiting max %s (limit %d + %d), of them waiting max %s; origin workflows running max %s (limit %d); %d samples, every %s",
		traced(occupied), c.MaxConcurrent, c.Queue, traced(queued), traced(origins), c.MaxWorkflows, r.Samples, c.Sample)
	f("service calls", "%d, %d distinct step attempts, %d repeated", r.ServiceCalls, r.Distinct, r.Repeated)
	f("hand-offs", "%s, %s refused busy (events files)", traced(r.Handoffs), traced(r.HandoffsBusy))
	f("within limits", "%s", within)
	if len(r.Problems) == 0 {
		f("problems", "none")
	}
	for _, p := range r.Problems {
		f("problem", "%s", p)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "NODE\tPEER\tZONE\tORIGIN OF\tCALLS\tPEAK/%d\tFB/%d\tTRACE PEAK\tTRACE FB\tRUN+WAIT/%d\tWAITING\tORIGINS/%d\t\n", c.MaxConcurrent, c.FbLimit, c.MaxConcurrent+c.Queue, c.MaxWorkflows)
	for _, n := range r.PerNode {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", n.Index, rpc.ShortIDString(n.Peer), n.Zone, n.Accepted, n.Calls, n.Peak, n.PeakFb,
			traced(n.TracePeak), traced(n.TracePeakFb), traced(n.OccupiedMax), traced(n.QueuedMax), traced(n.OriginsMax))
	}
	return tw.Flush()
}
