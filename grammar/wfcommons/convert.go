package wfcommons

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

// Options tune Convert.
type Options struct {
	// Scale multiplies every runtime before it is written as expect= (and
	// sleep=), e.g. 0.01 to replay a 6-minute workflow in about 4 s. Zero
	// means 1 (real runtimes). Critical paths in the Result stay unscaled.
	Scale float64
	// ServicePrefix is put in front of every service name, e.g. "wf." to keep
	// imported services apart from others on the same mesh. It must use the
	// NAME charset: letters, digits, '_', '-', '.'.
	ServicePrefix string
	// MinSleep is the smallest expect= written. Durations are rounded to the
	// millisecond and never written below max(MinSleep, 1ms): the language
	// reads expect=0 as "unknown".
	MinSleep time.Duration
	// Limits are the grammar limits the workflow must meet (zero fields:
	// grammar.DefaultLimits). FORKs wider than MaxArms are nested, names
	// longer than MaxNameLen are cut; a workflow nested deeper than MaxDepth
	// is an error.
	Limits grammar.Limits
}

// Result is a converted workflow and what the conversion did.
type Result struct {
	// Workflow is the converted workflow. Every task is one service; the
	// services are distinct, so no FORK produces an output label twice.
	Workflow *grammar.Workflow
	// Tasks is the number of tasks (= services).
	Tasks int
	// Edges is the number of distinct dependencies the file declares.
	Edges int
	// TransitiveEdges counts declared dependencies implied by others; they
	// are dropped before decomposing (the dependency relation is the same).
	TransitiveEdges int
	// AddedEdges counts the direct dependencies of the converted workflow
	// (last services of one step to first services of the next) that the
	// original does not imply. Zero for series-parallel instances.
	AddedEdges int
	// AddedPairs counts the ordered task pairs the converted workflow imposes
	// that the original does not: the parallelism given up.
	AddedPairs int
	// ForcedCuts is how many times a non-series-parallel piece had to be cut.
	ForcedCuts int
	// CriticalPath is the longest runtime path of the original DAG and
	// ConvertedCriticalPath that of the converted workflow, both unscaled.
	CriticalPath, ConvertedCriticalPath time.Duration
	// SeriesParallel reports whether the instance converted exactly: the
	// converted workflow has the same dependency relation as the original.
	SeriesParallel bool
	// Services lists the services in file (task) order.
	Services []ServiceInfo
	// Name and SchemaVersion are the instance's, Scale the runtime factor
	// applied (for headers and reports).
	Name, SchemaVersion string
	Scale               float64
}

// ServiceInfo maps one task to its service.
type ServiceInfo struct {
	// Name is the service name in the workflow.
	Name string
	// TaskID is the task's id in the file.
	TaskID string
	// Runtime is the task's recorded runtime, unscaled.
	Runtime time.Duration
	// Expect is the expect= value written: the scaled, rounded runtime.
	Expect time.Duration
}

// Growth is the relative lengthening of the critical path, e.g. 0.05 for
// 5 %; zero when the original critical path is zero.
func (r *Result) Growth() float64 {
	if r.CriticalPath <= 0 {
		return 0
	}
	return float64(r.ConvertedCriticalPath-r.CriticalPath) / float64(r.CriticalPath)
}

// Convert turns an instance into a workflow of the language. Series-parallel
// DAGs convert exactly; others get added dependencies (see the package
// documentation for the heuristic). It never loses a dependency: it checks
// that every original dependency holds in the result before returning.
func Convert(inst *Instance, opts Options) (*Result, error) {
	if inst == nil {
		return nil, errors.New("wfcommons: convert: nil instance")
	}
	scale := opts.Scale
	if scale == 0 {
		scale = 1
	}
	if scale < 0 || math.IsNaN(scale) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("wfcommons: convert: scale %v: want a positive number", opts.Scale)
	}
	if opts.MinSleep < 0 {
		return nil, fmt.Errorf("wfcommons: convert: min sleep %v is negative", opts.MinSleep)
	}
	if err := checkPrefix(opts.ServicePrefix); err != nil {
		return nil, fmt.Errorf("wfcommons: convert: %w", err)
	}
	if n := len(inst.Tasks); n > MaxTasks {
		return nil, fmt.Errorf("wfcommons: convert: %d tasks: more than the %d this converter handles", n, MaxTasks)
	}
	order, err := inst.analyse()
	if err != nil {
		return nil, fmt.Errorf("wfcommons: convert: %w", err)
	}
	g := newDAG(inst, order)
	cp := g.criticalPath()

	d := newDecomposer(g)
	all := make([]int, g.n)
	for i := range all {
		all[i] = i
	}
	root := d.decompose(all, cp)

	m := measure{g: g}
	if err := m.walk(root, make([]uint64, (g.n+63)/64)); err != nil {
		return nil, fmt.Errorf("wfcommons: convert: internal error: %w", err)
	}
	if m.pairs != d.forced {
		return nil, fmt.Errorf("wfcommons: convert: internal error: cuts added %d order pairs, result has %d", d.forced, m.pairs)
	}

	def := grammar.DefaultLimits()
	maxArms, maxName := opts.Limits.MaxArms, opts.Limits.MaxNameLen
	if maxArms == 0 {
		maxArms = def.MaxArms
	}
	if maxName == 0 {
		maxName = def.MaxNameLen
	}
	names := serviceNames(inst, opts.ServicePrefix, maxName)
	b := builder{g: g, inst: inst, names: names, scale: scale, minSleep: max(opts.MinSleep, time.Millisecond), maxArms: maxArms}
	res := &Result{
		Workflow:              &grammar.Workflow{Steps: b.steps(root)},
		Tasks:                 g.n,
		Edges:                 g.edges,
		TransitiveEdges:       g.transitive,
		AddedEdges:            m.edges,
		AddedPairs:            m.pairs,
		ForcedCuts:            d.cuts,
		CriticalPath:          cp,
		ConvertedCriticalPath: root.cp,
		SeriesParallel:        m.pairs == 0,
		Services:              make([]ServiceInfo, len(inst.Tasks)),
		Name:                  inst.Name,
		SchemaVersion:         inst.SchemaVersion,
		Scale:                 scale,
	}
	for i, t := range inst.Tasks {
		res.Services[i] = ServiceInfo{Name: names[i], TaskID: t.ID, Runtime: t.Runtime, Expect: b.expect(t.Runtime)}
	}
	if err := grammar.Check(res.Workflow, opts.Limits); err != nil {
		return nil, fmt.Errorf("wfcommons: convert: the converted workflow breaks the language's limits: %w", err)
	}
	return res, nil
}

// SleepMillis maps every service name to its expect= value in milliseconds:
// the workflow input {"sleep_ms": SleepMillis()} makes the sleep builtin
// (from_request: true) of package node/service sleep that long per service.
func (r *Result) SleepMillis() map[string]int64 {
	out := make(map[string]int64, len(r.Services))
	for _, s := range r.Services {
		out[s.Name] = s.Expect.Milliseconds()
	}
	return out
}

// measure compares the converted order with the original one.
type measure struct {
	g     *dag
	pairs int // ordered pairs added
	edges int // direct dependencies added
}

// walk visits node n, given after: the set of tasks the conversion runs after
// all of n. A leaf's successors in the converted workflow are exactly after;
// its original descendants must be among them.
func (m *measure) walk(n *spNode, after []uint64) error {
	switch n.kind {
	case spLeaf:
		desc := m.g.desc.row(n.pos)
		if !subset(desc, after) {
			return fmt.Errorf("task at position %d lost a dependency", n.pos)
		}
		m.pairs += count(after) - count(desc)
	case spParallel:
		for _, k := range n.kids {
			if err := m.walk(k, after); err != nil {
				return err
			}
		}
	case spSeries:
		acc := append([]uint64(nil), after...)
		for i := len(n.kids) - 1; i >= 0; i-- {
			if err := m.walk(n.kids[i], acc); err != nil {
				return err
			}
			if i > 0 {
				m.edges += m.newEdges(n.kids[i-1], n.kids[i])
			}
			for _, p := range leaves(n.kids[i], nil) {
				set(acc, p)
			}
		}
	}
	return nil
}

// newEdges counts the direct dependencies from the last services of a to the
// first services of b that the original order lacks.
func (m *measure) newEdges(a, b *spNode) int {
	n := 0
	for _, u := range ends(a, true, nil) {
		desc := m.g.desc.row(u)
		for _, v := range ends(b, false, nil) {
			if !has(desc, v) {
				n++
			}
		}
	}
	return n
}

// leaves appends the positions of all tasks under n.
func leaves(n *spNode, out []int) []int {
	if n.kind == spLeaf {
		return append(out, n.pos)
	}
	for _, k := range n.kids {
		out = leaves(k, out)
	}
	return out
}

// ends appends the tasks under n that run last (sinks) or first (sources).
func ends(n *spNode, last bool, out []int) []int {
	switch n.kind {
	case spLeaf:
		return append(out, n.pos)
	case spSeries:
		if last {
			return ends(n.kids[len(n.kids)-1], last, out)
		}
		return ends(n.kids[0], last, out)
	default:
		for _, k := range n.kids {
			out = ends(k, last, out)
		}
		return out
	}
}

// fork returns a FORK of branches, nesting FORKs when there are more
// branches than one may have (parallel composition is associative, so the
// order is unchanged): the branches are dealt into near-equal groups.
func (b *builder) fork(branches []*grammar.Workflow) *grammar.Fork {
	for b.maxArms >= 2 && len(branches) > b.maxArms {
		groups := (len(branches) + b.maxArms - 1) / b.maxArms
		next := make([]*grammar.Workflow, 0, groups)
		for g := range groups {
			part := branches[g*len(branches)/groups : (g+1)*len(branches)/groups]
			if len(part) == 1 {
				next = append(next, part[0])
				continue
			}
			next = append(next, &grammar.Workflow{Steps: []grammar.Step{&grammar.Fork{Branches: part}}})
		}
		branches = next
	}
	return &grammar.Fork{Branches: branches}
}

// builder turns the decomposition tree into the AST.
type builder struct {
	g        *dag
	inst     *Instance
	names    []string
	scale    float64
	minSleep time.Duration
	maxArms  int // widest FORK; negative: no limit
}

func (b *builder) expect(rt time.Duration) time.Duration {
	d := time.Duration(math.Round(float64(rt) * b.scale)).Round(time.Millisecond)
	return max(d, b.minSleep)
}

func (b *builder) steps(n *spNode) []grammar.Step {
	switch n.kind {
	case spLeaf:
		t := b.g.task[n.pos]
		v := b.expect(b.inst.Tasks[t].Runtime).String()
		return []grammar.Step{&grammar.Service{Name: b.names[t], Attrs: []grammar.Attr{{Key: grammar.AttrExpect, Value: v}}}}
	case spParallel:
		branches := make([]*grammar.Workflow, 0, len(n.kids))
		for _, k := range n.kids {
			branches = append(branches, &grammar.Workflow{Steps: b.steps(k)})
		}
		return []grammar.Step{b.fork(branches)}
	default:
		var out []grammar.Step
		for _, k := range n.kids {
			out = append(out, b.steps(k)...)
		}
		return out
	}
}
