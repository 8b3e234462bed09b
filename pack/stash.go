package pack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"

	"github.com/bedwe/bedwe/grammar"
)

// StashedOutput is one output that leaves a pack: the workflow's origin
// copies keep Value under (Label, Digest) until the workflow ends, and the
// origin puts it back into the result (Unstash).
//
// Why it is safe (issue 14, docs/bench/notes.md "Outputs nobody ahead can
// name"): an output leaves a pack only after every origin copy journaled
// it, so it is as durable as the workflow record; the attempt that produced
// it is marked with its digest in the trace, and the trace travels with the
// chain through hand-offs, joins, re-routes and restarts, so the result is
// assembled from the marks of the chain that completed, never from another
// chain's outputs (two chains of one step may produce different outputs
// under one label: their digests differ).
type StashedOutput struct {
	Label  string          `cbor:"1,keyasint" json:"label"`
	Digest string          `cbor:"2,keyasint" json:"digest"`
	Value  json.RawMessage `cbor:"3,keyasint" json:"value"`
}

// Digest names an output value: the hex form of the first 16 bytes of its
// SHA-256.
func Digest(v json.RawMessage) string {
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:16])
}

// Droppable returns the outputs that may leave p, by label, with their
// digests: p delivers to the origin (no join frames: a join's continuation,
// which p does not carry, may name what a branch delivers), nothing ahead
// in p's workflow can name them (grammar.Names), and an attempt in p's
// trace succeeded under their label (the last such attempt carries the
// mark: it comes after every earlier output under that label, and any
// later one comes after it, so Unstash's "latest mark wins" is the
// shadowing rule of outputs). Nil when none may, or when together (labels
// and values) they weigh less than minBytes.
func (p *Pack) Droppable(minBytes int) []StashedOutput {
	if p == nil || len(p.Frames) > 0 || len(p.Outputs) == 0 {
		return nil
	}
	total := 0
	for l, v := range p.Outputs {
		total += len(l) + len(v)
	}
	if total < minBytes {
		return nil // cheap: most hops carry less than minBytes
	}
	names, all := grammar.Names(p.Workflow)
	if all {
		return nil
	}
	ok := map[string]int{}
	for _, e := range p.Trace {
		if e.Outcome == OutcomeOK {
			ok[e.OutputLabel()]++
		}
	}
	var out []StashedOutput
	size := 0
	for l, v := range p.Outputs {
		if names[l] || ok[l] == 0 {
			continue
		}
		out = append(out, StashedOutput{Label: l, Value: v})
		size += len(l) + len(v)
	}
	if len(out) == 0 || size < minBytes {
		return nil
	}
	for i := range out {
		out[i].Digest = Digest(out[i].Value)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
	return out
}

// WithoutStashed returns a copy of p without the outputs in stashed, the
// last attempt that succeeded under each one's label marked with its
// digest.
func (p *Pack) WithoutStashed(stashed []StashedOutput) *Pack {
	c := p.Clone()
	digest := map[string]string{}
	for _, s := range stashed {
		delete(c.Outputs, s.Label)
		digest[s.Label] = s.Digest
	}
	for i := len(c.Trace) - 1; i >= 0 && len(digest) > 0; i-- {
		e := &c.Trace[i]
		if d, ok := digest[e.OutputLabel()]; ok && e.Outcome == OutcomeOK {
			e.Stash = d
			delete(digest, e.OutputLabel())
		}
	}
	return c
}

// Unstash assembles a result: outputs, plus every output the trace marks
// as stashed whose label outputs lacks, read with lookup (a later mark of a
// label wins over an earlier one, as a later output does). It returns the
// labels whose stashed output lookup did not find.
func Unstash(outputs map[string]json.RawMessage, trace []TraceEntry, lookup func(label, digest string) (json.RawMessage, bool)) (map[string]json.RawMessage, []string) {
	var result map[string]json.RawMessage
	var missing []string
	for i := len(trace) - 1; i >= 0; i-- {
		e := trace[i]
		if e.Stash == "" || e.Outcome != OutcomeOK {
			continue
		}
		l := e.OutputLabel()
		if _, ok := outputs[l]; ok {
			continue
		}
		if _, ok := result[l]; ok {
			continue
		}
		v, ok := lookup(l, e.Stash)
		if !ok {
			if !slices.Contains(missing, l) {
				missing = append(missing, l)
			}
			continue
		}
		if result == nil {
			result = make(map[string]json.RawMessage, len(outputs)+8)
			for k, v := range outputs {
				result[k] = v
			}
		}
		result[l] = v
	}
	if result == nil {
		return outputs, missing
	}
	return result, missing
}
