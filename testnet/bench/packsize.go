package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/pack"
)

// PackRow is the estimated size of the pack handed to the peer that runs
// hop Hop (1-based) of a no-op sequence.
type PackRow struct {
	// Hop is the step the pack's receiver runs; Remaining the services
	// left in its workflow (the head included).
	Hop, Remaining int
	// Outputs and Trace count the outputs and trace entries it carries;
	// DataBytes is the size of the outputs (labels and JSON).
	Outputs, Trace, DataBytes int
	// Bytes is the encoded size (pack.Encode), what travels and what the
	// receiver journals.
	Bytes int
}

// PackGrowth estimates the pack sizes along a no-op sequence of n services
// ("e1 ... en", the workflow of the sequential experiment): a node's packs
// cannot be seen from outside, so this builds the same packs in-process the
// way a node does — peel the head, record the echo builtin's output under
// the step's label and one trace entry per step, count the hop — and
// encodes each with pack.Encode. peers are the nodes the steps run on in
// turn (nil: synthetic peers with IDs and addresses of real length).
//
// The echo output is rebuilt field for field from node/service's echo
// builtin (workflow id, step path, service, attempt, idempotency key, input,
// and the sorted labels of earlier outputs), so its size matches the real
// one to the byte unless that builtin changes.
func PackGrowth(n int, peers []pack.Peer) ([]PackRow, error) {
	return packGrowth(n, peers, false, -1)
}

// DefaultStashMin is node.DefaultStashMin (a test keeps them equal; the
// bench does not import the node).
const DefaultStashMin = 8 << 10

// PackGrowthReadsNothing is PackGrowth for the same sequence with reads=()
// on every step (each step is given no earlier output, so no echo output
// lists earlier labels), handed on the way a node with --stash-min
// stashMin does (pack.PlanStash, every stash taken by the origin copies):
// the pack a chain of steps that name no earlier output carries.
func PackGrowthReadsNothing(n int, peers []pack.Peer, stashMin int) ([]PackRow, error) {
	return packGrowth(n, peers, true, stashMin)
}

func packGrowth(n int, peers []pack.Peer, readsNothing bool, stashMin int) ([]PackRow, error) {
	if n < 1 {
		return nil, fmt.Errorf("pack growth: need at least one service, got %d", n)
	}
	if len(peers) == 0 {
		for i := range 40 {
			peers = append(peers, pack.Peer{
				ID:    fmt.Sprintf("12D3KooW%044d", i),
				Addrs: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 40000+i)},
				Zone:  fmt.Sprintf("z%d", i%4),
			})
		}
	}
	w, err := grammar.Parse("packsize", []byte(Sequential("e", n)))
	if err != nil {
		return nil, fmt.Errorf("pack growth: %w", err)
	}
	if readsNothing {
		grammar.WalkServices(w, func(s *grammar.Service) {
			s.Attrs = append(s.Attrs, grammar.Attr{Key: grammar.AttrReads, Value: "()"})
		})
	}
	grammar.AssignPaths(w)
	p := &pack.Pack{
		WorkflowID: "wf-0123456789abcdef",
		Origin:     []pack.Peer{peers[0]},
		Workflow:   w,
		Input:      json.RawMessage("null"),
		Outputs:    map[string]json.RawMessage{},
	}
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	var out []PackRow
	for hop := 1; hop <= n; hop++ {
		runner := peers[hop%len(peers)]
		p.Sender = peers[(hop-1)%len(peers)]
		p.Hops = hop
		if stashMin >= 0 {
			p, _ = p.PlanStash(stashMin)
		}
		b, err := pack.Encode(p)
		if err != nil {
			return nil, fmt.Errorf("pack growth: hop %d: %w", hop, err)
		}
		data := 0
		for l, v := range p.Outputs {
			data += len(l) + len(v)
		}
		out = append(out, PackRow{Hop: hop, Remaining: len(p.Workflow.Steps), Outputs: len(p.Outputs), Trace: len(p.Trace), DataBytes: data, Bytes: len(b)})

		head, err := p.Head()
		if err != nil {
			return nil, err
		}
		given := p.Outputs
		if readsNothing {
			given = nil
		}
		echo, err := echoOutput(p, head, given)
		if err != nil {
			return nil, err
		}
		start := t0.Add(time.Duration(hop) * 7 * time.Millisecond)
		p.Trace = append(p.Trace, pack.TraceEntry{
			Path: head.Path, Service: head.Name, Peer: runner.ID, Zone: runner.Zone,
			Start: start, End: start.Add(1234567 * time.Nanosecond), Outcome: pack.OutcomeOK,
		})
		p.Outputs[head.Label()] = echo
		p.Workflow = &grammar.Workflow{Steps: p.Workflow.Steps[1:]}
	}
	return out, nil
}

// echoOutput mirrors node/service's echo builtin.
func echoOutput(p *pack.Pack, head *grammar.Service, given map[string]json.RawMessage) (json.RawMessage, error) {
	type echoed struct {
		WorkflowID     string          `json:"workflow_id"`
		Step           string          `json:"step"`
		Service        string          `json:"service"`
		Attempt        int             `json:"attempt"`
		IdempotencyKey string          `json:"idempotency_key"`
		Input          json.RawMessage `json:"input"`
	}
	labels := slices.Sorted(maps.Keys(given))
	if labels == nil {
		labels = []string{}
	}
	v := struct {
		Echo    echoed   `json:"echo"`
		Outputs []string `json:"outputs"`
	}{
		Echo: echoed{
			WorkflowID: p.WorkflowID, Step: head.Path, Service: head.Name, Attempt: p.Attempt,
			IdempotencyKey: fmt.Sprintf("%s:%s:%d", p.WorkflowID, head.Path, p.Attempt), Input: p.Input,
		},
		Outputs: labels,
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("pack growth: echo output: %w", err)
	}
	return b, nil
}
