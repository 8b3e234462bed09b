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
// Why it is safe (docs/benchmarks.md, "Outputs nobody ahead can name"):
// an output leaves a pack only after every origin copy journaled
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

// OutcomeStashed marks a trace entry that stands for a run of earlier
// entries that left the pack (StashedTrace): Stash is their digest. Only
// packs carry such entries; the origin expands them (ExpandTrace), so a
// result's trace never shows one unless its run was lost.
const OutcomeStashed Outcome = "stashed"

// StashedTrace is a run of trace entries that left a pack, in trace order:
// the workflow's origin copies keep Entries under Digest, and the pack
// keeps one entry of outcome OutcomeStashed in their place (which a later
// run may include in turn).
type StashedTrace struct {
	Digest  string       `cbor:"1,keyasint" json:"digest"`
	Entries []TraceEntry `cbor:"2,keyasint" json:"entries"`
}

// Stash is what a holder asks the origin copies to keep before it hands on
// a pack without it.
type Stash struct {
	Outputs []StashedOutput `cbor:"1,keyasint,omitempty" json:"outputs,omitempty"`
	Trace   *StashedTrace   `cbor:"2,keyasint,omitempty" json:"trace,omitempty"`
}

// traceEntryBytes estimates an entry's share of an encoded pack.
func traceEntryBytes(e TraceEntry) int {
	return len(e.Path) + len(e.Service) + len(e.Peer) + len(e.Zone) + len(e.Note) + len(e.Label) + len(e.Stash) + 32
}

// PlanStash returns the pack to hand on instead of p and what the origin
// copies must keep first, or (p, nil) when nothing is worth it: the
// outputs that may leave (Droppable) and the trace entries that may, once
// either weighs minBytes (trace entries also leave with outputs that do). Only a pack that delivers to the origin (no join
// frames) stashes. A trace entry stays in the pack when something reads
// it there: a re-routed attempt (Attempt > 0: its chain's Lineage), the
// last entry (the learned run time) and the last one that succeeded (the
// step the chain ran last), and, for every output still in the pack, the
// last attempt that succeeded under its label (a later stash marks it).
// The rest leave as one run, replaced by one OutcomeStashed entry.
func (p *Pack) PlanStash(minBytes int) (*Pack, *Stash) {
	if p == nil || len(p.Frames) > 0 {
		return p, nil
	}
	outs := p.Droppable(minBytes)
	traceBytes := 0
	for _, e := range p.Trace {
		traceBytes += traceEntryBytes(e)
	}
	if outs == nil && traceBytes < minBytes {
		return p, nil
	}
	next := p
	if outs != nil {
		next = p.WithoutStashed(outs)
	}
	keep := make([]bool, len(next.Trace))
	lastOK := map[string]int{}
	for i, e := range next.Trace {
		if e.Attempt > 0 {
			keep[i] = true
		}
		if e.Outcome == OutcomeOK {
			lastOK[e.OutputLabel()] = i
		}
	}
	if n := len(next.Trace); n > 0 {
		keep[n-1] = true
	}
	if i := lastIndex(next.Trace, func(e TraceEntry) bool { return e.Outcome == OutcomeOK }); i >= 0 {
		keep[i] = true
	}
	for l := range next.Outputs {
		if i, ok := lastOK[l]; ok {
			keep[i] = true
		}
	}
	var run []TraceEntry
	runBytes := 0
	for i, e := range next.Trace {
		if !keep[i] {
			run = append(run, e)
			runBytes += traceEntryBytes(e)
		}
	}
	var st *StashedTrace
	// A run leaves once it weighs minBytes, or with outputs that leave
	// anyway (the round trip is paid).
	if len(run) > 1 && (runBytes >= minBytes || outs != nil) {
		st = &StashedTrace{Digest: TraceDigest(run), Entries: run}
	}
	if outs == nil && st == nil {
		return p, nil
	}
	if st != nil {
		if next == p {
			next = p.Clone()
		}
		trace := make([]TraceEntry, 0, len(next.Trace)-len(run)+1)
		trace = append(trace, TraceEntry{Outcome: OutcomeStashed, Stash: st.Digest,
			Start: run[0].Start, End: run[len(run)-1].End})
		for i, e := range next.Trace {
			if keep[i] {
				trace = append(trace, e)
			}
		}
		next.Trace = trace
	}
	return next, &Stash{Outputs: outs, Trace: st}
}

func lastIndex(trace []TraceEntry, ok func(TraceEntry) bool) int {
	for i := len(trace) - 1; i >= 0; i-- {
		if ok(trace[i]) {
			return i
		}
	}
	return -1
}

// TraceDigest names a run of trace entries: Digest of their JSON form.
func TraceDigest(entries []TraceEntry) string {
	b, err := json.Marshal(entries)
	if err != nil {
		return "" // never: entries are plain data
	}
	return Digest(b)
}

// ExpandTrace replaces every OutcomeStashed entry of trace by the entries
// lookup finds under its digest (expanded in turn, so a run that included
// an earlier run's entry gives both back). It returns the digests lookup
// did not find; their entries stay in place.
func ExpandTrace(trace []TraceEntry, lookup func(digest string) ([]TraceEntry, bool)) ([]TraceEntry, []string) {
	if !slices.ContainsFunc(trace, func(e TraceEntry) bool { return e.Outcome == OutcomeStashed }) {
		return trace, nil
	}
	var missing []string
	seen := map[string]bool{}
	var expand func([]TraceEntry) []TraceEntry
	expand = func(in []TraceEntry) []TraceEntry {
		out := make([]TraceEntry, 0, len(in))
		for _, e := range in {
			if e.Outcome != OutcomeStashed {
				out = append(out, e)
				continue
			}
			run, ok := lookup(e.Stash)
			if !ok || seen[e.Stash] {
				missing = append(missing, e.Stash)
				out = append(out, e)
				continue
			}
			seen[e.Stash] = true
			out = append(out, expand(run)...)
		}
		return out
	}
	return expand(trace), missing
}
