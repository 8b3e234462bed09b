// Package events records what a node's reliability core did, as one JSON
// object per line in a file the node appends to (bedwe node --events FILE).
//
// The events are for counting, not for reading: testnets, chaos runs and
// soaks read them instead of parsing log text, so a reliability figure
// ("steps re-routed", "executions after a step was handed on", "detection
// time") is computed from what the node did. Each event is written with one
// write call on a file opened for appending, so several processes may share
// a file and a SIGKILL loses nothing already written (no fsync: the events
// count what happened, they are not the node's durable state, which lives in
// its journal).
//
// The file grows without bound: it is meant for testnets and for short
// investigations, not for a board left running for months.
//
// A Log may also pass every event to an observer (New), which is how the
// node's Prometheus metrics (bedwe node --http) count what happened: the
// events are the one place both the file and the metrics are fed from.
package events

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/bedwe/bedwe/internal/jsonl"
)

// Types of event.
const (
	// Suspect: the failure detector declared Peer silent.
	Suspect = "suspect"
	// Spared: Peer's beats were late but it answered a ping.
	Spared = "spared"
	// ConfirmFailed: a late Peer was not confirmed alive (Reason says why).
	ConfirmFailed = "confirm-failed"
	// Accepted: this node journaled a pack whose head is Step at Attempt,
	// sent by From; After is the step the pack's sender ran just before
	// (the last entry of its trace), empty when none; Guardians are the
	// backup guardians it recruited (the sender guards the step too, as
	// its primary).
	Accepted = "accepted"
	// HandedOn: this node ran (or dispatched) Step at Attempt and the next
	// holder, join or origin (To) acknowledged what followed it.
	HandedOn = "handed-on"
	// Reroute: a guardian re-sent Step with the new Attempt because its
	// holder (Peer) went silent or handed it back; Reason says which.
	Reroute = "reroute"
	// Superseded: this node dropped held work of Step at Attempt because a
	// guardian re-routed it (the chain it belonged to stops here).
	Superseded = "superseded"
	// Delivery: a join holder recorded (or, Stale, refused as already
	// counted) the end of Branch of Join, whose last step was After.
	Delivery = "delivery"
	// JoinTakeover: a join replica started acting for Join.
	JoinTakeover = "join-takeover"
	// JoinCopy: this node stored a replica of Join (rank Branch) for its
	// primary Peer.
	JoinCopy = "join-copy"
	// Completed: the origin (or an origin replica) recorded the end of
	// Workflow; After is the last step of the chain that ended it, Stale a
	// completion that arrived after the first.
	Completed = "completed"
	// StepRun: this node ran Step at Attempt (all its tries); Outcome is
	// OutcomeOK, OutcomeFailed or OutcomeCancelled, Seconds the time from
	// the first try's start to the last one's end.
	StepRun = "step-run"
	// Handoff: this node offered the pack of Step at Attempt to To (itself
	// included) and heard Outcome: OutcomeOK (acknowledged),
	// OutcomeRefused (To answered no; Reason has its code) or OutcomeError
	// (no answer: transport or protocol error); Seconds is the round trip.
	Handoff = "hand-off"
	// Stashed: this node dropped outputs nobody ahead can name from the
	// pack of Step it hands on, after the workflow's origin copies stored
	// them (Outcome OutcomeOK), or kept them because a copy did not
	// (OutcomeRefused or OutcomeError; Reason says why); Seconds is the
	// round trip, Outputs and TraceEntries how many of each were to leave.
	Stashed = "stashed"
)

// Outcomes of StepRun and Handoff events.
const (
	OutcomeOK        = "ok"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
	OutcomeRefused   = "refused"
	OutcomeError     = "error"
)

// Event is one line of the events file. Fields that do not apply to a type
// are left empty.
type Event struct {
	At       time.Time `json:"at"`
	Type     string    `json:"type"`
	Node     string    `json:"node,omitempty"`
	Workflow string    `json:"workflow,omitempty"`
	Step     string    `json:"step,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	Peer     string    `json:"peer,omitempty"`
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	After    string    `json:"after,omitempty"`
	Join     string    `json:"join,omitempty"`
	Branch   int       `json:"branch,omitempty"`
	Stale    bool      `json:"stale,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Outcome  string    `json:"outcome,omitempty"`
	Seconds  float64   `json:"seconds,omitempty"`
	// Bytes is the size of the encoded pack a Handoff offered to another
	// peer (0 when the peer was this node: nothing was encoded).
	Bytes int `json:"bytes,omitempty"`
	// Outputs and TraceEntries count what a Stashed event's holder asked
	// the origin copies to keep.
	Outputs      int `json:"outputs,omitempty"`
	TraceEntries int `json:"trace_entries,omitempty"`
	// Guardians: the peer IDs of an Accepted step's backup guardians.
	Guardians []string `json:"guardians,omitempty"`
}

// Log appends events to a file and passes them to an observer. A nil *Log
// discards them, so the node calls Emit unconditionally.
type Log struct {
	node string
	// observe, when set, sees every event before it is written; it is
	// called from the emitting goroutine and must be safe for concurrent
	// use and quick (it runs on the node's hot paths).
	observe func(Event)
	mu      sync.Mutex // guards f's writes and Close
	f       *os.File   // nil: no file
}

// Open opens (creating it if needed) the events file at path for
// appending; node is this peer's ID, stamped on every event.
func Open(path, node string) (*Log, error) { return New(path, node, nil) }

// New returns a Log that passes every event to observe (when not nil) and,
// when path is not empty, appends it to the file at path (created if
// needed); node is this peer's ID, stamped on every event.
func New(path, node string, observe func(Event)) (*Log, error) {
	l := &Log{node: node, observe: observe}
	if path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("events file: %w", err)
		}
		l.f = f
	}
	return l, nil
}

// Emit passes e, stamped with the time and this node, to the observer and
// appends it to the file as one line. Write errors are dropped: the events
// are a record for tests and metrics, never a reason to stop the node.
func (l *Log) Emit(e Event) {
	if l == nil {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	e.Node = l.node
	if l.observe != nil {
		l.observe(e)
	}
	if l.f == nil {
		return
	}
	line, err := json.Marshal(e)
	if err != nil {
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(line)
}

// Close closes the file (if any).
func (l *Log) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// Read returns the events in the file at path, in file order. A torn last
// line (the writer was killed mid-write) is skipped; any other line that
// does not parse is an error naming its line number.
func Read(path string) ([]Event, error) {
	return jsonl.Read[Event](path)
}
