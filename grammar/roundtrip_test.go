package grammar

import (
	"testing"
)

// TestRoundTripProperty: for random valid trees, parse(print(t)) is Equal to
// t and printing is stable, for both String and Format.
func TestRoundTripProperty(t *testing.T) {
	printers := []struct {
		name  string
		print func(*Workflow) string
	}{
		{"String", (*Workflow).String},
		{"Format", Format},
	}
	for seed := range uint64(200) {
		g := newGen(seed, 1+int(seed%4))
		w := g.workflow(0, 6)
		if err := Check(w, DefaultLimits()); err != nil {
			t.Fatalf("seed %d: generator made an invalid tree %s: %v", seed, w, err)
		}
		for _, p := range printers {
			text := p.print(w)
			back, err := Parse("gen", []byte(text))
			if err != nil {
				t.Fatalf("seed %d %s: reparse failed: %v\n%s", seed, p.name, err, text)
			}
			if !back.Equal(w) {
				t.Fatalf("seed %d %s: reparsed tree differs\n got %s\nwant %s", seed, p.name, back, w)
			}
			if again := p.print(back); again != text {
				t.Fatalf("seed %d %s: print not stable\nfirst\n%s\nsecond\n%s", seed, p.name, text, again)
			}
		}
	}
}

func TestEqual(t *testing.T) {
	base := func() *Workflow {
		w, err := Parse("t", []byte(`A[timeout=1s] CHOICE(IF(A) B, ELSE C) ENDCHOICE FORK(D, E) SYNC`))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	mutations := []struct {
		name string
		mut  func(w *Workflow)
	}{
		{"name", func(w *Workflow) { w.Steps[0].(*Service).Name = "Z" }},
		{"attr", func(w *Workflow) { w.Steps[0].(*Service).Attrs[0].Value = "2s" }},
		{"path", func(w *Workflow) { w.Steps[0].(*Service).Path = "0" }},
		{"guard", func(w *Workflow) { w.Steps[1].(*Choice).Arms[0].Guard = "!A" }},
		{"kind", func(w *Workflow) { w.Steps[1].(*Choice).Arms[1].Kind = ArmPlain }},
		{"branch", func(w *Workflow) { w.Steps[2].(*Fork).Branches = w.Steps[2].(*Fork).Branches[:1] }},
		{"pattern kind", func(w *Workflow) { w.Steps[2] = &First{Branches: w.Steps[2].(*Fork).Branches} }},
		{"steps", func(w *Workflow) { w.Steps = w.Steps[:2] }},
	}
	if !base().Equal(base()) {
		t.Fatal("a tree is not Equal to an identical one")
	}
	moved := base()
	moved.Steps[0].(*Service).Pos = Pos{Offset: 99, Line: 9, Col: 9}
	if !moved.Equal(base()) {
		t.Error("Equal compares positions")
	}
	if c := base().Copy(); !c.Equal(base()) {
		t.Error("Copy is not Equal")
	}
	for _, m := range mutations {
		w := base()
		m.mut(w)
		if w.Equal(base()) || base().Equal(w) {
			t.Errorf("Equal ignores a change of %s", m.name)
		}
	}
	var nilW *Workflow
	if !nilW.Equal(nil) || nilW.Equal(base()) {
		t.Error("nil handling")
	}
}
