package bench

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/pack"
)

func TestPackGrowth(t *testing.T) {
	const n = 30
	rows, err := PackGrowth(n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	for i, r := range rows {
		if r.Hop != i+1 || r.Remaining != n-i || r.Outputs != i || r.Trace != i {
			t.Errorf("row %d = %+v: want hop %d, %d remaining, %d outputs and trace entries", i, r, i+1, n-i, i)
		}
		if i > 0 && r.Bytes <= rows[i-1].Bytes {
			t.Errorf("hop %d: %d bytes, not more than hop %d's %d", r.Hop, r.Bytes, i, rows[i-1].Bytes)
		}
	}
	// Outputs list every earlier label, so data grows faster than linearly.
	d1, d2 := rows[10].DataBytes-rows[9].DataBytes, rows[n-1].DataBytes-rows[n-2].DataBytes
	if d2 <= d1 {
		t.Errorf("output growth per hop %d at hop 10 and %d at hop %d; want it to grow", d1, d2, n)
	}
	if _, err := PackGrowth(0, nil); err == nil {
		t.Error("PackGrowth(0): want an error")
	}
}

// TestEchoMirror checks that the echo output PackGrowth builds is byte for
// byte what node/service's echo builtin returns, so the estimate stays
// honest if that builtin changes.
func TestEchoMirror(t *testing.T) {
	reg, err := service.Parse([]byte(Services))
	if err != nil {
		t.Fatalf("bench services file: %v", err)
	}
	svc, ok := reg.Lookup("e3")
	if !ok || svc.Kind() != service.KindEcho {
		t.Fatalf("e3 must be an echo service under the bench services file")
	}
	w, _ := grammar.Parse("t", []byte("e1 e2 e3"))
	grammar.AssignPaths(w)
	head := w.Steps[2].(*grammar.Service)
	p := &pack.Pack{WorkflowID: "wf-1", Input: json.RawMessage(`{"a":1}`), Outputs: map[string]json.RawMessage{
		"e1": json.RawMessage(`{}`), "e2": json.RawMessage(`{}`),
	}}
	mine, err := echoOutput(p, head, p.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	real, err := svc.Invoke(context.Background(), service.Request{
		WorkflowID: p.WorkflowID, Step: head.Path, Service: head.Name, Attempt: p.Attempt,
		IdempotencyKey: service.IdempotencyKey(p.WorkflowID, head.Path, p.Attempt), Input: p.Input, Outputs: p.Outputs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(mine) != string(real) {
		t.Errorf("echo mirror differs from the builtin:\n mine %s\n real %s", mine, real)
	}
}

// TestBenchServices checks the bench services file routes every name
// prefix of the experiments to the builtin they rely on.
func TestBenchServices(t *testing.T) {
	reg, err := service.Parse([]byte(Services))
	if err != nil {
		t.Fatalf("bench services file: %v", err)
	}
	for name, kind := range map[string]string{
		"e1": service.KindEcho, "e3_10": service.KindEcho, "sleep7": service.KindSleep,
		"sleep2_3": service.KindSleep, WfPrefix + "mProject_ID01": service.KindSleep, "fail1": service.KindFail,
	} {
		svc, ok := reg.Lookup(name)
		if !ok || svc.Kind() != kind {
			t.Errorf("%s: want a %s service", name, kind)
		}
	}
}

// With reads=() on every step and stashing at the node's default, the
// pack stops growing: no hop of the second half of a 200-step sequence
// carries more than the largest of the first half, and none more than
// three times the stash threshold.
func TestPackGrowthReadsNothingStaysFlat(t *testing.T) {
	if DefaultStashMin != node.DefaultStashMin {
		t.Fatalf("bench.DefaultStashMin %d, node.DefaultStashMin %d", DefaultStashMin, node.DefaultStashMin)
	}
	plain, err := PackGrowth(200, nil)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := PackGrowthReadsNothing(200, nil, DefaultStashMin)
	if err != nil {
		t.Fatal(err)
	}
	largest := func(rows []PackRow) int {
		m := 0
		for _, r := range rows {
			m = max(m, r.Bytes)
		}
		return m
	}
	first, second := largest(flat[:100]), largest(flat[100:])
	if second > first || second > 3*DefaultStashMin {
		t.Errorf("largest pack of hops 101-200 %d bytes, of hops 1-100 %d: want no more, and at most %d", second, first, 3*DefaultStashMin)
	}
	if plain[199].Bytes < 2*largest(plain[:100]) {
		t.Errorf("the plain sequence's pack grew from %d to %d bytes only: the comparison lost its point", largest(plain[:100]), plain[199].Bytes)
	}
	t.Logf("largest pack, hops 1-100 / 101-200: plain %d / %d bytes, reads=() stashed %d / %d", largest(plain[:100]), plain[199].Bytes, first, second)
}
