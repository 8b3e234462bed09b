package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Point is one measured point of a scaling experiment.
type Point struct {
	// Experiment is sequential, parallel or nested; Mode the service mode.
	Experiment, Mode string
	// X is the plotted variable: services (sequential), branches
	// (parallel) or nesting depth (nested).
	X int
	// Services is the number of services of the workflow; CriticalPath
	// the number of services on its longest path.
	Services, CriticalPath int
	// Runs are the makespans of every repeat; Summary summarises them.
	Runs []time.Duration
	Summary
	// Floor is the service time along the critical path (CriticalPath ×
	// the mode's service time): no engine can finish sooner.
	Floor time.Duration
}

// PerHop is the engine's own time per service on the critical path:
// (median makespan - floor) / critical path.
func (p Point) PerHop() time.Duration {
	if p.CriticalPath == 0 {
		return 0
	}
	return (p.Median - p.Floor) / time.Duration(p.CriticalPath)
}

// shape is one workflow of a scaling experiment.
type shape struct {
	x, services, path int
	source            string
}

func (r *Runner) scaling(ctx context.Context, experiment string, c Config, shapes func(Mode) ([]shape, error)) ([]Point, error) {
	var out []Point
	for _, m := range c.Modes() {
		ws, err := shapes(m)
		if err != nil {
			return out, err
		}
		for _, w := range ws {
			runs, err := r.Repeat(ctx, experiment, m.Name+" x="+strconv.Itoa(w.x), c.Repeat, w.source, m.input())
			if err != nil {
				return out, err
			}
			ds := makespans(runs)
			out = append(out, Point{
				Experiment: experiment, Mode: m.Name, X: w.x,
				Services: w.services, CriticalPath: w.path,
				Runs: ds, Summary: Summarize(ds),
				Floor: time.Duration(w.path) * m.ServiceTime,
			})
		}
	}
	return out, nil
}

// RunSequential measures sequences of c.SequentialSizes services (Fig. 9).
func (r *Runner) RunSequential(ctx context.Context, c Config) ([]Point, error) {
	return r.scaling(ctx, ExpSequential, c, func(m Mode) ([]shape, error) {
		var out []shape
		for _, n := range c.SequentialSizes {
			src, err := c.source(Sequential(m.Prefix, n))
			if err != nil {
				return nil, err
			}
			out = append(out, shape{x: n, services: n, path: n, source: src})
		}
		return out, nil
	})
}

// RunParallel measures one FORK of each of c.ParallelBranches branches of
// c.ParallelLength services (Fig. 10).
func (r *Runner) RunParallel(ctx context.Context, c Config) ([]Point, error) {
	return r.scaling(ctx, ExpParallel, c, func(m Mode) ([]shape, error) {
		var out []shape
		for _, b := range c.ParallelBranches {
			src, err := c.source(Parallel(m.Prefix, b, c.ParallelLength))
			if err != nil {
				return nil, err
			}
			out = append(out, shape{x: b, services: b * c.ParallelLength, path: c.ParallelLength, source: src})
		}
		return out, nil
	})
}

// RunNested measures c.NestedTotal services in each of c.NestedDepths
// nested FORKs (Fig. 11; see [Nested] for the construction).
func (r *Runner) RunNested(ctx context.Context, c Config) ([]Point, error) {
	return r.scaling(ctx, ExpNested, c, func(m Mode) ([]shape, error) {
		var out []shape
		for _, d := range c.NestedDepths {
			src, sh, err := Nested(m.Prefix, c.NestedTotal, d)
			if err != nil {
				return nil, fmt.Errorf("nested experiment: %w", err)
			}
			out = append(out, shape{x: d, services: c.NestedTotal, path: sh.CriticalPath, source: src})
		}
		return out, nil
	})
}
