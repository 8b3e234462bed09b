package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/testnet"
	"github.com/bedwe/bedwe/testnet/bench"
)

// parseNodeSizes parses --nodes: empty, one size, or a comma-separated
// list of sizes (each at least 1, no repeats).
func parseNodeSizes(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--nodes %q: %q is not a number", s, strings.TrimSpace(f))
		}
		if n < 1 {
			return nil, fmt.Errorf("--nodes %d: want at least 1", n)
		}
		if seen[n] {
			return nil, fmt.Errorf("--nodes %q: %d given twice", s, n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

// waitQuiet waits up to wait for the 1-minute load average to fall below
// limit (0: no wait) and returns the last reading.
func waitQuiet(ctx context.Context, limit float64, wait time.Duration, progress io.Writer) (float64, error) {
	load, err := bench.LoadAverage()
	if err != nil || limit <= 0 || load < limit {
		return load, err
	}
	fmt.Fprintf(progress, "load average %.2f: waiting up to %s for it to fall below %.2f\n", load, wait, limit)
	deadline := time.Now().Add(wait)
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for load >= limit && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return load, ctx.Err()
		case <-t.C:
		}
		if load, err = bench.LoadAverage(); err != nil {
			return load, err
		}
	}
	if load >= limit {
		fmt.Fprintf(progress, "load average still %.2f after %s: measuring anyway\n", load, wait)
	}
	return load, nil
}

// runIdleBench runs the idle experiment: a testnet of each size in turn,
// settled, sampled and stopped.
func runIdleBench(ctx context.Context, c *cli.Context, sizes []int, asJSON bool, stdout, stderr io.Writer) error {
	if len(sizes) == 0 {
		sizes = []int{40}
		if c.Bool("quick") {
			sizes = []int{4}
		}
	}
	settle, asked := c.Duration("settle"), c.Duration("idle-window")
	if asked < 0 || settle < 0 {
		return cli.Exit(fmt.Sprintf("--settle %s, --idle-window %s: want a window of 0 (two presence refreshes) or more, and a settle of 0 or more", settle, asked), 1)
	}
	started := time.Now()
	var rows []bench.IdleRow
	var runErr error
	for _, n := range sizes {
		if _, err := waitQuiet(ctx, c.Float64("max-load"), c.Duration("load-wait"), stderr); err != nil {
			runErr = err
			break
		}
		window := idleWindow(asked, n)
		if refresh := node.TestnetConfig().PresenceRefreshFor(n - 1); window < refresh {
			fmt.Fprintf(stderr, "--idle-window %s is shorter than the presence refresh of %d nodes (%s): every node re-announces once a refresh, so this window may miss those announcements or hold them all; 0 (the default) samples two refreshes\n",
				window, n, refresh.Round(time.Second))
		}
		row, err := idleOnce(ctx, c, n, settle, window, stderr)
		if err != nil {
			runErr = err
			break
		}
		rows = append(rows, row)
	}
	var files []string
	if out := c.String("out"); out != "" && len(rows) > 0 {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return cli.Exit(fmt.Sprintf("--out: %v", err), 1)
		}
		path := filepath.Join(out, bench.ExpIdle+".csv")
		if err := writeTable(path, bench.IdleTable(rows)); err != nil {
			return cli.Exit(err.Error(), 1)
		}
		files = append(files, path)
		fmt.Fprintf(stderr, "wrote %s\n", path)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{
			"machine": bench.ThisMachine(), "experiments": []string{bench.ExpIdle}, "started": started, "ended": time.Now(),
			"tables": map[string]any{bench.ExpIdle: bench.IdleTable(rows).Maps()}, "files": files,
		}); err != nil {
			return err
		}
	} else if err := printIdleTable(stdout, rows); err != nil {
		return err
	}
	if runErr != nil {
		return cli.Exit(fmt.Sprintf("bench stopped: %v", runErr), 1)
	}
	return nil
}

// idleWindow is how long a testnet of n nodes is sampled: asked, or with
// asked 0 two presence refreshes of such a mesh (node.Config
// PresenceRefreshFor, testnet profile) and at least 30 s. Every node
// re-announces once a refresh, and nodes started together do so at
// nearly the same time: a window shorter than a refresh reads either
// the quiet between those announcements or all of them at once (at 80
// nodes, 9 % or 40 % of one core for the same mesh).
func idleWindow(asked time.Duration, n int) time.Duration {
	if asked > 0 {
		return asked
	}
	return max(30*time.Second, 2*node.TestnetConfig().PresenceRefreshFor(n-1))
}

// idleOnce starts a testnet of n nodes, measures it idle and stops it.
func idleOnce(ctx context.Context, c *cli.Context, n int, settle, window time.Duration, progress io.Writer) (bench.IdleRow, error) {
	dir, err := os.MkdirTemp("", "bedwe-idle-")
	if err != nil {
		return bench.IdleRow{}, fmt.Errorf("testnet directory: %w", err)
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(progress, "starting a testnet of %d nodes in %s\n", n, dir)
	opts := testnet.Options{Nodes: n, Zones: c.Int("zones"), Dir: dir, Binary: c.String("binary"), Services: bench.Services, Progress: progress}
	if c.IsSet("announce") {
		opts.Announce = c.Duration("announce")
	}
	m, err := testnet.Up(ctx, opts)
	if err != nil {
		return bench.IdleRow{}, fmt.Errorf("start a testnet of %d nodes: %w", n, err)
	}
	defer func() {
		if err := m.Down(); err != nil {
			fmt.Fprintln(progress, "bedwe: testnet down:", err)
		}
	}()
	return bench.RunIdle(ctx, m, settle, window, progress)
}

// printIdleTable prints one line per size, with the cost per node relative
// to the smallest size (1.0 or less: at most linear growth).
func printIdleTable(w io.Writer, rows []bench.IdleRow) error {
	cpu, rss := bench.IdleGrowth(rows)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NODES\tCPU ALL NODES\tCPU/NODE\tvs FIRST\tRSS/NODE\tRSS MAX\tvs FIRST\tPRIVATE\tPSS\tLOAD 1m\t")
	for i, r := range rows {
		fmt.Fprintf(tw, "%d\t%.1f%%\t%.2f%%\t%.2fx\t%.1f MiB\t%.1f MiB\t%.2fx\t%.1f MiB\t%.1f MiB\t%.2f..%.2f\t\n", r.Nodes, r.CPUTotalPct, r.CPUPerNodePct, cpu[i],
			r.RSSMeanMB, r.RSSMaxMB, rss[i], r.RSSAnonMeanMB, r.PSSMeanMB, r.LoadBefore, r.LoadAfter)
	}
	return tw.Flush()
}
