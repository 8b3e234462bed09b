package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/pack"
	"github.com/bedwe/bedwe/testnet"
)

// Runner submits workflows to one node of a running testnet (the origin of
// every workflow it runs) and measures them.
type Runner struct {
	// Net is the running testnet.
	Net *testnet.Manifest
	// Progress, when set, receives one line per measured run.
	Progress io.Writer
	// Poll is how often Wait asks the origin for the status; it does not
	// affect the measurement (the origin timestamps submission and
	// completion itself), only the load the polling adds.
	Poll time.Duration
	// Timeout bounds one workflow run.
	Timeout time.Duration

	cl    *client.Client
	start time.Time
}

// NewRunner dials node 0 of m. Close the runner when done.
func NewRunner(ctx context.Context, m *testnet.Manifest, progress io.Writer) (*Runner, error) {
	if m == nil || len(m.Nodes) == 0 {
		return nil, errors.New("bench: a runner needs a testnet with at least one node")
	}
	cl, err := client.DialDataDir(ctx, m.Nodes[0].DataDir)
	if err != nil {
		return nil, fmt.Errorf("bench: dial testnet node 0: %w", err)
	}
	if progress == nil {
		progress = io.Discard
	}
	return &Runner{Net: m, Progress: progress, Poll: 25 * time.Millisecond, Timeout: 10 * time.Minute, cl: cl, start: time.Now()}, nil
}

// Close releases the runner's client connection.
func (r *Runner) Close() error { return r.cl.Close() }

// Client is the runner's connection to the origin node.
func (r *Runner) Client() *client.Client { return r.cl }

// Run is one measured workflow execution.
type Run struct {
	// Makespan is the origin's completion time minus its submission time.
	Makespan time.Duration
	// Status is the final status with result and trace.
	Status api.Status
}

// Run submits source with input (nil for none), waits for it to end and
// fails unless it succeeded.
func (r *Runner) Run(ctx context.Context, name, source string, input json.RawMessage) (Run, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	st, err := r.cl.Submit(ctx, name, source, input)
	if err != nil {
		return Run{}, fmt.Errorf("bench: submit %s: %w", name, err)
	}
	final, err := r.cl.Wait(ctx, st.ID, r.Poll, nil)
	if err != nil {
		return Run{}, fmt.Errorf("bench: wait for %s (%s): %w", name, st.ID, err)
	}
	if final.State != api.StateSucceeded {
		return Run{}, fmt.Errorf("bench: workflow %s (%s) %s: %s", name, st.ID, final.State, final.Error)
	}
	return Run{Makespan: final.Finished.Sub(final.Submitted), Status: final}, nil
}

// Repeat runs source n times one after another, printing one progress line
// per run: experiment, point, repeat, makespan and the time since the
// runner started.
func (r *Runner) Repeat(ctx context.Context, experiment, point string, n int, source string, input json.RawMessage) ([]Run, error) {
	runs := make([]Run, 0, n)
	for i := range n {
		run, err := r.Run(ctx, experiment+" "+point, source, input)
		if err != nil {
			return runs, fmt.Errorf("%s %s repeat %d/%d: %w", experiment, point, i+1, n, err)
		}
		runs = append(runs, run)
		fmt.Fprintf(r.Progress, "%s %s repeat %d/%d: %s (t=%s)\n", experiment, point, i+1, n,
			run.Makespan.Round(time.Millisecond), time.Since(r.start).Round(time.Second))
	}
	return runs, nil
}

// Warmup runs one unmeasured no-op sequence twice as long as the testnet
// is large, so the hand-offs of the first measured run do not pay for
// opening connections and loading code paths.
func (r *Runner) Warmup(ctx context.Context) error {
	t0 := time.Now()
	if _, err := r.Run(ctx, "warm-up", Sequential("e", 2*len(r.Net.Nodes)), nil); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	fmt.Fprintf(r.Progress, "warm-up: %d services in %s\n", 2*len(r.Net.Nodes), time.Since(t0).Round(time.Millisecond))
	return nil
}

func makespans(runs []Run) []time.Duration {
	out := make([]time.Duration, len(runs))
	for i, r := range runs {
		out[i] = r.Makespan
	}
	return out
}

// okSteps returns the successful attempts of a trace ordered by start.
func okSteps(tr []pack.TraceEntry) []pack.TraceEntry {
	var out []pack.TraceEntry
	for _, e := range tr {
		if e.Outcome == pack.OutcomeOK {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b pack.TraceEntry) int { return a.Start.Compare(b.Start) })
	return out
}
