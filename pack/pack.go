// Package pack defines the message pack, the unit of work that travels between
// bedwe peers: the residual workflow still to run, the data it needs, the join
// frames it must report to, attempt numbers that fence re-routes, and a trace
// of where each step ran. It also owns the pack's versioned binary wire codec
// and the hard limits that every decoded pack must respect.
//
// pack depends on grammar (a pack carries a workflow) and on nothing that
// knows about networks.
package pack

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

// Peer names a peer and how to reach it.
type Peer struct {
	// ID is the libp2p peer ID in its string form.
	ID string `cbor:"1,keyasint" json:"id"`
	// Addrs are multiaddrs (without /p2p/ suffix) the peer listens on.
	Addrs []string `cbor:"2,keyasint,omitempty" json:"addrs,omitempty"`
	// Zone is the load-shedding zone the peer sits in.
	Zone string `cbor:"3,keyasint,omitempty" json:"zone,omitempty"`
}

// FrameKind is the kind of pattern a join frame belongs to.
type FrameKind uint8

const (
	// FrameFork joins all branches (FORK ... SYNC).
	FrameFork FrameKind = iota + 1
	// FrameFirst keeps the first successful branch (FIRST ... ENDFIRST).
	FrameFirst
	// FrameFailover runs branches one after another (FAILOVER ... ENDFAILOVER).
	FrameFailover
)

// Frame tells the holder of a branch where to deliver the branch's result when
// its workflow runs out. Frames nest: the last frame is the innermost pattern.
type Frame struct {
	// JoinID identifies the join record at its holders.
	JoinID string `cbor:"1,keyasint" json:"join_id"`
	// Kind is the pattern being joined.
	Kind FrameKind `cbor:"2,keyasint" json:"kind"`
	// Branch is this branch's index in the pattern.
	Branch int `cbor:"3,keyasint" json:"branch"`
	// Holders are the peers holding the join record: the first is the
	// primary, the rest are replicas, in preference order.
	Holders []Peer `cbor:"4,keyasint" json:"holders"`
}

// Outcome says how an attempt ended.
type Outcome string

// Outcomes recorded in a trace.
const (
	OutcomeOK         Outcome = "ok"
	OutcomeFailed     Outcome = "failed"
	OutcomeCancelled  Outcome = "cancelled"
	OutcomeSuperseded Outcome = "superseded"
)

// TraceEntry records one attempt of one step.
type TraceEntry struct {
	// Path is the step's path (grammar.Service.Path).
	Path string `cbor:"1,keyasint" json:"path"`
	// Service is the service name that ran.
	Service string `cbor:"2,keyasint" json:"service"`
	// Peer is the ID of the peer that ran it.
	Peer string `cbor:"3,keyasint" json:"peer"`
	// Zone is that peer's zone.
	Zone string `cbor:"4,keyasint,omitempty" json:"zone,omitempty"`
	// Start and End bound the attempt; they travel with nanosecond
	// precision and come back in UTC.
	Start time.Time `cbor:"5,keyasint" json:"start"`
	End   time.Time `cbor:"6,keyasint" json:"end"`
	// Attempt is the attempt number the step ran under.
	Attempt int `cbor:"7,keyasint" json:"attempt"`
	// Outcome says how the attempt ended.
	Outcome Outcome `cbor:"8,keyasint" json:"outcome"`
	// Note explains a failure or why the attempt was superseded.
	Note string `cbor:"9,keyasint,omitempty" json:"note,omitempty"`
	// Label is the step's output label when it is not the service name
	// (out=); see OutputLabel.
	Label string `cbor:"10,keyasint,omitempty" json:"label,omitempty"`
	// Stash, on an attempt that succeeded, is the digest of its output
	// once that output left the pack: the workflow's origin copies keep
	// it under (OutputLabel, Stash), and the origin puts it back into the
	// result (see Droppable).
	Stash string `cbor:"11,keyasint,omitempty" json:"stash,omitempty"`
}

// OutputLabel is the label the attempt's output is recorded under.
func (e TraceEntry) OutputLabel() string {
	if e.Label != "" {
		return e.Label
	}
	return e.Service
}

// SettleKind says what a Settle item asks of its receiver.
type SettleKind uint8

const (
	// SettleGuard: release the guard copies Key at Attempt held by Peers
	// (the guardians of the step the sender ran). A guardian that
	// re-routed that step meanwhile answers that it was superseded, and
	// the receiver refuses the pack: the chain it belongs to stops here.
	SettleGuard SettleKind = iota + 1
	// SettleJoinForwarded: the pack is the continuation of join Key,
	// whose other holders (Peers) must learn that it moved on.
	SettleJoinForwarded
	// SettleBranchStarted: the pack starts branch Branch of join Key; its
	// holders (Peers) must learn which peer holds it.
	SettleBranchStarted
	// SettleRerouted: the pack is a re-route of step Key past Attempt by
	// the guardian Actor; the attempt's other guardians (Peers) must learn
	// it. One that re-routed the attempt itself first answers superseded,
	// and the receiver refuses the pack: of two guardians that each
	// re-routed one attempt (cut from each other), one chain goes on
	// (node/guard G20). Lenient: a guardian that does not answer was
	// killed with the holder.
	SettleRerouted
)

// Settle is one thing the receiver of a pack (or of a branch end or a
// completion) must settle with other peers after it has journaled what it
// received and before it acknowledges it. It makes the hand-over of
// responsibility from the sender to the receiver independent of the sender
// surviving the acknowledgement: the previous guardians are released, and
// joins learn where their branches and continuations went, by the peer
// that now holds the work.
type Settle struct {
	Kind    SettleKind `cbor:"1,keyasint" json:"kind"`
	Key     string     `cbor:"2,keyasint" json:"key"`
	Attempt int        `cbor:"3,keyasint,omitempty" json:"attempt,omitempty"`
	Branch  int        `cbor:"4,keyasint,omitempty" json:"branch,omitempty"`
	Peers   []Peer     `cbor:"5,keyasint,omitempty" json:"peers,omitempty"`
	// Epoch and Actor (SettleJoinForwarded) name the acting copy that
	// forwarded the continuation and the takeover epoch it acted at; a
	// copy that knows a newer actor answers superseded (join J7). Actor
	// (SettleRerouted) names the guardian that re-routed the step.
	Epoch int    `cbor:"6,keyasint,omitempty" json:"epoch,omitempty"`
	Actor string `cbor:"7,keyasint,omitempty" json:"actor,omitempty"`
	// Lenient: a peer of this item that does not answer counts as gone.
	// A sender sets it after its receivers refused the item as unsettled
	// for longer than a partition is expected to last (its guardians
	// were killed, not cut off).
	Lenient bool `cbor:"8,keyasint,omitempty" json:"lenient,omitempty"`
}

// Pack is a message pack. Its Workflow always starts with the service the
// receiving peer must run (CHOICEs ahead of it were resolved by the sender).
//
// On the wire (Encode, Decode) a pack is a CBOR map with integer keys; the
// cbor tags on Peer, Frame and TraceEntry give the keys their wire forms
// use. Step positions (grammar.Pos) are not sent, times arrive in UTC, and
// empty lists and maps arrive as nil.
type Pack struct {
	// WorkflowID identifies the submitted workflow.
	WorkflowID string
	// Origin holds the workflow's result record: primary first, then replicas.
	Origin []Peer
	// Workflow is the residual workflow; services carry their Path.
	Workflow *grammar.Workflow
	// Input is the workflow's input JSON (null when none was given).
	Input json.RawMessage
	// Outputs maps an output label to the JSON output of the step that
	// produced it, for every step before this point on this path.
	Outputs map[string]json.RawMessage
	// Frames is the stack of join frames, innermost last; empty means the
	// result goes to the origin.
	Frames []Frame
	// Attempt fences re-routes of the head step: a re-sent pack carries a
	// higher attempt, and work done under a lower attempt is stale.
	Attempt int
	// Hops counts hand-offs so far, bounded by Limits.MaxHops.
	Hops int
	// Sender is the peer that handed this pack over and watches its holder.
	Sender Peer
	// Trace lists every attempt on this path so far.
	Trace []TraceEntry
	// Deadline, when non-zero, is when the whole workflow gives up.
	Deadline time.Time
	// Settle lists what the receiver settles before acknowledging.
	Settle []Settle
}

// Head returns the service p's receiver must run: the first step of its
// workflow. A pack on the wire always starts with a service (Validate
// checks it); a residual kept by a node may not, and Head says so.
func (p *Pack) Head() (*grammar.Service, error) {
	if p == nil || p.Workflow == nil || len(p.Workflow.Steps) == 0 {
		return nil, errors.New("the pack carries no workflow")
	}
	s, ok := p.Workflow.Steps[0].(*grammar.Service)
	if !ok || s == nil {
		return nil, fmt.Errorf("the workflow starts with %T, not a service", p.Workflow.Steps[0])
	}
	return s, nil
}
