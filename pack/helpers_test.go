package pack

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

// Tree builders for tests: the codec encodes AST trees directly, so tests
// build them by hand instead of going through the parser.

func svc(name, path string, kv ...string) *grammar.Service {
	s := &grammar.Service{Name: name, Path: path}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Attrs = append(s.Attrs, grammar.Attr{Key: kv[i], Value: kv[i+1]})
	}
	return s
}

func seq(steps ...grammar.Step) *grammar.Workflow { return &grammar.Workflow{Steps: steps} }

func fork(bs ...*grammar.Workflow) *grammar.Fork         { return &grammar.Fork{Branches: bs} }
func first(bs ...*grammar.Workflow) *grammar.First       { return &grammar.First{Branches: bs} }
func failover(bs ...*grammar.Workflow) *grammar.Failover { return &grammar.Failover{Branches: bs} }
func choice(arms ...*grammar.Arm) *grammar.Choice        { return &grammar.Choice{Arms: arms} }

func plain(w *grammar.Workflow) *grammar.Arm { return &grammar.Arm{Kind: grammar.ArmPlain, Body: w} }
func ifArm(guard string, w *grammar.Workflow) *grammar.Arm {
	return &grammar.Arm{Kind: grammar.ArmIf, Guard: guard, Body: w}
}
func elseArm(w *grammar.Workflow) *grammar.Arm { return &grammar.Arm{Kind: grammar.ArmElse, Body: w} }

var (
	t0       = time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)
	peerA    = Peer{ID: "12D3KooWA", Addrs: []string{"/ip4/10.0.0.1/tcp/4001", "/ip4/10.0.0.1/udp/4001/quic-v1"}, Zone: "z1"}
	peerB    = Peer{ID: "12D3KooWB", Addrs: []string{"/ip4/10.0.0.2/tcp/4001"}, Zone: "z2"}
	peerC    = Peer{ID: "12D3KooWC"}
	holders2 = []Peer{peerB, peerC}
)

// minimalPack is the smallest valid pack: one service, an origin.
func minimalPack() *Pack {
	return &Pack{
		WorkflowID: "wf-1",
		Origin:     []Peer{peerA},
		Workflow:   seq(svc("S1", "0")),
	}
}

// fullPack uses every construct and field the wire format carries.
func fullPack() *Pack {
	return &Pack{
		WorkflowID: "01JABCDEF-wf.7",
		Origin:     []Peer{peerA, peerB},
		Workflow: seq(
			svc("mProject_ID0000001", "1", "timeout", "30s", "retries", "3", "backoff", "500ms..10s", "out", "tiles"),
			fork(
				seq(svc("A", "2.0/0"), svc("B", "2.0/1", "once", "true")),
				seq(first(seq(svc("C", "2.1/0.0/0")), seq(svc("D", "2.1/0.1/0", "expect", "2m")))),
			),
			choice(
				ifArm(`tiles.count > 3 && input.mode == "fast"`, seq(svc("E", "3.0/0"))),
				elseArm(seq(failover(seq(svc("F", "3.1/0.0/0")), seq(svc("G", "3.1/0.1/0"), svc("H", "3.1/0.1/1"))))),
			),
			choice(plain(seq(svc("I", "4.0/0"))), plain(seq(svc("J", "4.1/0")))),
			svc("K", "5"),
		),
		Input: json.RawMessage(`{"mode":"fast","n":[1,2,3]}`),
		Outputs: map[string]json.RawMessage{
			"prep":  json.RawMessage(`{"ok":true}`),
			"setup": json.RawMessage(`{"dir":"/tmp/x","files":["a","b"]}`),
		},
		Frames: []Frame{
			{JoinID: "join-1", Kind: FrameFork, Branch: 1, Holders: holders2},
			{JoinID: "join-2", Kind: FrameFailover, Branch: 0, Holders: []Peer{peerA}},
		},
		Attempt: 2,
		Hops:    7,
		Sender:  peerB,
		Trace: []TraceEntry{
			{Path: "0", Service: "prep", Peer: "12D3KooWA", Zone: "z1", Start: t0, End: t0.Add(1500 * time.Millisecond), Attempt: 0, Outcome: OutcomeOK},
			{Path: "1", Service: "mProject_ID0000001", Peer: "12D3KooWC", Start: t0.Add(2 * time.Second), End: t0.Add(3 * time.Second), Attempt: 1, Outcome: OutcomeFailed, Note: "exit status 1: disk full"},
		},
		Deadline: t0.Add(time.Hour),
	}
}

// residualPack is a pack in the middle of a sequential workflow: services
// steps still to run, outputs steps already done with an output each.
func residualPack(services, outputs int) *Pack {
	p := &Pack{
		WorkflowID: "01JBENCHWORKFLOW0000000000",
		Origin:     []Peer{peerA, peerB},
		Workflow:   &grammar.Workflow{},
		Input:      json.RawMessage(`{"survey":"2mass","band":"j","center":"M17","size":0.5}`),
		Frames:     []Frame{{JoinID: "join-bench", Kind: FrameFork, Branch: 3, Holders: holders2}},
		Attempt:    0,
		Hops:       outputs,
		Sender:     peerB,
		Deadline:   t0.Add(24 * time.Hour),
	}
	for i := range services {
		path := strconv.Itoa(outputs + i)
		p.Workflow.Steps = append(p.Workflow.Steps, svc(fmt.Sprintf("mProject_ID%07d", outputs+i), path, "timeout", "5m", "retries", "2"))
	}
	if outputs > 0 {
		p.Outputs = make(map[string]json.RawMessage, outputs)
	}
	for i := range outputs {
		label := fmt.Sprintf("mProject_ID%07d", i)
		p.Outputs[label] = json.RawMessage(fmt.Sprintf(`{"file":"p%07d.fits","bytes":%d,"ok":true}`, i, 4096+i))
		p.Trace = append(p.Trace, TraceEntry{
			Path: strconv.Itoa(i), Service: label, Peer: "12D3KooWA", Zone: "z1",
			Start: t0.Add(time.Duration(i) * time.Second), End: t0.Add(time.Duration(i)*time.Second + 800*time.Millisecond),
			Outcome: OutcomeOK,
		})
	}
	return p
}

// nestedForks returns a workflow: a service, then depth FORKs nested in
// their first branch.
func nestedForks(depth int) *grammar.Workflow {
	inner := seq(svc("leaf", "x"))
	for d := 0; d < depth; d++ {
		inner = seq(fork(inner, seq(svc("side", "y"+strconv.Itoa(d)))))
	}
	return seq(append([]grammar.Step{svc("head", "0")}, inner.Steps...)...)
}
