package pack

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
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

// longPack is what the holder of step n hands on in a chain of n steps
// S1..Sn that read nothing, ahead of T[reads=(S<keep>)]; step 3 was
// re-routed once (an attempt-0 superseded entry, then attempt 1).
func longPack(n, keep int) *Pack {
	p := &Pack{WorkflowID: "wf-1", Origin: []Peer{peerA}, Sender: peerC, Outputs: map[string]json.RawMessage{}}
	p.Workflow = seq(svc("T", strconv.Itoa(n), "reads", "(S"+strconv.Itoa(keep)+")"))
	for i := 1; i <= n; i++ {
		l := "S" + strconv.Itoa(i)
		if i == 3 {
			p.Trace = append(p.Trace, TraceEntry{Path: strconv.Itoa(i - 1), Service: l, Peer: "12D3KooWdead", Outcome: OutcomeSuperseded, Start: t0, End: t0})
			p.Trace = append(p.Trace, TraceEntry{Path: strconv.Itoa(i - 1), Service: l, Peer: "12D3KooWpeer", Attempt: 1, Outcome: OutcomeOK, Start: t0, End: t0})
		} else {
			p.Trace = append(p.Trace, TraceEntry{Path: strconv.Itoa(i - 1), Service: l, Peer: "12D3KooWpeer", Outcome: OutcomeOK, Start: t0, End: t0})
		}
		p.Outputs[l] = json.RawMessage(`{"step":` + strconv.Itoa(i) + `}`)
	}
	return p
}

// PlanStash takes outputs and trace entries out of the pack; what it keeps
// is what the pack reads (lineage, the last entries, the producers of the
// outputs left), and the origin gets back the same trace and outputs.
func TestPlanStashAndExpand(t *testing.T) {
	p := longPack(30, 7)
	wantOutputs := p.Clone().Outputs
	next, s := p.PlanStash(64)
	if s == nil || s.Trace == nil || len(s.Outputs) != 29 {
		t.Fatalf("PlanStash = %+v, want 29 outputs and a run of trace entries", s)
	}
	if len(next.Outputs) != 1 || next.Outputs["S7"] == nil {
		t.Fatalf("outputs left = %v, want S7 (named ahead)", next.Outputs)
	}
	if !reflect.DeepEqual(next.Lineage(), p.Lineage()) {
		t.Errorf("lineage %v, want %v", next.Lineage(), p.Lineage())
	}
	if got, want := lastIndex(next.Trace, func(e TraceEntry) bool { return e.Outcome == OutcomeOK }), len(next.Trace)-1; got != want || next.Trace[got].Service != "S30" {
		t.Errorf("last entry left is %+v, want S30's", next.Trace[len(next.Trace)-1])
	}
	var kept []string
	for _, e := range next.Trace {
		kept = append(kept, e.Service+"@"+strconv.Itoa(e.Attempt)+":"+string(e.Outcome))
	}
	if want := []string{"@0:stashed", "S3@1:ok", "S7@0:ok", "S30@0:ok"}; !slices.Equal(kept, want) {
		t.Errorf("trace left = %v, want %v", kept, want)
	}
	// The origin expands and unstashes.
	runs := map[string][]TraceEntry{s.Trace.Digest: s.Trace.Entries}
	store := map[string]json.RawMessage{}
	for _, o := range s.Outputs {
		store[o.Label+"@"+o.Digest] = o.Value
	}
	// A second stash further on includes the first run's entry.
	next.Trace = append(next.Trace, TraceEntry{Path: "30", Service: "T", Peer: "12D3KooWpeer", Outcome: OutcomeOK, Start: t0, End: t0})
	next.Outputs["T"] = json.RawMessage(`{"t":1}`)
	next.Workflow = seq(svc("U", "31", "reads", "()"))
	final, s2 := next.PlanStash(1)
	if s2 == nil || s2.Trace == nil {
		t.Fatalf("second PlanStash = %+v", s2)
	}
	runs[s2.Trace.Digest] = s2.Trace.Entries
	for _, o := range s2.Outputs {
		store[o.Label+"@"+o.Digest] = o.Value
	}
	wantOutputs["T"] = json.RawMessage(`{"t":1}`)
	trace, missingRuns := ExpandTrace(final.Trace, func(d string) ([]TraceEntry, bool) { r, ok := runs[d]; return r, ok })
	if len(missingRuns) > 0 || len(trace) != len(p.Trace)+1 {
		t.Fatalf("expanded %d entries (missing %v), want %d", len(trace), missingRuns, len(p.Trace)+1)
	}
	got, missing := Unstash(final.Outputs, trace, func(l, d string) (json.RawMessage, bool) { v, ok := store[l+"@"+d]; return v, ok })
	if len(missing) > 0 || !reflect.DeepEqual(got, wantOutputs) {
		t.Fatalf("result = %s (missing %v), want %s", got, missing, wantOutputs)
	}
	var services []string
	for _, e := range trace {
		services = append(services, e.Service+"@"+strconv.Itoa(e.Attempt))
	}
	var want []string
	for _, e := range p.Trace {
		want = append(want, e.Service+"@"+strconv.Itoa(e.Attempt))
	}
	want = append(want, "T@0")
	slices.Sort(services)
	slices.Sort(want)
	if !slices.Equal(services, want) {
		t.Errorf("expanded trace holds %v, want %v", services, want)
	}
	// A run the origin does not have is reported and left in place.
	delete(runs, s.Trace.Digest)
	if _, missingRuns := ExpandTrace(final.Trace, func(d string) ([]TraceEntry, bool) { r, ok := runs[d]; return r, ok }); !slices.Equal(missingRuns, []string{s.Trace.Digest}) {
		t.Errorf("missing runs = %v, want the first run's digest", missingRuns)
	}
}

func TestPlanStashWaitsForMinBytesAndKeepsBranches(t *testing.T) {
	p := longPack(30, 7)
	if next, s := p.PlanStash(1 << 20); s != nil || next != p {
		t.Errorf("PlanStash(1 MiB) = %+v, want nothing", s)
	}
	p.Frames = []Frame{{JoinID: "j", Kind: FrameFork, Holders: []Peer{peerA}}}
	if _, s := p.PlanStash(1); s != nil {
		t.Errorf("a branch's pack stashed %+v", s)
	}
	// A workflow whose next step reads everything keeps its outputs, and
	// the attempts that produced them (a later stash marks them): only a
	// superseded attempt could leave, too little for a run.
	q := longPack(30, 7)
	q.Workflow = seq(svc("T", "30"))
	if next, s := q.PlanStash(1); s != nil || next != q {
		t.Errorf("PlanStash with a reader of everything ahead = %+v", s)
	}
}
