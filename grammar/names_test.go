package grammar

import (
	"slices"
	"sort"
	"testing"
)

func TestNames(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want []string
		all  bool
	}{
		{"A", nil, true},
		{"A[reads=()] B[reads=(A)]", []string{"A"}, false},
		{"A[reads=()] B", nil, true},
		{"A[reads=()] FORK(B[reads=(A)], C[reads=()]) SYNC D[reads=(B, C)]", []string{"A", "B", "C"}, false},
		{"A[reads=()] FORK(B[reads=(A)], C) SYNC", nil, true},
		{"A[reads=()] FIRST(B[reads=(A)], C[reads=()]) ENDFIRST FAILOVER(D[reads=()], E[reads=(B)]) ENDFAILOVER", []string{"A", "B"}, false},
		{`A[reads=()] A2[out=tile-index, reads=()] A3[out=z, reads=()] CHOICE(IF(A.ok && out["tile-index"].n > 1 && out.z == 2) B[reads=()], ELSE C[reads=(A)]) ENDCHOICE`, []string{"A", "tile-index", "z"}, false},
		{`A[reads=()] CHOICE(IF(input.n > 1) B[reads=()], ELSE C[reads=()]) ENDCHOICE`, []string{}, false},
		{`A[reads=()] CHOICE(IF(out[input.k] != nil) B[reads=()], ELSE C[reads=()]) ENDCHOICE`, nil, true},
		{`A[reads=()] CHOICE(IF(len(out) > 2) B[reads=()], ELSE C[reads=()]) ENDCHOICE`, nil, true},
		{`A[reads=()] CHOICE(B[reads=()], C) ENDCHOICE`, nil, true},
	} {
		w, err := Parse("wf", []byte(tt.src))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.src, err)
		}
		// What the steps after the first can name: the residual a node
		// hands on after running A.
		rest := &Workflow{Steps: w.Steps[1:]}
		if len(rest.Steps) == 0 {
			rest = w
		}
		names, all := Names(rest)
		if all != tt.all {
			t.Errorf("Names(%q) all = %v, want %v", rest, all, tt.all)
			continue
		}
		if all {
			continue
		}
		var got []string
		for l := range names {
			got = append(got, l)
		}
		sort.Strings(got)
		if !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
			t.Errorf("Names(%q) = %v, want %v", rest, got, tt.want)
		}
	}
}
