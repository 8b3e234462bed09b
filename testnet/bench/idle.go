package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bedwe/bedwe/testnet"
)

// ExpIdle is the idle-cost scaling experiment: it is run by itself, over
// testnets of several sizes started in turn (bedwe bench --nodes
// 8,16,40,80 --experiments idle), not on one testnet like the others.
const ExpIdle = "idle"

// IdleRow is the idle cost of one testnet size: every node's CPU and RSS
// sampled from /proc while nothing is submitted.
type IdleRow struct {
	// Nodes is the testnet size; Settle how long it ran idle before the
	// window opened; Window how long it was sampled.
	Nodes          int
	Settle, Window time.Duration
	// CPUTotalPct is the CPU time of all nodes over the window in percent
	// of one core; CPUPerNodePct is that divided by Nodes and CPUMaxPct
	// the busiest node.
	CPUTotalPct, CPUPerNodePct, CPUMaxPct float64
	// RSSMeanMB and RSSMaxMB are VmRSS over nodes and samples, in MiB.
	RSSMeanMB, RSSMaxMB float64
	// RSSAnonMeanMB is the mean private part of RSS (RssAnon), and
	// PSSMeanMB the mean proportional set size at the end of the window
	// (the executable's shared pages divided among the nodes): what a
	// node adds to the machine's memory, in MiB.
	RSSAnonMeanMB, PSSMeanMB float64
	// ThreadsMean is the mean OS thread count per node.
	ThreadsMean float64
	// LoadBefore and LoadAfter are the machine's 1-minute load average
	// (/proc/loadavg) when the window opened and closed.
	LoadBefore, LoadAfter float64
}

// RunIdle samples the idle cost of the running testnet m: it waits
// settle, then reads every node's CPU and RSS twice a second for window.
func RunIdle(ctx context.Context, m *testnet.Manifest, settle, window time.Duration, progress io.Writer) (IdleRow, error) {
	if progress == nil {
		progress = io.Discard
	}
	row := IdleRow{Nodes: len(m.Nodes), Settle: settle}
	t := time.NewTimer(settle)
	select {
	case <-ctx.Done():
		t.Stop()
		return row, ctx.Err()
	case <-t.C:
	}
	row.LoadBefore, _ = LoadAverage()
	r := &Runner{Net: m, Progress: progress}
	s, err := r.sample(ctx, "idle", window, nil)
	if err != nil {
		return row, err
	}
	row.LoadAfter, _ = LoadAverage()
	row.Window = s.Window
	row.CPUTotalPct, row.CPUMaxPct = s.CPUTotalPct, s.CPUMaxPct
	row.CPUPerNodePct = s.CPUMeanPct
	row.RSSMeanMB, row.RSSMaxMB, row.ThreadsMean = s.RSSMeanMB, s.RSSMaxMB, s.ThreadsMean
	row.RSSAnonMeanMB = s.RSSAnonMeanMB
	var pss float64
	for i, nd := range m.Nodes {
		v, err := ReadPSS(nd.PID)
		if err != nil {
			return row, fmt.Errorf("idle: node %d: %w", i, err)
		}
		pss += float64(v) / (1 << 20)
	}
	row.PSSMeanMB = pss / float64(len(m.Nodes))
	fmt.Fprintf(progress, "idle %d nodes: %.1f%% of one core together (%.2f%% a node), RSS %.1f MiB a node (max %.1f; private %.1f, PSS %.1f), load %.2f -> %.2f\n",
		row.Nodes, row.CPUTotalPct, row.CPUPerNodePct, row.RSSMeanMB, row.RSSMaxMB, row.RSSAnonMeanMB, row.PSSMeanMB, row.LoadBefore, row.LoadAfter)
	return row, nil
}

// LoadAverage reads the machine's 1-minute load average from /proc/loadavg.
func LoadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, fmt.Errorf("read load average: %w", err)
	}
	return parseLoadAvg(string(b))
}

func parseLoadAvg(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, fmt.Errorf("empty /proc/loadavg")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/loadavg %q: %w", s, err)
	}
	return v, nil
}

// IdleTable is the idle experiment as a table (idle.csv).
func IdleTable(rows []IdleRow) Table {
	t := Table{Name: ExpIdle, Header: []string{"nodes", "settle_s", "window_s", "cpu_total_pct", "cpu_per_node_pct", "cpu_max_pct",
		"rss_mean_mib", "rss_max_mib", "rss_anon_mean_mib", "pss_mean_mib", "threads_mean", "load1_before", "load1_after"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []any{r.Nodes, round3(r.Settle.Seconds()), round3(r.Window.Seconds()), round3(r.CPUTotalPct), round3(r.CPUPerNodePct),
			round3(r.CPUMaxPct), round3(r.RSSMeanMB), round3(r.RSSMaxMB), round3(r.RSSAnonMeanMB), round3(r.PSSMeanMB), round3(r.ThreadsMean), r.LoadBefore, r.LoadAfter})
	}
	return t
}

// IdleGrowth compares each size's idle cost with the smallest size's,
// scaled linearly: the ratio of CPU per node and of RSS per node to the
// smallest size's. A ratio near or below 1 means the cost grows at most
// linearly with the nodes.
func IdleGrowth(rows []IdleRow) (cpu, rss []float64) {
	if len(rows) == 0 {
		return nil, nil
	}
	base := rows[0]
	for _, r := range rows {
		cpu = append(cpu, ratio(r.CPUPerNodePct, base.CPUPerNodePct))
		rss = append(rss, ratio(r.RSSMeanMB, base.RSSMeanMB))
	}
	return cpu, rss
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
