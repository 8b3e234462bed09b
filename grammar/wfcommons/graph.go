package wfcommons

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxTasks bounds the instances Convert accepts: it keeps two n×n bit
// matrices (descendants and ancestors), 2·n²/8 bytes — 100 MB at the limit.
const MaxTasks = 20000

// analyse checks the parent indices and returns a topological order of the
// task indices (Kahn's algorithm, ties in file order), or an error naming a
// dependency cycle.
func (inst *Instance) analyse() ([]int, error) {
	n := len(inst.Tasks)
	if n == 0 {
		return nil, fmt.Errorf("instance has no tasks")
	}
	indeg := make([]int, n)
	children := make([][]int, n)
	for i, t := range inst.Tasks {
		for k, p := range t.Parents {
			if p < 0 || p >= n {
				return nil, fmt.Errorf("task %q: parent index %d out of range [0,%d)", t.ID, p, n)
			}
			if k > 0 && p <= t.Parents[k-1] {
				return nil, fmt.Errorf("task %q: parents must be sorted and distinct", t.ID)
			}
			indeg[i]++
			children[p] = append(children[p], i)
		}
	}
	order := make([]int, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, c := range children[order[k]] {
			if indeg[c]--; indeg[c] == 0 {
				order = append(order, c)
			}
		}
	}
	if len(order) < n {
		return nil, inst.cycleError(indeg)
	}
	return order, nil
}

// cycleError describes one dependency cycle among the tasks Kahn's algorithm
// could not order (those left with indeg > 0): walking to a parent that is
// also left over must eventually repeat a task.
func (inst *Instance) cycleError(indeg []int) error {
	start := 0
	for indeg[start] == 0 {
		start++
	}
	at := map[int]int{}
	var path []int
	v := start
	for {
		if k, ok := at[v]; ok {
			path = path[k:]
			break
		}
		at[v] = len(path)
		path = append(path, v)
		for _, p := range inst.Tasks[v].Parents {
			if indeg[p] > 0 {
				v = p
				break
			}
		}
	}
	// path follows parents; print it in dependency direction, starting at
	// the task that comes first in the file.
	slices.Reverse(path)
	k := slices.Index(path, slices.Min(path))
	path = append(path[k:], path[:k]...)
	names := make([]string, 0, len(path)+1)
	for _, i := range path {
		names = append(names, inst.Tasks[i].ID)
	}
	names = append(names, inst.Tasks[path[0]].ID)
	return fmt.Errorf("dependency cycle: %s", strings.Join(names, " -> "))
}

// dag is the dependency graph indexed by topological position: position p
// is task task[p], and every dependency goes from a lower to a higher
// position. The edges kept are the transitive reduction (Hasse diagram);
// desc and anc are the transitive closure.
type dag struct {
	n          int
	task       []int           // position -> task index
	rt         []time.Duration // position -> runtime
	succ, pred [][]int         // Hasse diagram, ascending positions
	desc, anc  bitRows         // strict descendants / ancestors
	edges      int             // declared dependencies
	transitive int             // declared dependencies implied by others
}

func newDAG(inst *Instance, order []int) *dag {
	n := len(order)
	g := &dag{
		n:    n,
		task: order,
		rt:   make([]time.Duration, n),
		succ: make([][]int, n),
		pred: make([][]int, n),
		desc: newBitRows(n),
		anc:  newBitRows(n),
	}
	pos := make([]int, n)
	for p, t := range order {
		pos[t] = p
		g.rt[p] = inst.Tasks[t].Runtime
	}
	children := make([][]int, n)
	for t, task := range inst.Tasks {
		for _, par := range task.Parents {
			children[pos[par]] = append(children[pos[par]], pos[t])
		}
		g.edges += len(task.Parents)
	}
	// Transitive reduction, from the sinks up: a child already reachable
	// through an earlier (lower-position) child is redundant, and any child
	// that reaches c has a lower position than c.
	for p := n - 1; p >= 0; p-- {
		cs := children[p]
		slices.Sort(cs)
		acc := g.desc.row(p)
		for _, c := range cs {
			if has(acc, c) {
				g.transitive++
				continue
			}
			g.succ[p] = append(g.succ[p], c)
			g.pred[c] = append(g.pred[c], p)
			set(acc, c)
			or(acc, g.desc.row(c))
		}
	}
	for p := range n {
		slices.Sort(g.pred[p])
		a := g.anc.row(p)
		for _, q := range g.pred[p] {
			set(a, q)
			or(a, g.anc.row(q))
		}
	}
	return g
}

// criticalPath is the longest runtime-weighted path of the whole graph.
func (g *dag) criticalPath() time.Duration {
	ef := make([]time.Duration, g.n)
	var cp time.Duration
	for p := range g.n {
		var start time.Duration
		for _, q := range g.pred[p] {
			start = max(start, ef[q])
		}
		ef[p] = start + g.rt[p]
		cp = max(cp, ef[p])
	}
	return cp
}
