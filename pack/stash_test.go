package pack

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/bedwe/bedwe/grammar"
)

func labelsOf(s []StashedOutput) []string {
	var out []string
	for _, o := range s {
		out = append(out, o.Label)
	}
	return out
}

// stashPack is what the holder of S3 hands on in "S1 S2[out=b] S3 REST":
// S1, b and S3 ran once each.
func stashPack(rest ...grammar.Step) *Pack {
	return &Pack{
		WorkflowID: "wf-1",
		Origin:     []Peer{peerA, peerB},
		Sender:     peerC,
		Workflow:   seq(rest...),
		Outputs: map[string]json.RawMessage{
			"S1": json.RawMessage(`{"n":1}`), "b": json.RawMessage(`{"n":2}`), "S3": json.RawMessage(`{"n":3}`),
		},
		Trace: []TraceEntry{
			{Path: "0", Service: "S1", Outcome: OutcomeOK, Start: t0, End: t0},
			{Path: "1", Service: "S2", Label: "b", Outcome: OutcomeFailed, Start: t0, End: t0},
			{Path: "1", Service: "S2", Label: "b", Outcome: OutcomeOK, Start: t0, End: t0},
			{Path: "2", Service: "S3", Outcome: OutcomeOK, Start: t0, End: t0},
		},
	}
}

func TestDroppable(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    *Pack
		want []string
	}{
		{"every step ahead reads what it names", stashPack(svc("S4", "3", "reads", "(b)"), svc("S5", "4", "reads", "()")), []string{"S1", "S3"}},
		{"a step ahead reads everything", stashPack(svc("S4", "3", "reads", "()"), svc("S5", "4")), nil},
		{"a guard ahead names S1", stashPack(svc("S4", "3", "reads", "()"),
			choice(ifArm("S1.n > 0", seq(svc("S5", "4/c0/0", "reads", "()"))), elseArm(seq(svc("S6", "4/c1/0", "reads", "()"))))), []string{"S3", "b"}},
		{"a branch delivers to a join", func() *Pack {
			p := stashPack(svc("S4", "3", "reads", "()"))
			p.Frames = []Frame{{JoinID: "j", Kind: FrameFork, Holders: []Peer{peerA}}}
			return p
		}(), nil},
		{"no attempt succeeded under S1", func() *Pack {
			p := stashPack(svc("S4", "3", "reads", "()"))
			p.Trace = p.Trace[1:]
			return p
		}(), []string{"S3", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := labelsOf(tt.p.Droppable(0))
			if !slices.Equal(got, tt.want) {
				t.Errorf("Droppable = %v, want %v", got, tt.want)
			}
		})
	}
}

// Dropped outputs leave the pack, their attempts are marked, the pack
// survives the codec, and Unstash puts every output back from the stash.
func TestStashRoundTrip(t *testing.T) {
	p := stashPack(svc("S4", "3", "reads", "(b)"))
	want := p.Clone().Outputs
	drop := p.Droppable(0)
	if !slices.Equal(labelsOf(drop), []string{"S1", "S3"}) {
		t.Fatalf("Droppable = %v", labelsOf(drop))
	}
	trimmed := p.WithoutStashed(drop)
	if len(p.Outputs) != 3 || p.Trace[0].Stash != "" {
		t.Fatal("WithoutStashed changed its receiver")
	}
	if _, ok := trimmed.Outputs["b"]; !ok || len(trimmed.Outputs) != 1 {
		t.Fatalf("trimmed outputs = %v, want only b", trimmed.Outputs)
	}
	if trimmed.Trace[0].Stash != Digest(want["S1"]) || trimmed.Trace[3].Stash != Digest(want["S3"]) || trimmed.Trace[2].Stash != "" || trimmed.Trace[1].Stash != "" {
		t.Fatalf("marks = %+v", trimmed.Trace)
	}
	b, err := Encode(trimmed)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Trace[0].Stash != trimmed.Trace[0].Stash || back.Trace[2].Label != "b" {
		t.Fatalf("codec lost the marks or labels: %+v", back.Trace)
	}
	store := map[string]json.RawMessage{}
	for _, s := range drop {
		store[s.Label+"@"+s.Digest] = s.Value
	}
	lookup := func(l, d string) (json.RawMessage, bool) { v, ok := store[l+"@"+d]; return v, ok }
	got, missing := Unstash(back.Outputs, back.Trace, lookup)
	if len(missing) > 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("Unstash = %s, missing %v; want %s", got, missing, want)
	}
	// Another chain's output under the same label (another digest) is
	// never taken for this chain's.
	delete(store, "S1@"+Digest(want["S1"]))
	store["S1@"+Digest(json.RawMessage(`{"n":99}`))] = json.RawMessage(`{"n":99}`)
	got, missing = Unstash(back.Outputs, back.Trace, lookup)
	if !slices.Equal(missing, []string{"S1"}) || got["S1"] != nil {
		t.Fatalf("Unstash with another chain's S1 = %s, missing %v", got, missing)
	}
	// Shadowing: S1 ran again later (its entry is last), and that output
	// was dropped too. The later mark wins.
	again := back.Clone()
	again.Outputs["S1"] = json.RawMessage(`{"n":11}`)
	again.Trace = append(again.Trace, TraceEntry{Path: "9", Service: "S1", Outcome: OutcomeOK, Start: t0, End: t0})
	drop2 := again.Droppable(0)
	if !slices.Equal(labelsOf(drop2), []string{"S1"}) {
		t.Fatalf("Droppable after S1 ran again = %v", labelsOf(drop2))
	}
	again = again.WithoutStashed(drop2)
	if again.Trace[4].Stash != Digest(json.RawMessage(`{"n":11}`)) || again.Trace[0].Stash != Digest(want["S1"]) {
		t.Fatalf("marks after S1 ran again = %+v", again.Trace)
	}
	store["S1@"+Digest(want["S1"])] = want["S1"]
	store["S1@"+drop2[0].Digest] = drop2[0].Value
	got, missing = Unstash(again.Outputs, again.Trace, lookup)
	if len(missing) > 0 || string(got["S1"]) != `{"n":11}` {
		t.Fatalf("S1 = %s (missing %v), want the later output", got["S1"], missing)
	}
	// A later output under a stashed label wins over the stash.
	back.Outputs["S1"] = json.RawMessage(`{"n":7}`)
	got, _ = Unstash(back.Outputs, back.Trace, lookup)
	if string(got["S1"]) != `{"n":7}` {
		t.Fatalf("S1 = %s, want the later output", got["S1"])
	}
}

func TestDroppableWaitsForMinBytes(t *testing.T) {
	p := stashPack(svc("S4", "3", "reads", "()"))
	// S1, b and S3: 2 + 1 + 2 bytes of labels, 3 × 7 of values.
	if got := p.Droppable(26); len(got) != 3 {
		t.Errorf("Droppable(26) = %v, want all three", labelsOf(got))
	}
	if got := p.Droppable(27); got != nil {
		t.Errorf("Droppable(27) = %v, want none", labelsOf(got))
	}
}
