// Package origin is the decision core of a workflow's origin: the record a
// peer keeps of a workflow submitted to it (the primary origin, its result
// sink) or of one submitted to another peer (a replica of that record), and
// the rules that say what each event does to it. It does no I/O, takes no
// lock, starts no goroutine and reads no clock (time comes in events): Step
// takes one event and returns a Ready that says what the node must do, in
// order (the shape of node/join and node/guard):
//
//  1. persist (Ready.Persist, Ready.Stash): write the record and the
//     stash's entries, in one journal write — and refuse the event if
//     that fails (the node steps a clone and keeps it only once written);
//  2. settle what the last holder listed (Ready.Settle, completions only),
//     then answer the request that stepped it (Ready.Reply): the answer
//     waits for the settle, so a sender whose completion was answered
//     needs nothing more done;
//  3. start the asynchronous work: tell the replicas the completion
//     (Ready.TellReplicas, primary), hand the completion back to the
//     primary (Ready.HandBack, replica), broadcast a cancellation
//     (Ready.BroadcastCancel), ask the replicas whether the workflow ended
//     (Ready.AskReplicas, a restarted primary), and record the event
//     (Ready.Emit).
//
// # Invariants
//
//   - O1 (one completion): the first completion a copy hears (from the
//     last holder, from another copy, or in a restart's sync) ends the
//     workflow; every later one is stale — it is acknowledged, its settle
//     items are still settled (they release the stale chain's guardians),
//     and it never changes the result.
//   - O2 (durable before answered): every change that ends the workflow, or
//     creates or updates a copy, is in Ready.Persist or Ready.Stash and the
//     answer comes after it; an event whose write fails is refused and
//     changes nothing, so the sender retries. Progress (steps done, recent attempts) is
//     advisory and not written on its own: the completion recounts the
//     steps from the trace.
//   - O3 (the primary learns the result): a replica that got the
//     completion from the chain (the primary was down) hands it back to the
//     primary until the primary acknowledges it (Record.HandBack keeps the
//     duty across a restart, Resume restarts it); a primary that restarts
//     while its record is running asks its replicas (Resume, SyncAnswer).
//     A primary that ends tells its replicas, which then need no hand-back.
//   - O4 (ended stays ended): a succeeded, failed or cancelled workflow
//     never runs again: progress and completions after the end change
//     nothing, a cancel of an ended workflow does not change its state, and
//     a guardian asking whether the workflow ended ([Workflow.Ended]) is
//     told so with the completion.
//   - O5 (retention, bounded): a record that ended before the retention
//     cut-off ([Prune].Before) becomes a tombstone — state, error and
//     times kept, source, result and trace dropped — so a guardian asking
//     still hears that the workflow ended (O4) while the journal stops
//     growing with history; a tombstone that ended before the tombstone
//     cut-off ([Prune].Forget) is deleted. A running record, or a replica
//     that still owes the primary its completion (O3), is never pruned.
//   - O6 (stashed outputs come back): an output or a run of trace entries
//     a holder dropped from its pack (pack.PlanStash) was first stored by
//     every copy (Stashed: written before it is answered, O2, and refused
//     once the workflow ended, O4); the journal keeps each as an entry of
//     its own beside the record (Ready.Stash), so a stash writes only what
//     it adds. The first completion expands every
//     run its trace names (pack.ExpandTrace) and puts every output the
//     trace marks as stashed back into the result, by label and digest, so
//     a chain's result never takes another chain's output (pack.Unstash);
//     the stash is then dropped, the result holding it. A mark or a run
//     this copy has nothing for is reported (Emit.Missing), never guessed.
//
// These serve I1 of package node (at most one live chain; no guardian
// re-runs work of a finished workflow): guardians ask an origin before
// they re-route, and O1 and O4 make the answer final once given.
//
// The node owns persistence, the network and the clock; the scripted tests
// in testdata/*.txt drive the machine and show each decision (go test
// ./node/origin -update rewrites them after a deliberate rule change).
package origin

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

// RecentEvents is how many step attempts a status shows.
const RecentEvents = 8

// CancelError is the error of a workflow cancelled by request.
const CancelError = "cancelled by request"

// Role says which copy of a workflow record this is.
type Role uint8

// The roles.
const (
	// RolePrimary is the origin the workflow was submitted to.
	RolePrimary Role = iota + 1
	// RoleReplica keeps a copy for another origin.
	RoleReplica
)

func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleReplica:
		return "replica"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// State is where a workflow is.
type State uint8

// The states. Every state but StateRunning is an end (O4).
const (
	StateRunning State = iota + 1
	StateSucceeded
	StateFailed
	StateCancelled
)

// String is the state's name on the wire (api.StateRunning, ...).
func (s State) String() string {
	switch s {
	case StateRunning:
		return api.StateRunning
	case StateSucceeded:
		return api.StateSucceeded
	case StateFailed:
		return api.StateFailed
	case StateCancelled:
		return api.StateCancelled
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

func parseState(s string) State {
	switch s {
	case api.StateRunning:
		return StateRunning
	case api.StateSucceeded:
		return StateSucceeded
	case api.StateFailed:
		return StateFailed
	case api.StateCancelled:
		return StateCancelled
	}
	return 0
}

// Record is one copy of a workflow record as journaled (journal bucket
// "workflows", keyed by workflow ID). Keys 1-5 are those of the records
// written before this package existed, so old journals load; key 6 is
// optional.
type Record struct {
	Status api.Status `cbor:"1,keyasint"`
	Source string     `cbor:"2,keyasint"`
	// Replicas (on the primary) keep copies of this record; Replica marks
	// a copy held for another origin.
	Replicas []pack.Peer `cbor:"3,keyasint,omitempty"`
	Replica  bool        `cbor:"4,keyasint,omitempty"`
	// Primary is the origin a replica copies (set on replicas).
	Primary pack.Peer `cbor:"5,keyasint,omitempty"`
	// HandBack (replicas) is set while the completion this copy got from
	// the chain has not been acknowledged by the primary (O3).
	HandBack bool `cbor:"6,keyasint,omitempty"`
	// Pruned marks a tombstone: an ended record whose source, result,
	// trace and recent attempts were dropped after the retention period
	// (O5); it still says the workflow ended, and how.
	Pruned bool `cbor:"7,keyasint,omitempty"`
	// Stash keeps, while the workflow runs, the outputs its chains dropped
	// from their packs (O6), by StashKey(label, digest), and StashTrace
	// the runs of trace entries they dropped, by digest. The journal keeps
	// them in entries of their own (Ready.Stash), not in the written
	// record (Ready.Persist leaves them out); the node puts them back
	// before Load. A record written before that may still hold them.
	Stash      map[string]json.RawMessage   `cbor:"8,keyasint,omitempty"`
	StashTrace map[string][]pack.TraceEntry `cbor:"9,keyasint,omitempty"`
}

// clone is the copy the machine steps and persists (Clone, persist): it
// copies what Step changes in place, the stash maps, and shares every other
// slice and map, which Step only ever replaces whole (Recent is clipped, so
// an append copies it). Copying the result and trace on every event cost
// as much as the workflow is long, on every step reported.
func (r Record) clone() Record {
	c := r
	c.Status.Recent = slices.Clip(r.Status.Recent)
	c.Stash = maps.Clone(r.Stash)
	c.StashTrace = maps.Clone(r.StashTrace) // runs are never changed in place
	return c
}

// deepClone is the copy a caller outside the machine gets (Record, Load):
// it shares nothing a caller could change.
func (r Record) deepClone() Record {
	c := r
	c.Stash = maps.Clone(r.Stash)
	c.StashTrace = maps.Clone(r.StashTrace)
	c.Replicas = slices.Clone(r.Replicas)
	c.Status = cloneStatus(r.Status)
	return c
}

// StashKey is the key of a stashed output in Record.Stash: LABEL@DIGEST
// (labels never hold '@').
func StashKey(label, digest string) string { return label + "@" + digest }

func cloneStatus(s api.Status) api.Status {
	c := s
	c.Recent = slices.Clone(s.Recent)
	c.Trace = slices.Clone(s.Trace)
	c.Origins = slices.Clone(s.Origins)
	c.Result = maps.Clone(s.Result)
	return c
}

// Workflow is one copy of one workflow record.
type Workflow struct {
	id string
	// rec is the record; rec.Status.ID is empty until the copy exists
	// (Submitted or ReplicaStored).
	rec Record
}

// New returns the machine of a workflow this peer has no copy of yet.
func New(id string) *Workflow { return &Workflow{id: id} }

// Load rebuilds a copy from its journaled record.
func Load(rec Record) *Workflow { return &Workflow{id: rec.Status.ID, rec: rec.deepClone()} }

// Clone returns a copy to step: stepping it leaves w as it was (they
// share only what Step never changes in place). The node steps a clone
// and keeps it once its record is written.
func (w *Workflow) Clone() *Workflow { return &Workflow{id: w.id, rec: w.rec.clone()} }

// ID is the workflow ID.
func (w *Workflow) ID() string { return w.id }

// Exists reports whether this peer holds a copy of the record.
func (w *Workflow) Exists() bool { return w.rec.Status.ID != "" }

// Role says which copy this is (0 when none exists).
func (w *Workflow) Role() Role {
	switch {
	case !w.Exists():
		return 0
	case w.rec.Replica:
		return RoleReplica
	}
	return RolePrimary
}

// State is the workflow's state (0 when no copy exists).
func (w *Workflow) State() State { return parseState(w.rec.Status.State) }

// Running reports whether the copy exists and the workflow has not ended.
func (w *Workflow) Running() bool { return w.State() == StateRunning }

// Record returns a copy of the record (to journal it).
func (w *Workflow) Record() Record { return w.rec.deepClone() }

// Status answers a client's status (full: result, with result and trace).
func (w *Workflow) Status(full bool) api.Status {
	st := cloneStatus(w.rec.Status)
	if !full {
		st.Result, st.Trace = nil, nil
	}
	return st
}

// Summary is the status in a list: no result, trace or recent attempts.
func (w *Workflow) Summary() api.Status {
	st := w.rec.Status
	st.Result, st.Trace, st.Recent = nil, nil, nil
	st.Origins = slices.Clone(st.Origins)
	return st
}

// Ended answers a guardian (or a restarted primary) asking whether the
// workflow ended: when it has, with its completion (O4).
func (w *Workflow) Ended() (bool, *api.OriginMsg) {
	if !w.Exists() || w.Running() {
		return false, nil
	}
	done := w.completion()
	return true, &done
}

// completion rebuilds the completion from the record.
func (w *Workflow) completion() api.OriginMsg {
	st := w.rec.Status
	return api.OriginMsg{WorkflowID: w.id, Done: true, OK: st.State == api.StateSucceeded, Error: st.Error,
		Cancelled: st.State == api.StateCancelled, Outputs: maps.Clone(st.Result), Trace: slices.Clone(st.Trace)}
}

// ReplicaCopy is the record a replica stores for this primary (self).
func (w *Workflow) ReplicaCopy(self pack.Peer) Record {
	c := w.rec.clone()
	c.Replica, c.Replicas, c.Primary = true, nil, self
	return c
}

// Primary is the origin a replica copies (empty on the primary).
func (w *Workflow) Primary() pack.Peer { return w.rec.Primary }

// Replicas are the peers a primary's replicas live on.
func (w *Workflow) Replicas() []pack.Peer { return slices.Clone(w.rec.Replicas) }

// Reply is the answer to the request that stepped the machine.
type Reply struct {
	// Error refuses the request (unknown workflow, wrong role).
	Error string
	// Status answers a submit or a cancel.
	Status *api.Status
}

// Tell asks the node to send Completion to Peers (the primary's replicas),
// each until it answers or gives up.
type Tell struct {
	Peers      []pack.Peer
	Completion api.OriginMsg
}

// HandBack asks the node to send Completion to Primary until it is
// acknowledged, then step HandBackAcked (O3).
type HandBack struct {
	Primary    pack.Peer
	Completion api.OriginMsg
}

// Emit says a completion was recorded (events.Completed): After is the
// last step that ran in its chain, Stale that the workflow had ended
// before (O1).
type Emit struct {
	Stale bool
	After string
	// Ended: this completion ended the workflow (log it).
	Ended bool
	State State
	Error string
	// Missing lists the labels of stashed outputs the completion's trace
	// marks that this copy does not have (O6; never expected: log it).
	Missing []string
}

// Ready is what one step asks the node to do, in field order.
type Ready struct {
	// Persist is the record to write before anything else (nil: none).
	// It never holds the stash (Record.Stash, Record.StashTrace): that is
	// written on its own, in the same write (Stash).
	Persist *Record
	// Stash is what changes in the stash's own journal entries, written
	// with Persist, before anything else (nil: nothing).
	Stash *StashWrite
	// Delete: delete the record instead (a tombstone past its time, O5);
	// the copy no longer exists.
	Delete bool
	// Settle are the items the completion's last holder listed: settle
	// them before answering (pack.Settle).
	Settle []pack.Settle
	Reply  *Reply
	// TellReplicas (primary): the workflow ended here; tell the replicas.
	TellReplicas *Tell
	// HandBack (replica): the completion reached this replica; the primary
	// must learn it.
	HandBack *HandBack
	// BroadcastCancel: stop the workflow's work everywhere.
	BroadcastCancel bool
	// AskReplicas (restarted primary): ask each whether the workflow ended
	// meanwhile and step SyncAnswer.
	AskReplicas []pack.Peer
	Emit        *Emit
}

// StashWrite is a change to a copy's stash as the journal keeps it: one
// entry per stashed output (by label and digest) and per run of trace
// entries (by digest), beside the record rather than in it, so a stash
// writes what it adds and not the whole stash again (a record rewritten at
// every stash wrote bytes quadratic in what the workflow stashed).
type StashWrite struct {
	// Outputs and Runs are the entries to add.
	Outputs []pack.StashedOutput
	Runs    []pack.StashedTrace
	// Drop: delete every stash entry of the workflow (the result holds
	// them now, or the workflow ended without one). Set with no entries.
	Drop bool
}

// StashEntries is r's whole stash as entries to write (nil when it has
// none): for a record that came with its stash inside (ReplicaStored, or
// one written before the stash had entries of its own).
func (r Record) StashEntries() *StashWrite {
	if len(r.Stash) == 0 && len(r.StashTrace) == 0 {
		return nil
	}
	sw := &StashWrite{}
	for _, k := range slices.Sorted(maps.Keys(r.Stash)) {
		label, digest, _ := strings.Cut(k, "@")
		sw.Outputs = append(sw.Outputs, pack.StashedOutput{Label: label, Digest: digest, Value: r.Stash[k]})
	}
	for _, d := range slices.Sorted(maps.Keys(r.StashTrace)) {
		sw.Runs = append(sw.Runs, pack.StashedTrace{Digest: d, Entries: r.StashTrace[d]})
	}
	return sw
}

// Event is something that happened to a workflow record.
type Event interface{ isEvent() }

// Submitted: a client submitted the workflow here; this peer is its
// primary origin and Replicas stored copies of the record.
type Submitted struct {
	Source     string
	StepsTotal int
	// Origin is this peer's ID; Origins the full addresses of every copy.
	Origin   string
	Origins  []string
	Replicas []pack.Peer
	At       time.Time
}

// ReplicaStored: a primary asks this peer to keep a replica of Record.
type ReplicaStored struct{ Record Record }

// Stashed: a holder asks this copy to keep outputs and a run of trace
// entries it will drop from its pack (O6).
type Stashed struct {
	Outputs []pack.StashedOutput
	Trace   *pack.StashedTrace
}

// Progress: a step attempt ended (Entry is its trace entry).
type Progress struct{ Entry pack.TraceEntry }

// Completed: the last holder of the workflow's chain delivered its end.
type Completed struct {
	Msg api.OriginMsg
	At  time.Time
}

// CompletionFromReplica: a replica hands back the completion it got while
// this primary was down (O3).
type CompletionFromReplica struct {
	Msg  api.OriginMsg
	From string
	At   time.Time
}

// CompletionFromPrimary: the primary tells this replica the workflow
// ended.
type CompletionFromPrimary struct {
	Msg api.OriginMsg
	At  time.Time
}

// HandBackAcked: the primary acknowledged this replica's hand-back.
type HandBackAcked struct{}

// Cancelled: a client cancelled the workflow.
type Cancelled struct{ At time.Time }

// SyncAnswer: a replica From answered a restarted primary; Msg is the
// completion it knows (nil: it knows of no end).
type SyncAnswer struct {
	From string
	Msg  *api.OriginMsg
	At   time.Time
}

// Prune applies the retention (O5): an ended record that finished before
// Before becomes a tombstone; a tombstone that finished before Forget is
// deleted.
type Prune struct{ Before, Forget time.Time }

func (Prune) isEvent()                 {}
func (Submitted) isEvent()             {}
func (ReplicaStored) isEvent()         {}
func (Stashed) isEvent()               {}
func (Progress) isEvent()              {}
func (Completed) isEvent()             {}
func (CompletionFromReplica) isEvent() {}
func (CompletionFromPrimary) isEvent() {}
func (HandBackAcked) isEvent()         {}
func (Cancelled) isEvent()             {}
func (SyncAnswer) isEvent()            {}

// Resume says what a copy loaded from the journal must do: a running
// primary asks its replicas whether the workflow ended while it was down,
// a replica whose hand-back was not acknowledged hands back again (O3).
func (w *Workflow) Resume() Ready {
	switch {
	case w.Role() == RolePrimary && w.Running() && len(w.rec.Replicas) > 0:
		return Ready{AskReplicas: slices.Clone(w.rec.Replicas)}
	case w.Role() == RoleReplica && w.rec.HandBack && !w.Running():
		return Ready{HandBack: &HandBack{Primary: w.rec.Primary, Completion: w.completion()}}
	}
	return Ready{}
}

func (w *Workflow) refuse(why string) Ready {
	return Ready{Reply: &Reply{Error: why}}
}

func (w *Workflow) unknown() Ready {
	return w.refuse("no record of workflow " + w.id)
}

// Step applies one event and returns what the node must do.
func (w *Workflow) Step(ev Event) Ready {
	switch e := ev.(type) {
	case Submitted:
		if w.Exists() {
			return w.refuse("workflow " + w.id + " exists already")
		}
		w.rec = Record{
			Status: api.Status{ID: w.id, State: api.StateRunning, Submitted: e.At, StepsTotal: e.StepsTotal,
				Origin: e.Origin, Origins: slices.Clone(e.Origins)},
			Source: e.Source, Replicas: slices.Clone(e.Replicas),
		}
		st := w.Status(false)
		return Ready{Persist: w.persist(), Reply: &Reply{Status: &st}}
	case ReplicaStored:
		if w.Exists() {
			return Ready{Reply: &Reply{}} // a retry: stored already
		}
		if e.Record.Status.ID != w.id || w.id == "" {
			return w.refuse(fmt.Sprintf("record of workflow %q stored as %q", e.Record.Status.ID, w.id))
		}
		w.rec = e.Record.clone()
		w.rec.Replica, w.rec.Replicas, w.rec.HandBack = true, nil, false
		return Ready{Persist: w.persist(), Stash: w.rec.StashEntries(), Reply: &Reply{}}
	case Stashed:
		if !w.Exists() {
			return w.unknown()
		}
		if !w.Running() {
			return w.refuse("workflow " + w.id + " ended")
		}
		for _, o := range e.Outputs {
			if pack.Digest(o.Value) != o.Digest {
				return w.refuse(fmt.Sprintf("stashed output %s does not match its digest %s", o.Label, o.Digest))
			}
		}
		if t := e.Trace; t != nil && pack.TraceDigest(t.Entries) != t.Digest {
			return w.refuse(fmt.Sprintf("stashed trace entries do not match their digest %s", t.Digest))
		}
		for _, o := range e.Outputs {
			if w.rec.Stash == nil {
				w.rec.Stash = make(map[string]json.RawMessage, len(e.Outputs))
			}
			w.rec.Stash[StashKey(o.Label, o.Digest)] = o.Value
		}
		if t := e.Trace; t != nil {
			if w.rec.StashTrace == nil {
				w.rec.StashTrace = map[string][]pack.TraceEntry{}
			}
			w.rec.StashTrace[t.Digest] = slices.Clone(t.Entries)
		}
		sw := &StashWrite{Outputs: slices.Clone(e.Outputs)}
		if e.Trace != nil {
			sw.Runs = []pack.StashedTrace{*e.Trace}
		}
		return Ready{Stash: sw, Reply: &Reply{}}
	case Progress:
		if !w.Exists() {
			return w.unknown()
		}
		if !w.Running() {
			return Ready{Reply: &Reply{}} // O4: a late report changes nothing
		}
		st := &w.rec.Status
		if e.Entry.Outcome == pack.OutcomeOK {
			st.StepsDone++
		}
		st.Recent = append(st.Recent, e.Entry)
		if len(st.Recent) > RecentEvents {
			st.Recent = slices.Clone(st.Recent[len(st.Recent)-RecentEvents:])
		}
		return Ready{Reply: &Reply{}}
	case Completed:
		if !w.Exists() {
			return w.unknown()
		}
		rd := w.complete(e.Msg, e.At)
		rd.Settle = slices.Clone(e.Msg.Settle)
		if rd.Emit.Ended && w.Role() == RolePrimary {
			rd.TellReplicas = w.tell("")
		}
		if rd.Emit.Ended && w.Role() == RoleReplica && w.rec.Primary.ID != "" {
			// O3: the completion reached this replica (the primary was
			// down, or slow): hand it back until the primary has it.
			w.rec.HandBack = true
			rd.Persist = w.persist()
			rd.HandBack = &HandBack{Primary: w.rec.Primary, Completion: w.completion()}
		}
		return rd
	case CompletionFromReplica:
		if !w.Exists() {
			return w.unknown()
		}
		if w.Role() != RolePrimary {
			return w.refuse("peer is a replica, not the primary origin, of workflow " + w.id)
		}
		rd := w.complete(e.Msg, e.At)
		if rd.Emit.Ended {
			rd.TellReplicas = w.tell(e.From)
		}
		return rd
	case CompletionFromPrimary:
		if !w.Exists() {
			return w.unknown()
		}
		if w.Role() != RoleReplica {
			return w.refuse("peer is the primary, not a replica, of workflow " + w.id)
		}
		rd := w.complete(e.Msg, e.At)
		if w.rec.HandBack {
			// The primary has a completion: nothing to hand back.
			w.rec.HandBack = false
			rd.Persist = w.persist()
		}
		return rd
	case HandBackAcked:
		if !w.rec.HandBack {
			return Ready{}
		}
		w.rec.HandBack = false
		return Ready{Persist: w.persist()}
	case Cancelled:
		if !w.Exists() {
			return w.unknown()
		}
		var rd Ready
		if w.Running() {
			st := &w.rec.Status
			st.State, st.Finished, st.Error = api.StateCancelled, e.At, CancelError
			rd.Stash = w.dropStash()
			rd.Persist = w.persist()
			if w.Role() == RolePrimary {
				// The replicas learn the end too: one asked while this
				// primary is down says cancelled, not running (O4).
				rd.TellReplicas = w.tell("")
			}
		}
		rd.BroadcastCancel = w.State() == StateCancelled
		st := w.Status(true)
		rd.Reply = &Reply{Status: &st}
		return rd
	case Prune:
		return w.prune(e)
	case SyncAnswer:
		if !w.Exists() || w.Role() != RolePrimary || e.Msg == nil || !e.Msg.Done || !w.Running() {
			return Ready{}
		}
		rd := w.complete(*e.Msg, e.At)
		rd.TellReplicas = w.tell(e.From)
		return rd
	}
	panic(fmt.Sprintf("origin: unknown event %T", ev))
}

func (w *Workflow) prune(e Prune) Ready {
	st := &w.rec.Status
	if !w.Exists() || w.Running() || w.rec.HandBack || st.Finished.IsZero() {
		return Ready{}
	}
	switch {
	case w.rec.Pruned && st.Finished.Before(e.Forget):
		w.rec = Record{}
		return Ready{Delete: true}
	case !w.rec.Pruned && st.Finished.Before(e.Before):
		w.rec.Pruned = true
		w.rec.Source = ""
		st.Result, st.Trace, st.Recent, st.Origins = nil, nil, nil, nil
		return Ready{Persist: w.persist()}
	}
	return Ready{}
}

// Pruned reports whether the record is a tombstone (O5): the result and
// trace were dropped after the retention period.
func (w *Workflow) Pruned() bool { return w.rec.Pruned }

// persist is the record to write: the stash is not in it (its entries
// are written on their own, Ready.Stash).
func (w *Workflow) persist() *Record {
	r := w.rec.clone()
	r.Stash, r.StashTrace = nil, nil
	return &r
}

// dropStash empties the stash and says so to the journal, when there was
// one.
func (w *Workflow) dropStash() *StashWrite {
	had := len(w.rec.Stash) > 0 || len(w.rec.StashTrace) > 0
	w.rec.Stash, w.rec.StashTrace = nil, nil
	if !had {
		return nil
	}
	return &StashWrite{Drop: true}
}

// complete applies a completion: the first ends the workflow, later ones
// are stale (O1, O4). The answer is OK either way.
func (w *Workflow) complete(msg api.OriginMsg, at time.Time) Ready {
	rd := Ready{Reply: &Reply{}}
	emit := &Emit{After: lastRan(msg.Trace)}
	rd.Emit = emit
	if !w.Running() {
		emit.Stale = true
		return rd
	}
	st := &w.rec.Status
	st.Finished = at
	switch {
	case msg.OK:
		st.State = api.StateSucceeded
	case msg.Cancelled:
		st.State, st.Error = api.StateCancelled, msg.Error
	default:
		st.State, st.Error = api.StateFailed, msg.Error
	}
	trace, missingRuns := pack.ExpandTrace(msg.Trace, func(digest string) ([]pack.TraceEntry, bool) {
		run, ok := w.rec.StashTrace[digest]
		return run, ok
	})
	result, missing := pack.Unstash(msg.Outputs, trace, func(label, digest string) (json.RawMessage, bool) {
		v, ok := w.rec.Stash[StashKey(label, digest)]
		return v, ok
	})
	for _, d := range missingRuns {
		missing = append(missing, "trace:"+d)
	}
	emit.Missing = missing
	st.Result = maps.Clone(result)
	rd.Stash = w.dropStash()
	st.Trace = slices.Clone(trace)
	sort.SliceStable(st.Trace, func(i, j int) bool { return st.Trace[i].Start.Before(st.Trace[j].Start) })
	st.StepsDone = 0
	for _, e := range st.Trace {
		if e.Outcome == pack.OutcomeOK {
			st.StepsDone++
		}
	}
	emit.Ended, emit.State, emit.Error = true, w.State(), st.Error
	rd.Persist = w.persist()
	return rd
}

// tell lists the replicas to tell the completion, but the one it came
// from.
func (w *Workflow) tell(except string) *Tell {
	var peers []pack.Peer
	for _, r := range w.rec.Replicas {
		if r.ID != except {
			peers = append(peers, r)
		}
	}
	if len(peers) == 0 {
		return nil
	}
	return &Tell{Peers: peers, Completion: w.completion()}
}

// lastRan is the path of the last step that succeeded in trace.
func lastRan(trace []pack.TraceEntry) string {
	for i := len(trace) - 1; i >= 0; i-- {
		if trace[i].Outcome == pack.OutcomeOK {
			return trace[i].Path
		}
	}
	return ""
}
