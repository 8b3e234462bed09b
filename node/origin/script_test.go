package origin

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/internal/script"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scripts")

// TestScripts replays every testdata/*.txt script (package
// internal/script): each block is one command, a "----" line, and what the
// machine said to do followed by the record's state. go test -update
// rewrites them after a deliberate rule change.
func TestScripts(t *testing.T) {
	script.RunAll(t, *update, func(t *testing.T) func(string) []string {
		r := &run{w: New("wf")}
		return func(cmd string) []string { return r.apply(t, cmd) }
	})
}

// run is one script's machine and its journal: the last record the
// machine asked to persist, which is what a restart loads.
type run struct {
	w     *Workflow
	saved *Record
	// stash and runs are the stash's own journal entries (Ready.Stash).
	stash map[string]json.RawMessage
	runs  map[string][]pack.TraceEntry
}

// clock: minute m of the script's day.
func clock(t *testing.T, a map[string]string) time.Time {
	return time.Date(2026, 11, 23, 10, script.Int(t, a, "min", 0), 0, 0, time.UTC)
}

// completion builds a completion from trace=1,2 (steps that ran, each
// output {"by":"<chain>"}), ok or error=..., chain=... and settle=g1,g2
// (release items of the last step's guardians).
func completion(a map[string]string) api.OriginMsg {
	m := api.OriginMsg{WorkflowID: "wf", Done: true, OK: a["error"] == "", Error: a["error"], Outputs: map[string]json.RawMessage{}}
	if a["cancelled"] == "true" {
		m.OK, m.Cancelled, m.Error = false, true, CancelError
	}
	chain := a["chain"]
	if chain == "" {
		chain = "a"
	}
	trace, run := traceOf(a)
	for _, e := range trace {
		if e.Stash == "" {
			m.Outputs[e.Service] = json.RawMessage(`{"by":"` + chain + `"}`)
		}
	}
	if run != nil {
		// The run's entries left the pack: one stashed entry stands for them.
		m.Trace = append(m.Trace, pack.TraceEntry{Outcome: pack.OutcomeStashed, Stash: run.Digest})
		for _, e := range trace {
			if !slices.ContainsFunc(run.Entries, func(r pack.TraceEntry) bool { return r.Path == e.Path }) {
				m.Trace = append(m.Trace, e)
			}
		}
	} else {
		m.Trace = trace
	}
	if a["settle"] != "" {
		m.Settle = []pack.Settle{{Kind: pack.SettleGuard, Key: "wf|last", Attempt: 0, Peers: script.Peers(a["settle"])}}
	}
	return m
}

// traceOf builds the trace of trace=1,2 (each step's output {"by":"<chain>"};
// stashed=1 marks step 1's output as dropped from the pack, O6) and, with
// run=1,2, the run of those steps' entries that left the pack.
func traceOf(a map[string]string) ([]pack.TraceEntry, *pack.StashedTrace) {
	chain := cmp.Or(a["chain"], "a")
	stashed := map[string]bool{}
	for _, s := range strings.Split(a["stashed"], ",") {
		stashed[s] = true
	}
	var trace []pack.TraceEntry
	if a["trace"] != "" {
		steps := strings.Split(a["trace"], ",")
		for i, s := range steps {
			start := time.Date(2026, 11, 23, 9, 0, len(steps)-i, 0, time.UTC) // out of order
			e := pack.TraceEntry{Path: s, Service: "S" + s, Start: start, Outcome: pack.OutcomeOK}
			if stashed[s] {
				e.Stash = pack.Digest(json.RawMessage(`{"by":"` + chain + `"}`))
			}
			trace = append(trace, e)
		}
	}
	if a["run"] == "" {
		return trace, nil
	}
	var run []pack.TraceEntry
	for _, s := range strings.Split(a["run"], ",") {
		for _, e := range trace {
			if e.Path == s {
				run = append(run, e)
			}
		}
	}
	return trace, &pack.StashedTrace{Digest: pack.TraceDigest(run), Entries: run}
}

// apply runs one command and renders what the machine said and its state.
func (r *run) apply(t *testing.T, cmd string) []string {
	fields := strings.Fields(cmd)
	a := script.Args(fields[1:])
	w := r.w
	var ev Event
	switch fields[0] {
	case "submit":
		ev = Submitted{Source: "S1 S2 S3", StepsTotal: script.Int(t, a, "steps", 3), Origin: "self", Origins: []string{"/self"},
			Replicas: script.Peers(a["replicas"]), At: clock(t, a)}
	case "replica-stored":
		rec := Record{Status: api.Status{ID: a["id"], State: api.StateRunning, StepsTotal: 3, Origin: a["primary"]},
			Source: "S1 S2 S3", Primary: pack.Peer{ID: a["primary"]}}
		if rec.Status.ID == "" {
			rec.Status.ID = "wf"
		}
		ev = ReplicaStored{Record: rec}
	case "stash":
		// stash steps=1,3 chain=a: outputs {"by":"a"} of S1 and S3; with
		// trace=... run=... (as complete's) also that run of entries.
		var outs []pack.StashedOutput
		for _, s := range strings.Split(a["steps"], ",") {
			if s == "" {
				continue
			}
			v := json.RawMessage(`{"by":"` + cmp.Or(a["chain"], "a") + `"}`)
			d := pack.Digest(v)
			if a["digest"] != "" {
				d = a["digest"]
			}
			outs = append(outs, pack.StashedOutput{Label: "S" + s, Digest: d, Value: v})
		}
		_, run := traceOf(a)
		if run != nil && a["digest"] != "" {
			run.Digest = a["digest"]
		}
		ev = Stashed{Outputs: outs, Trace: run}
	case "progress":
		outcome := pack.OutcomeOK
		if a["outcome"] != "" {
			outcome = pack.Outcome(a["outcome"])
		}
		ev = Progress{Entry: pack.TraceEntry{Path: a["path"], Outcome: outcome}}
	case "complete":
		ev = Completed{Msg: completion(a), At: clock(t, a)}
	case "from-replica":
		ev = CompletionFromReplica{Msg: completion(a), From: a["from"], At: clock(t, a)}
	case "from-primary":
		ev = CompletionFromPrimary{Msg: completion(a), At: clock(t, a)}
	case "hand-back-acked":
		ev = HandBackAcked{}
	case "cancel":
		ev = Cancelled{At: clock(t, a)}
	case "sync":
		var msg *api.OriginMsg
		if a["ended"] == "true" {
			m := completion(a)
			msg = &m
		}
		ev = SyncAnswer{From: a["from"], Msg: msg, At: clock(t, a)}
	case "prune":
		ev = Prune{Before: clock(t, map[string]string{"min": a["before"]}), Forget: clock(t, map[string]string{"min": a["forget"]})}
	case "new":
		r.w, r.saved = New("wf"), nil
		return []string{state(r.w)}
	case "restart":
		// What the journal holds: progress that was never written is gone.
		if r.saved == nil {
			r.w = New("wf")
		} else {
			rec := *r.saved
			rec.Stash, rec.StashTrace = maps.Clone(r.stash), maps.Clone(r.runs)
			r.w = Load(rec)
		}
		return []string{ready(r.w.Resume()), state(r.w)}
	case "status", "result":
		st := w.Status(fields[0] == "result")
		return []string{"reply: " + status(st), state(w)}
	case "summary":
		return []string{"reply: " + status(w.Summary()), state(w)}
	case "ended":
		ended, done := w.Ended()
		s := fmt.Sprintf("reply: ended=%v", ended)
		if done != nil {
			s += " " + msgString(*done)
		}
		return []string{s, state(w)}
	default:
		t.Fatalf("unknown command %q", fields[0])
	}
	rd := w.Step(ev)
	if rd.Persist != nil {
		if len(rd.Persist.Stash) > 0 || len(rd.Persist.StashTrace) > 0 {
			t.Fatalf("the record to write holds the stash (%d outputs, %d runs): it is written in entries of its own",
				len(rd.Persist.Stash), len(rd.Persist.StashTrace))
		}
		r.saved = rd.Persist
	}
	if sw := rd.Stash; sw != nil {
		if sw.Drop {
			r.stash, r.runs = nil, nil
		}
		for _, o := range sw.Outputs {
			if r.stash == nil {
				r.stash = map[string]json.RawMessage{}
			}
			r.stash[StashKey(o.Label, o.Digest)] = o.Value
		}
		for _, run := range sw.Runs {
			if r.runs == nil {
				r.runs = map[string][]pack.TraceEntry{}
			}
			r.runs[run.Digest] = run.Entries
		}
	}
	if rd.Delete {
		r.saved, r.stash, r.runs = nil, nil, nil
	}
	return []string{ready(rd), state(w)}
}

func ids(ps []pack.Peer) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.ID)
	}
	return strings.Join(s, ",")
}

func outputs(m map[string]json.RawMessage) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+string(m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func paths(tr []pack.TraceEntry) string {
	var s []string
	for _, e := range tr {
		s = append(s, e.Path)
	}
	return strings.Join(s, ",")
}

func msgString(m api.OriginMsg) string {
	s := "ok"
	switch {
	case m.Cancelled:
		s = "cancelled"
	case !m.OK:
		s = "failed(" + m.Error + ")"
	}
	return s + " result=" + outputs(m.Outputs)
}

func status(st api.Status) string {
	s := fmt.Sprintf("%s steps=%d/%d", st.State, st.StepsDone, st.StepsTotal)
	if st.Error != "" {
		s += " error=" + strconv.Quote(st.Error)
	}
	if !st.Finished.IsZero() {
		s += " finished=" + st.Finished.Format("15:04")
	}
	if len(st.Recent) > 0 {
		s += " recent=" + paths(st.Recent)
	}
	if st.Result != nil {
		s += " result=" + outputs(st.Result)
	}
	if len(st.Trace) > 0 {
		s += " trace=" + paths(st.Trace)
	}
	return s
}

func ready(r Ready) string {
	var parts []string
	if r.Persist != nil {
		parts = append(parts, "persist")
	}
	if r.Delete {
		parts = append(parts, "delete")
	}
	if sw := r.Stash; sw != nil {
		var put []string
		for _, o := range sw.Outputs {
			put = append(put, o.Label)
		}
		for _, run := range sw.Runs {
			put = append(put, fmt.Sprintf("run(%d)", len(run.Entries)))
		}
		switch {
		case sw.Drop:
			parts = append(parts, "stash-drop")
		default:
			parts = append(parts, "stash("+strings.Join(put, ",")+")")
		}
	}
	for _, s := range r.Settle {
		parts = append(parts, fmt.Sprintf("settle(%s@%d at %s)", s.Key, s.Attempt, ids(s.Peers)))
	}
	if r.Reply != nil {
		switch {
		case r.Reply.Error != "":
			parts = append(parts, "reply=(error: "+r.Reply.Error+")")
		case r.Reply.Status != nil:
			parts = append(parts, "reply=("+status(*r.Reply.Status)+")")
		default:
			parts = append(parts, "reply=(ok)")
		}
	}
	if tl := r.TellReplicas; tl != nil {
		parts = append(parts, fmt.Sprintf("tell(%s: %s)", ids(tl.Peers), msgString(tl.Completion)))
	}
	if h := r.HandBack; h != nil {
		parts = append(parts, fmt.Sprintf("hand-back(%s: %s)", h.Primary.ID, msgString(h.Completion)))
	}
	if r.BroadcastCancel {
		parts = append(parts, "broadcast-cancel")
	}
	if len(r.AskReplicas) > 0 {
		parts = append(parts, "ask-replicas("+ids(r.AskReplicas)+")")
	}
	if e := r.Emit; e != nil {
		s := "emit(completed after=" + e.After
		if e.Stale {
			s += " stale"
		}
		if e.Ended {
			s += " ended=" + e.State.String()
		}
		if len(e.Missing) > 0 {
			s += " missing=" + strings.Join(e.Missing, ",")
		}
		parts = append(parts, s+")")
	}
	return "do: " + strings.Join(parts, " ")
}

func state(w *Workflow) string {
	if !w.Exists() {
		return "is: none"
	}
	rec := w.Record()
	s := fmt.Sprintf("is: %s %s", w.Role(), w.State())
	if len(rec.Replicas) > 0 {
		s += " replicas=" + ids(rec.Replicas)
	}
	if rec.Primary.ID != "" {
		s += " primary=" + rec.Primary.ID
	}
	if rec.HandBack {
		s += " hand-back"
	}
	if rec.Pruned {
		s += " pruned"
	}
	if len(rec.Stash) > 0 {
		s += fmt.Sprintf(" stash=%d", len(rec.Stash))
	}
	if len(rec.StashTrace) > 0 {
		s += fmt.Sprintf(" runs=%d", len(rec.StashTrace))
	}
	return s
}
