package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// OverheadRow is the per-hop cost of a no-op sequence of N services, seen
// from the makespan and from the trace (all nodes share one clock on a
// testnet, so timestamps of different nodes compare).
type OverheadRow struct {
	// N is the number of services; Repeats how many runs were pooled.
	N, Repeats int
	// Makespan summarises the runs; PerService is its median / N.
	Makespan   Summary
	PerService time.Duration
	// Gap is the time from one step's end to the next step's start (the
	// hand-off: peel, pack encode, peer choice, stream, journal, ack,
	// executor start), pooled over all runs: median, 90th percentile, max.
	GapMedian, GapP90, GapMax time.Duration
	// Service is the median time inside a step (End - Start): the no-op
	// service itself plus the executor around it.
	Service time.Duration
	// StartDelay is the median time from submission to the first step's
	// start; FinishDelay from the last step's end to completion at the
	// origin.
	StartDelay, FinishDelay time.Duration
}

// RunOverhead runs no-op sequences of c.OverheadSizes services and reads the
// per-hop overhead from their traces.
func (r *Runner) RunOverhead(ctx context.Context, c Config) ([]OverheadRow, error) {
	var out []OverheadRow
	for _, n := range c.OverheadSizes {
		src, err := c.source(Sequential("e", n))
		if err != nil {
			return out, err
		}
		runs, err := r.Repeat(ctx, ExpOverhead, "noop n="+strconv.Itoa(n), c.Repeat, src, nil)
		if err != nil {
			return out, err
		}
		row, err := overheadOf(n, runs)
		if err != nil {
			return out, err
		}
		out = append(out, row)
	}
	return out, nil
}

// overheadOf reads the gaps and delays out of runs of a sequence of n.
func overheadOf(n int, runs []Run) (OverheadRow, error) {
	var gaps, service, startD, finishD []time.Duration
	for _, run := range runs {
		steps := okSteps(run.Status.Trace)
		if len(steps) != n {
			return OverheadRow{}, fmt.Errorf("overhead: workflow %s has %d successful steps in its trace, want %d", run.Status.ID, len(steps), n)
		}
		for i, e := range steps {
			service = append(service, e.End.Sub(e.Start))
			if i > 0 {
				gaps = append(gaps, e.Start.Sub(steps[i-1].End))
			}
		}
		startD = append(startD, steps[0].Start.Sub(run.Status.Submitted))
		finishD = append(finishD, run.Status.Finished.Sub(steps[n-1].End))
	}
	mk := Summarize(makespans(runs))
	return OverheadRow{
		N: n, Repeats: len(runs), Makespan: mk, PerService: mk.Median / time.Duration(n),
		GapMedian: Quantile(gaps, 0.5), GapP90: Quantile(gaps, 0.9), GapMax: Quantile(gaps, 1),
		Service:    Quantile(service, 0.5),
		StartDelay: Quantile(startD, 0.5), FinishDelay: Quantile(finishD, 0.5),
	}, nil
}
