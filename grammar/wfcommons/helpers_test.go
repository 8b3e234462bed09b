package wfcommons

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

// dag builds an instance from "a>b b>c d" (edges and lone tasks, tasks in
// order of first mention), every runtime 1s unless rt names it (seconds).
func dagOf(t testing.TB, spec string, rt map[string]float64) *Instance {
	t.Helper()
	inst := &Instance{Name: "test", SchemaVersion: "1.5"}
	idx := map[string]int{}
	task := func(name string) int {
		if i, ok := idx[name]; ok {
			return i
		}
		idx[name] = len(inst.Tasks)
		d := time.Second
		if s, ok := rt[name]; ok {
			d = time.Duration(s * float64(time.Second))
		}
		inst.Tasks = append(inst.Tasks, Task{ID: name, Name: name, Runtime: d})
		return idx[name]
	}
	for _, f := range strings.Fields(spec) {
		from, to, ok := strings.Cut(f, ">")
		a := task(from)
		if !ok {
			continue
		}
		b := task(to)
		inst.Tasks[b].Parents = append(inst.Tasks[b].Parents, a)
	}
	for i := range inst.Tasks {
		slices.Sort(inst.Tasks[i].Parents)
		inst.Tasks[i].Parents = slices.Compact(inst.Tasks[i].Parents)
	}
	return inst
}

// pair is an ordered pair of names: First must finish before Second starts.
type pair [2]string

// instanceOrder is the original dependency relation, by plain DFS over the
// declared parents (independent of the bit matrices under test), keyed by
// service name.
func instanceOrder(inst *Instance, names []string) map[pair]bool {
	children := make([][]int, len(inst.Tasks))
	for i, t := range inst.Tasks {
		for _, p := range t.Parents {
			children[p] = append(children[p], i)
		}
	}
	out := map[pair]bool{}
	for s := range inst.Tasks {
		seen := map[int]bool{}
		stack := slices.Clone(children[s])
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[v] {
				continue
			}
			seen[v] = true
			out[pair{names[s], names[v]}] = true
			stack = append(stack, children[v]...)
		}
	}
	return out
}

// workflowOrder is the dependency relation a workflow imposes, from its
// tree: within a sequence, every service of a step precedes every service
// of every later step.
func workflowOrder(t testing.TB, w *grammar.Workflow) (map[pair]bool, []string) {
	t.Helper()
	out := map[pair]bool{}
	var all []string
	var services func(s grammar.Step) []string
	var walk func(w *grammar.Workflow)
	services = func(s grammar.Step) []string {
		switch s := s.(type) {
		case *grammar.Service:
			return []string{s.Name}
		case *grammar.Fork:
			var names []string
			for _, b := range s.Branches {
				for _, st := range b.Steps {
					names = append(names, services(st)...)
				}
			}
			return names
		}
		t.Fatalf("unexpected step %T in converted workflow", s)
		return nil
	}
	walk = func(w *grammar.Workflow) {
		for i, s := range w.Steps {
			here := services(s)
			for _, later := range w.Steps[i+1:] {
				for _, a := range here {
					for _, b := range services(later) {
						out[pair{a, b}] = true
					}
				}
			}
			switch s := s.(type) {
			case *grammar.Service:
				all = append(all, s.Name)
			case *grammar.Fork:
				if len(s.Branches) < 2 {
					t.Errorf("FORK with %d branches: %s", len(s.Branches), s)
				}
				for _, b := range s.Branches {
					if len(b.Steps) == 0 {
						t.Errorf("empty FORK branch in %s", s)
					}
					walk(b)
				}
			}
		}
	}
	walk(w)
	return out, all
}

// checkRelation asserts that the converted workflow keeps every original
// dependency, runs every task exactly once, and — when exact — adds none.
func checkRelation(t testing.TB, inst *Instance, res *Result) {
	t.Helper()
	names := make([]string, len(res.Services))
	for i, s := range res.Services {
		names[i] = s.Name
	}
	orig := instanceOrder(inst, names)
	conv, all := workflowOrder(t, res.Workflow)
	if len(all) != len(inst.Tasks) {
		t.Fatalf("workflow has %d services, instance %d tasks", len(all), len(inst.Tasks))
	}
	seen := map[string]bool{}
	for _, n := range all {
		if seen[n] {
			t.Fatalf("service %s appears twice", n)
		}
		seen[n] = true
	}
	for p := range orig {
		if !conv[p] {
			t.Fatalf("dependency %s -> %s lost", p[0], p[1])
		}
	}
	added := len(conv) - len(orig)
	if added != res.AddedPairs {
		t.Errorf("AddedPairs = %d, relation grew by %d pairs", res.AddedPairs, added)
	}
	if res.SeriesParallel != (added == 0) {
		t.Errorf("SeriesParallel = %v with %d added pairs", res.SeriesParallel, added)
	}
	if (res.AddedEdges == 0) != (added == 0) {
		t.Errorf("AddedEdges = %d with %d added pairs", res.AddedEdges, added)
	}
	if res.ConvertedCriticalPath < res.CriticalPath {
		t.Errorf("converted critical path %v shorter than original %v", res.ConvertedCriticalPath, res.CriticalPath)
	}
	if res.SeriesParallel && res.ConvertedCriticalPath != res.CriticalPath {
		t.Errorf("exact conversion changed the critical path: %v -> %v", res.CriticalPath, res.ConvertedCriticalPath)
	}
}

// randomSP builds a random series-parallel instance of about n tasks from a
// random decomposition tree, with random transitive edges thrown in.
func randomSP(r *rand.Rand, n int) *Instance {
	inst := &Instance{}
	var build func(n int) (first, last []int)
	build = func(n int) (first, last []int) {
		if n <= 1 {
			i := len(inst.Tasks)
			inst.Tasks = append(inst.Tasks, Task{ID: fmt.Sprint("t", i), Name: fmt.Sprint("t", i), Runtime: time.Duration(1+r.IntN(1000)) * time.Millisecond})
			return []int{i}, []int{i}
		}
		k := 1 + r.IntN(n-1)
		f1, l1 := build(k)
		f2, l2 := build(n - k)
		if r.IntN(2) == 0 { // parallel
			return append(f1, f2...), append(l1, l2...)
		}
		for _, a := range l1 { // series
			for _, b := range f2 {
				inst.Tasks[b].Parents = append(inst.Tasks[b].Parents, a)
			}
		}
		return f1, l2
	}
	build(n)
	addTransitive(r, inst, n/3)
	return inst
}

// randomDAG builds a random DAG: each task depends on a few earlier ones.
func randomDAG(r *rand.Rand, n int) *Instance {
	inst := &Instance{}
	for i := range n {
		t := Task{ID: fmt.Sprint("t", i), Name: fmt.Sprint("t", i), Runtime: time.Duration(1+r.IntN(1000)) * time.Millisecond}
		for range r.IntN(3) {
			if i > 0 {
				t.Parents = append(t.Parents, r.IntN(i))
			}
		}
		inst.Tasks = append(inst.Tasks, t)
	}
	normalise(inst)
	return inst
}

// addTransitive adds up to k edges already implied by the order.
func addTransitive(r *rand.Rand, inst *Instance, k int) {
	normalise(inst)
	for range k {
		c := r.IntN(len(inst.Tasks))
		ps := inst.Tasks[c].Parents
		if len(ps) == 0 {
			continue
		}
		p := ps[r.IntN(len(ps))]
		if gps := inst.Tasks[p].Parents; len(gps) > 0 {
			inst.Tasks[c].Parents = append(inst.Tasks[c].Parents, gps[r.IntN(len(gps))])
		}
	}
	normalise(inst)
}

func normalise(inst *Instance) {
	for i := range inst.Tasks {
		slices.Sort(inst.Tasks[i].Parents)
		inst.Tasks[i].Parents = slices.Compact(inst.Tasks[i].Parents)
	}
}
