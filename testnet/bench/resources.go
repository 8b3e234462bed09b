package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ResourceRow is the resource use of every node of the testnet during one
// phase (idle or under load).
type ResourceRow struct {
	// Phase is "idle" or "load"; Window how long it was sampled.
	Phase  string
	Window time.Duration
	// Nodes is the number of node processes sampled.
	Nodes int
	// RSSMeanMB is the mean over nodes and samples of VmRSS, RSSMaxMB the
	// largest single reading, in MiB.
	RSSMeanMB, RSSMaxMB float64
	// RSSAnonMeanMB is the mean RssAnon (private memory) in MiB.
	RSSAnonMeanMB float64
	// ThreadsMean is the mean OS thread count per node.
	ThreadsMean float64
	// CPUTotalPct is the CPU time of all nodes over the window, in percent
	// of one core; CPUMeanPct and CPUMaxPct are per node.
	CPUTotalPct, CPUMeanPct, CPUMaxPct float64
	// Workflows counts the workflows completed in the window (load only);
	// LoadDesc says what ran.
	Workflows int
	LoadDesc  string
}

// RunResources samples every node's RSS and CPU for c.IdleWindow with
// nothing submitted, then for c.LoadWindow while c.LoadClients clients
// each submit no-op FORKs of 10 branches × 10 services back to back.
func (r *Runner) RunResources(ctx context.Context, c Config) ([]ResourceRow, error) {
	idle, err := r.sample(ctx, "idle", c.IdleWindow, nil)
	if err != nil {
		return nil, err
	}
	idle.LoadDesc = "nothing submitted"
	fmt.Fprintf(r.Progress, "resources idle: %d nodes, %.1f MiB RSS mean, %.1f%% CPU total\n", idle.Nodes, idle.RSSMeanMB, idle.CPUTotalPct)
	src := Parallel("e", 10, 10)
	var done atomic.Int64
	var loadErr error
	var mu sync.Mutex
	load := func(ctx context.Context) func() {
		lctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range max(c.LoadClients, 1) {
			wg.Go(func() {
				for lctx.Err() == nil {
					if _, err := r.Run(ctx, "load", src, nil); err != nil {
						mu.Lock()
						loadErr = errors.Join(loadErr, err)
						mu.Unlock()
						return
					}
					done.Add(1)
				}
			})
		}
		return func() { stop(); wg.Wait() }
	}
	row, err := r.sample(ctx, "load", c.LoadWindow, load)
	if err != nil {
		return []ResourceRow{idle}, err
	}
	if loadErr != nil {
		return []ResourceRow{idle}, fmt.Errorf("resources: load workflow: %w", loadErr)
	}
	row.Workflows = int(done.Load())
	row.LoadDesc = fmt.Sprintf("%d clients, FORK 10x10 no-op back to back", max(c.LoadClients, 1))
	fmt.Fprintf(r.Progress, "resources load: %.1f MiB RSS mean, %.1f%% CPU total, %d workflows\n", row.RSSMeanMB, row.CPUTotalPct, row.Workflows)
	return []ResourceRow{idle, row}, nil
}

// sample reads every node twice a second for window; start, when set,
// starts a load at the beginning and returns its stop function, which is
// called once the window closed (the CPU window ends before it).
func (r *Runner) sample(ctx context.Context, phase string, window time.Duration, start func(context.Context) func()) (ResourceRow, error) {
	n := len(r.Net.Nodes)
	cpu0 := make([]time.Duration, n)
	for i, nd := range r.Net.Nodes {
		s, err := ReadProc(nd.PID)
		if err != nil {
			return ResourceRow{}, fmt.Errorf("resources: node %d: %w", i, err)
		}
		cpu0[i] = s.CPU
	}
	var stop func()
	if start != nil {
		stop = start(ctx)
	}
	t0 := time.Now()
	row := ResourceRow{Phase: phase, Nodes: n}
	var rssSum, anonSum, threadSum float64
	samples := 0
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last []ProcSample
	for {
		last = last[:0]
		for i, nd := range r.Net.Nodes {
			s, err := ReadProc(nd.PID)
			if err != nil {
				if stop != nil {
					stop()
				}
				return row, fmt.Errorf("resources: node %d: %w", i, err)
			}
			last = append(last, s)
			mb := float64(s.RSS) / (1 << 20)
			rssSum += mb
			anonSum += float64(s.RSSAnon) / (1 << 20)
			threadSum += float64(s.Threads)
			row.RSSMaxMB = max(row.RSSMaxMB, mb)
			samples++
		}
		if time.Since(t0) >= window {
			break
		}
		select {
		case <-ctx.Done():
			if stop != nil {
				stop()
			}
			return row, ctx.Err()
		case <-tick.C:
		}
	}
	elapsed := time.Since(t0)
	if stop != nil {
		stop()
	}
	row.Window = elapsed
	row.RSSMeanMB = rssSum / float64(samples)
	row.RSSAnonMeanMB = anonSum / float64(samples)
	row.ThreadsMean = threadSum / float64(samples)
	for i, s := range last {
		pct := 100 * float64(s.CPU-cpu0[i]) / float64(elapsed)
		row.CPUTotalPct += pct
		row.CPUMaxPct = max(row.CPUMaxPct, pct)
	}
	row.CPUMeanPct = row.CPUTotalPct / float64(n)
	return row, nil
}
