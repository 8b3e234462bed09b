package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Experiment names, in the order they run.
const (
	ExpSequential = "sequential"
	ExpParallel   = "parallel"
	ExpNested     = "nested"
	ExpOverhead   = "overhead"
	ExpResources  = "resources"
	ExpWfcommons  = "wfcommons"
)

// Experiments lists every experiment in run order.
var Experiments = []string{ExpSequential, ExpParallel, ExpNested, ExpOverhead, ExpResources, ExpWfcommons}

// Solo lists the experiments that run by themselves, on testnets they
// start (not part of "all"): ExpIdle and ExpFlood.
var Solo = []string{ExpIdle, ExpFlood}

// ParseExperiments splits a comma-separated list ("all" or empty: every
// experiment of Experiments) and returns the names in run order. The
// experiments of [Solo] are accepted too (they are not part of "all":
// they start testnets of their own).
func ParseExperiments(list string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return slices.Clone(Experiments), nil
	}
	known := append(slices.Clone(Experiments), Solo...)
	want := map[string]bool{}
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if !slices.Contains(known, e) {
			return nil, fmt.Errorf("unknown experiment %q (known: %s)", e, strings.Join(known, ", "))
		}
		want[e] = true
	}
	var out []string
	for _, e := range known {
		if want[e] {
			out = append(out, e)
		}
	}
	return out, nil
}

// Config sizes the experiments.
type Config struct {
	// Repeat is how many times each point runs; the median is reported.
	Repeat int
	// ServiceTime is the fixed service time of the "sleep" mode of the
	// scaling experiments; 0 runs the no-op mode only.
	ServiceTime time.Duration
	// SequentialSizes are the numbers of services of the sequential runs.
	SequentialSizes []int
	// ParallelBranches are the FORK widths; ParallelLength the services per
	// branch.
	ParallelBranches []int
	ParallelLength   int
	// NestedTotal services are arranged in each of NestedDepths.
	NestedTotal  int
	NestedDepths []int
	// OverheadSizes are the sequence lengths whose traces give the per-hop
	// gaps; PackLength is the sequence length of the pack size estimate.
	OverheadSizes []int
	PackLength    int
	// IdleWindow and LoadWindow are how long resources are sampled at idle
	// and under load; LoadClients workflows run concurrently under load.
	IdleWindow, LoadWindow time.Duration
	LoadClients            int
	// WfcommonsFiles are WfFormat instances; WfcommonsScale multiplies
	// their runtimes; WfcommonsRepeat is the repeat count for them.
	WfcommonsFiles  []string
	WfcommonsScale  float64
	WfcommonsRepeat int
	// ReadsNothing gives every step of the sequential, parallel and
	// overhead workflows reads=() (ReadsNothing).
	ReadsNothing bool
}

// source is src as the config runs it.
func (c Config) source(src string) (string, error) {
	if !c.ReadsNothing {
		return src, nil
	}
	return ReadsNothing(src)
}

// DefaultConfig is the paper's setup: 5 repeats, 100 ms services, the sizes
// of Figs. 9-11.
func DefaultConfig() Config {
	return Config{
		Repeat:           5,
		ServiceTime:      100 * time.Millisecond,
		SequentialSizes:  []int{5, 10, 20, 50, 100, 150, 200},
		ParallelBranches: []int{2, 4, 6, 8, 10, 12, 14, 16, 18, 20},
		ParallelLength:   10,
		NestedTotal:      100,
		NestedDepths:     []int{1, 2, 3, 4, 5},
		OverheadSizes:    []int{10, 50, 200},
		PackLength:       200,
		IdleWindow:       10 * time.Second,
		LoadWindow:       15 * time.Second,
		LoadClients:      4,
		WfcommonsScale:   0.01,
		WfcommonsRepeat:  3,
	}
}

// QuickConfig is a tiny configuration for tests: every experiment runs,
// each point once, in a few seconds on a 4-node testnet.
func QuickConfig() Config {
	return Config{
		Repeat:           1,
		ServiceTime:      20 * time.Millisecond,
		SequentialSizes:  []int{2, 4},
		ParallelBranches: []int{2, 3},
		ParallelLength:   2,
		NestedTotal:      8,
		NestedDepths:     []int{1, 2},
		OverheadSizes:    []int{4},
		PackLength:       10,
		IdleWindow:       500 * time.Millisecond,
		LoadWindow:       time.Second,
		LoadClients:      2,
		WfcommonsScale:   0.0005,
		WfcommonsRepeat:  1,
	}
}

// Mode is how services behave in a scaling experiment.
type Mode struct {
	// Name is "noop" or "sleepNms".
	Name string
	// Prefix starts every service name: "e" reaches the echo builtin of
	// [Services], "sleep" the sleep builtin.
	Prefix string
	// ServiceTime is the sleep per service (0 for noop).
	ServiceTime time.Duration
}

// Modes returns the no-op mode and, when c.ServiceTime > 0, the sleep mode.
func (c Config) Modes() []Mode {
	out := []Mode{{Name: "noop", Prefix: "e"}}
	if c.ServiceTime > 0 {
		out = append(out, Mode{Name: fmt.Sprintf("sleep%dms", c.ServiceTime.Milliseconds()), Prefix: "sleep", ServiceTime: c.ServiceTime})
	}
	return out
}

// input is the workflow input of the mode: {"sleep_ms": N} for sleep.
func (m Mode) input() []byte {
	if m.ServiceTime <= 0 {
		return nil
	}
	return fmt.Appendf(nil, `{"sleep_ms":%d}`, m.ServiceTime.Milliseconds())
}

// Services is the services file of a bench testnet: the testnet defaults
// (fail*, flaky*, sleep*, echo for the rest) plus "wf.*", the services of
// imported WfCommons workflows, which sleep for the time the workflow input
// gives them by name (10 ms when it gives none).
const Services = `version: 1
patterns:
  - {match: "fail*", kind: fail, probability: 1}
  - {match: "flaky*", kind: fail, probability: 0.5, seed: 1}
  - {match: "sleep*", kind: sleep, from_request: true, field: sleep_ms, duration: 100ms}
  - {match: "wf.*", kind: sleep, from_request: true, field: sleep_ms, duration: 10ms}
  - {match: "*", kind: echo}
`
