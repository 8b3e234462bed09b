package grammar

import (
	"strings"
	"testing"
)

func TestBuildGraph(t *testing.T) {
	w, err := Parse("t", []byte(`A CHOICE(IF(A.n > 1 && A.s == "x") B, ELSE C) ENDCHOICE FAILOVER(D, E) ENDFAILOVER`))
	if err != nil {
		t.Fatal(err)
	}
	g := BuildGraph(w)
	var edges []string
	label := map[string]string{}
	for _, n := range g.Nodes {
		label[n.ID] = n.Label
	}
	for _, e := range g.Edges {
		edges = append(edges, label[e.From]+">"+label[e.To]+"/"+e.Label)
	}
	want := `start>A/ A>CHOICE/ CHOICE>B/A.n > 1 && A.s == "x" CHOICE>C/ELSE B>ENDCHOICE/ C>ENDCHOICE/ ` +
		`ENDCHOICE>FAILOVER/ FAILOVER>D/1 FAILOVER>E/2 D>ENDFAILOVER/ E>ENDFAILOVER/ ENDFAILOVER>end/`
	if got := strings.Join(edges, " "); got != want {
		t.Errorf("edges\n got %s\nwant %s", got, want)
	}
	dot := g.DOT(`my "wf"`)
	for _, s := range []string{`digraph "my \"wf\"" {`, `[label="A.n > 1 && A.s == \"x\""]`, `label="FAILOVER", shape=diamond`} {
		if !strings.Contains(dot, s) {
			t.Errorf("DOT lacks %s:\n%s", s, dot)
		}
	}
	mm := g.Mermaid()
	for _, s := range []string{"flowchart LR", `-->|"A.n > 1 && A.s == #quot;x#quot;"|`, `{"FAILOVER"}`, `-->|"ELSE"|`} {
		if !strings.Contains(mm, s) {
			t.Errorf("Mermaid lacks %s:\n%s", s, mm)
		}
	}
}
