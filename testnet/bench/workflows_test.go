package bench

import (
	"testing"

	"github.com/bedwe/bedwe/grammar"
)

// pathLen counts the services on the longest path of w, independently of
// Nested's own bookkeeping.
func pathLen(w *grammar.Workflow) int {
	n := 0
	for _, s := range w.Steps {
		switch s := s.(type) {
		case *grammar.Service:
			n++
		case *grammar.Fork:
			best := 0
			for _, b := range s.Branches {
				best = max(best, pathLen(b))
			}
			n += best
		}
	}
	return n
}

func parse(t *testing.T, src string) *grammar.Workflow {
	t.Helper()
	w, err := grammar.Parse("gen", []byte(src))
	if err != nil {
		t.Fatalf("generated workflow does not parse: %v\n%s", err, src)
	}
	if err := grammar.Check(w, grammar.Limits{}); err != nil {
		t.Fatalf("generated workflow fails the static checks: %v\n%s", err, src)
	}
	return w
}

func TestSequential(t *testing.T) {
	for _, n := range []int{1, 5, 200} {
		w := parse(t, Sequential("e", n))
		services, depth, widest := grammar.Stats(w)
		if services != n || depth != 0 || widest != 0 {
			t.Errorf("Sequential(%d): %d services, depth %d, widest %d; want %d, 0, 0", n, services, depth, widest, n)
		}
	}
}

func TestParallel(t *testing.T) {
	for _, tc := range []struct{ branches, length int }{{2, 10}, {20, 10}, {3, 1}} {
		w := parse(t, Parallel("sleep", tc.branches, tc.length))
		services, depth, widest := grammar.Stats(w)
		if services != tc.branches*tc.length || depth != 1 || widest != tc.branches {
			t.Errorf("Parallel(%d, %d): %d services, depth %d, widest %d", tc.branches, tc.length, services, depth, widest)
		}
		if got := pathLen(w); got != tc.length {
			t.Errorf("Parallel(%d, %d): critical path %d services, want %d", tc.branches, tc.length, got, tc.length)
		}
		if len(w.Steps) != 1 {
			t.Errorf("Parallel(%d, %d): %d top-level steps, want one FORK", tc.branches, tc.length, len(w.Steps))
		}
	}
}

func TestNested(t *testing.T) {
	for _, tc := range []struct {
		total, depth                     int
		leaves, perLeaf, isolated, cpath int
	}{
		{100, 0, 1, 100, 0, 100},
		{100, 1, 2, 50, 0, 50},
		{100, 2, 4, 25, 0, 25}, // the paper's example: 25 services per branch
		{100, 3, 8, 12, 4, 15}, // isolated in front of FORKs 0, 1, 2, 3 (BFS): path 0→1→3
		{100, 4, 16, 6, 4, 9},
		{100, 5, 32, 3, 4, 6},
		{8, 2, 4, 2, 0, 2},
	} {
		src, sh, err := Nested("e", tc.total, tc.depth)
		if err != nil {
			t.Fatalf("Nested(%d, %d): %v", tc.total, tc.depth, err)
		}
		w := parse(t, src)
		services, depth, widest := grammar.Stats(w)
		if services != tc.total {
			t.Errorf("Nested(%d, %d): %d services, want %d", tc.total, tc.depth, services, tc.total)
		}
		if depth != tc.depth {
			t.Errorf("Nested(%d, %d): nesting depth %d", tc.total, tc.depth, depth)
		}
		if tc.depth > 0 && widest != 2 {
			t.Errorf("Nested(%d, %d): widest pattern %d, want two-way FORKs", tc.total, tc.depth, widest)
		}
		want := NestedShape{Depth: tc.depth, Leaves: tc.leaves, PerLeaf: tc.perLeaf, Isolated: tc.isolated, CriticalPath: tc.cpath}
		if sh != want {
			t.Errorf("Nested(%d, %d) shape %+v, want %+v", tc.total, tc.depth, sh, want)
		}
		if got := pathLen(w); got != sh.CriticalPath {
			t.Errorf("Nested(%d, %d): tree's critical path %d, shape says %d", tc.total, tc.depth, got, sh.CriticalPath)
		}
	}
}

func TestNestedErrors(t *testing.T) {
	for _, tc := range []struct{ total, depth int }{{3, 2}, {100, -1}, {100, 17}} {
		if _, _, err := Nested("e", tc.total, tc.depth); err == nil {
			t.Errorf("Nested(%d, %d): want an error", tc.total, tc.depth)
		}
	}
}

func TestReadsNothing(t *testing.T) {
	got, err := ReadsNothing(Parallel("e", 2, 2) + " z[reads=(e1_1), out=q]")
	if err != nil {
		t.Fatal(err)
	}
	want := "FORK(e1_1[reads=()] e1_2[reads=()], e2_1[reads=()] e2_2[reads=()]) SYNC z[reads=(e1_1), out=q]"
	if got != want {
		t.Errorf("ReadsNothing = %q, want %q", got, want)
	}
	if _, err := ReadsNothing("FORK(a) SYNC"); err == nil {
		t.Error("ReadsNothing accepted a workflow that does not parse")
	}
}
