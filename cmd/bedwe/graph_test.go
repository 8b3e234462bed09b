package main

import (
	"strings"
	"testing"
)

func TestGraphGolden(t *testing.T) {
	for _, tt := range []struct{ format, golden string }{
		{"dot", "graph_fig2-guarded.dot.golden"},
		{"mermaid", "graph_fig2-guarded.mmd.golden"},
	} {
		out, errOut, code := runLangCLI(t, "", "graph", "--format", tt.format, exampleGuarded)
		if code != 0 || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", tt.format, code, errOut)
		}
		langGolden(t, tt.golden, out)
	}
	dflt, _, _ := runLangCLI(t, "", "graph", exampleGuarded)
	if !strings.HasPrefix(dflt, "digraph ") {
		t.Errorf("default format is not dot: %q", dflt)
	}
}

func TestGraphMistakes(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"graph", "--format", "png", exampleGuarded}, "", `bedwe: unknown --format "png": use dot or mermaid`},
		{[]string{"graph"}, "", "bedwe: graph needs exactly one workflow FILE"},
		{[]string{"graph", "-"}, "FORK(A) SYNC", "<stdin>:1:1: FORK needs at least 2 branches, found 1\n"},
	}
	for _, tt := range tests {
		_, errOut, code := runLangCLI(t, tt.stdin, tt.args...)
		if code != 1 || !strings.HasPrefix(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q, want prefix %q", tt.args, code, errOut, tt.want)
		}
	}
}
