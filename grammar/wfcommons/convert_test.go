package wfcommons

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

var attrsRE = regexp.MustCompile(`\[[^]]*\]`)

// shape prints a workflow without its attributes.
func shape(w *grammar.Workflow) string { return attrsRE.ReplaceAllString(w.String(), "") }

// parseBack parses the printed workflow and checks it is the same tree.
func parseBack(t *testing.T, w *grammar.Workflow) {
	t.Helper()
	got, err := grammar.Parse("converted", []byte(grammar.Format(w)))
	if err != nil {
		t.Fatalf("converted workflow does not parse: %v\n%s", err, grammar.Format(w))
	}
	if !got.Equal(w) {
		t.Fatalf("parsed workflow differs:\n got %s\nwant %s", got, w)
	}
}

func TestConvertSmallDAGs(t *testing.T) {
	tests := []struct {
		name       string
		spec       string
		rt         map[string]float64
		want       string
		exact      bool
		added      int // AddedEdges
		transitive int
	}{
		{name: "single", spec: "a", want: "a", exact: true},
		{name: "chain", spec: "a>b b>c", want: "a b c", exact: true},
		{name: "diamond", spec: "a>b a>c b>d c>d", want: "a FORK(b, c) SYNC d", exact: true},
		{
			name:  "nested diamonds",
			spec:  "a>b a>c b>d b>e d>f e>f f>g c>g",
			want:  "a FORK(b FORK(d, e) SYNC f, c) SYNC g",
			exact: true,
		},
		{name: "transitive edge dropped", spec: "a>b b>c a>c", want: "a b c", exact: true, transitive: 1},
		{name: "disconnected", spec: "a>b c", want: "FORK(a b, c) SYNC", exact: true},
		{name: "complete bipartite", spec: "a>c a>d b>c b>d", want: "FORK(a, b) SYNC FORK(c, d) SYNC", exact: true},
		{name: "fork join fork", spec: "s>a s>b a>j b>j j>c j>d", want: "s FORK(a, b) SYNC j FORK(c, d) SYNC", exact: true},
		{name: "N", spec: "a>c a>d b>d", want: "FORK(a, b) SYNC FORK(c, d) SYNC", added: 1},
		{name: "W", spec: "a>d b>d b>e c>e", want: "FORK(a, b, c) SYNC FORK(d, e) SYNC", added: 2},
		{
			// b is long: the N's cut {a,b}|{c,d} keeps the critical path at
			// b+d; any cut putting b after a would lengthen it.
			name: "N with a long task", spec: "a>c a>d b>d", rt: map[string]float64{"b": 10},
			want: "FORK(a, b) SYNC FORK(c, d) SYNC", added: 1,
		},
		{
			// An N inside a diamond: only the inner piece gets an edge.
			name:  "N inside a chain",
			spec:  "s>a s>b a>c a>d b>d c>t d>t",
			want:  "s FORK(a, b) SYNC FORK(c, d) SYNC t",
			added: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := dagOf(t, tt.spec, tt.rt)
			res, err := Convert(inst, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := shape(res.Workflow); got != tt.want {
				t.Errorf("workflow = %s, want %s", got, tt.want)
			}
			if res.SeriesParallel != tt.exact {
				t.Errorf("SeriesParallel = %v, want %v", res.SeriesParallel, tt.exact)
			}
			if res.AddedEdges != tt.added {
				t.Errorf("AddedEdges = %d, want %d", res.AddedEdges, tt.added)
			}
			if res.TransitiveEdges != tt.transitive {
				t.Errorf("TransitiveEdges = %d, want %d", res.TransitiveEdges, tt.transitive)
			}
			if res.Tasks != len(inst.Tasks) || res.Edges != inst.Edges() {
				t.Errorf("Tasks, Edges = %d, %d, want %d, %d", res.Tasks, res.Edges, len(inst.Tasks), inst.Edges())
			}
			checkRelation(t, inst, res)
			parseBack(t, res.Workflow)
		})
	}
}

func TestConvertNMetrics(t *testing.T) {
	// a→c, a→d, b→d: the only SP completions add b→c (1 pair), a→b or c→d
	// with more path; with unit runtimes the critical path stays 2s.
	res, err := Convert(dagOf(t, "a>c a>d b>d", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.AddedEdges != 1 || res.AddedPairs != 1 || res.ForcedCuts != 1 {
		t.Errorf("added edges, pairs, cuts = %d, %d, %d, want 1, 1, 1", res.AddedEdges, res.AddedPairs, res.ForcedCuts)
	}
	if res.CriticalPath != 2*time.Second || res.ConvertedCriticalPath != 2*time.Second {
		t.Errorf("critical path %v -> %v, want 2s -> 2s", res.CriticalPath, res.ConvertedCriticalPath)
	}
	if res.Growth() != 0 {
		t.Errorf("Growth = %v, want 0", res.Growth())
	}
}

func TestConvertCriticalPathGrowth(t *testing.T) {
	// The N a→c, a→d, b→d with b and c long (10s, a and d 1s): the level
	// cut {a,b}|{c,d} would make b then c a 20s path; a→b or c→d cost 12s,
	// the optimum, against 11s originally.
	inst := dagOf(t, "a>c a>d b>d", map[string]float64{"b": 10, "c": 10})
	res, err := Convert(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkRelation(t, inst, res)
	if res.CriticalPath != 11*time.Second {
		t.Fatalf("CriticalPath = %v, want 11s", res.CriticalPath)
	}
	if res.ConvertedCriticalPath != 12*time.Second {
		t.Errorf("ConvertedCriticalPath = %v, want the optimum 12s (workflow %s)", res.ConvertedCriticalPath, shape(res.Workflow))
	}
	if g := res.Growth(); g < 0.09 || g > 0.091 {
		t.Errorf("Growth = %v, want 1/11", g)
	}
}

func TestConvertExpectAttribute(t *testing.T) {
	inst := dagOf(t, "a>b b>c", map[string]float64{"a": 3.6027, "b": 0, "c": 120})
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"unscaled", Options{}, "a[expect=3.603s] b[expect=1ms] c[expect=2m0s]"},
		{"scaled", Options{Scale: 0.01}, "a[expect=36ms] b[expect=1ms] c[expect=1.2s]"},
		{"min sleep", Options{Scale: 0.01, MinSleep: 50 * time.Millisecond}, "a[expect=50ms] b[expect=50ms] c[expect=1.2s]"},
		{"prefix", Options{ServicePrefix: "wf."}, "wf.a[expect=3.603s] wf.b[expect=1ms] wf.c[expect=2m0s]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Convert(inst, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Workflow.String(); got != tt.want {
				t.Errorf("workflow = %s, want %s", got, tt.want)
			}
			// Critical paths are unscaled.
			if want := 123602700 * time.Microsecond; res.CriticalPath != want {
				t.Errorf("CriticalPath = %v, want %v", res.CriticalPath, want)
			}
			parseBack(t, res.Workflow)
		})
	}
}

func TestConvertOptionErrors(t *testing.T) {
	inst := dagOf(t, "a>b", nil)
	for _, opts := range []Options{
		{Scale: -1},
		{MinSleep: -time.Second},
		{ServicePrefix: "bad prefix"},
	} {
		if _, err := Convert(inst, opts); err == nil {
			t.Errorf("Convert(%+v) succeeded, want an error", opts)
		}
	}
	if _, err := Convert(nil, Options{}); err == nil {
		t.Error("Convert(nil) succeeded")
	}
	cyclic := dagOf(t, "a>b b>a", nil)
	if _, err := Convert(cyclic, Options{}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("Convert(cycle) = %v, want a cycle error", err)
	}
}

func TestServiceNames(t *testing.T) {
	inst := &Instance{Tasks: []Task{
		{ID: "1", Name: "mProject_ID0000001"},
		{ID: "2", Name: "FORK"},
		{ID: "3", Name: "a b/c"},
		{ID: "4", Name: "é"},
		{ID: "id5", Name: ""},
		{ID: "6", Name: "x"},
		{ID: "7", Name: "x"},
		{ID: "8", Name: "x_2"},
		{ID: "9", Name: strings.Repeat("n", 200)},
		{ID: "10", Name: strings.Repeat("n", 200)},
	}}
	got := serviceNames(inst, "", 128)
	want := []string{
		"mProject_ID0000001", "FORK_", "a_b_c", "__", "id5", "x", "x_2", "x_2_2",
		strings.Repeat("n", 128), strings.Repeat("n", 126) + "_2",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("name %d = %q, want %q", i, got[i], want[i])
		}
	}
	res, err := Convert(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	parseBack(t, res.Workflow)
}

func TestConvertWideForkNests(t *testing.T) {
	var spec strings.Builder
	for i := range 600 {
		fmt.Fprintf(&spec, "s>t%d ", i)
	}
	inst := dagOf(t, spec.String(), nil)
	res, err := Convert(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fork, ok := res.Workflow.Steps[1].(*grammar.Fork)
	if !ok || len(fork.Branches) > grammar.DefaultLimits().MaxArms {
		t.Fatalf("second step is %T with more than MaxArms branches", res.Workflow.Steps[1])
	}
	checkRelation(t, inst, res)
	parseBack(t, res.Workflow)

	res, err = Convert(inst, Options{Limits: grammar.Limits{MaxArms: 4}})
	if err != nil {
		t.Fatal(err)
	}
	checkRelation(t, inst, res)
}

// TestConvertRandomSP checks that random series-parallel DAGs (with random
// transitive edges) convert exactly: same relation, same critical path.
func TestConvertRandomSP(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 150 {
		inst := randomSP(r, 1+r.IntN(60))
		res, err := Convert(inst, Options{})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !res.SeriesParallel || res.AddedEdges != 0 || res.ForcedCuts != 0 {
			t.Fatalf("case %d: SP DAG not exact: %+v\n%s", i, res, res.Workflow)
		}
		checkRelation(t, inst, res)
	}
}

// TestConvertRandomDAG checks that arbitrary DAGs keep every dependency and
// that the reported metrics match the relation.
func TestConvertRandomDAG(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 150 {
		inst := randomDAG(r, 2+r.IntN(80))
		res, err := Convert(inst, Options{})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		checkRelation(t, inst, res)
		if i < 20 {
			parseBack(t, res.Workflow)
		}
	}
}

// TestConvertMontageLike converts a synthetic Montage of three bands: not
// series-parallel, it must keep every dependency and stay parseable.
func TestConvertMontageLike(t *testing.T) {
	inst := montageLike(rand.New(rand.NewPCG(5, 6)), 3, 15)
	res, err := Convert(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SeriesParallel {
		t.Fatal("montage-like instance reported series-parallel")
	}
	checkRelation(t, inst, res)
	parseBack(t, res.Workflow)
	t.Logf("%d tasks: %s", res.Tasks, res.Summary())
}
