// Package api holds the protocol IDs and the request and response types that
// bedwe peers and their clients exchange over libp2p streams. Both the node
// (server side) and node/client import it; it imports neither.
//
// Every protocol is one request and one response per stream, each a
// varint-length-delimited CBOR frame (packs use the pack codec instead).
package api

import (
	"encoding/json"
	"time"

	"github.com/bedwe/bedwe/pack"
)

// Protocol IDs. The version is part of the ID: a peer that changes a message
// incompatibly registers a new ID and keeps serving the old one for a while.
const (
	// ProtoHandoff carries a pack to the successor that will run its head;
	// the response is an Ack sent only after the pack is journaled.
	ProtoHandoff = "/bedwe/handoff/1.0.0"
	// ProtoDeliver carries a branch's result to its join holder.
	ProtoDeliver = "/bedwe/deliver/1.0.0"
	// ProtoOrigin carries the final completion (and, from older peers,
	// single progress events) to a workflow's origin.
	ProtoOrigin = "/bedwe/origin/1.0.0"
	// ProtoOriginProgress carries a batch of progress events
	// (ProgressReport) to an origin; the response is an Ack.
	ProtoOriginProgress = "/bedwe/origin/progress/1.0.0"
	// ProtoClient serves submit, status, result, cancel and peers.
	ProtoClient = "/bedwe/client/1.0.0"
)

// MaxControlFrame bounds every non-pack frame.
const MaxControlFrame = 32 << 20

// Ack answers a hand-off or a delivery.
type Ack struct {
	OK bool `cbor:"1,keyasint"`
	// Code classifies a refusal (see the Code* constants).
	Code string `cbor:"2,keyasint,omitempty"`
	// Error explains a refusal in words a user can act on.
	Error string `cbor:"3,keyasint,omitempty"`
	// Guardians (hand-off acks) are the guardians the receiver recruited
	// besides the sender before it acknowledged.
	Guardians []pack.Peer `cbor:"4,keyasint,omitempty"`
	// Released (hand-off acks) are the peer IDs of the guardians of the
	// sender's step that answered the receiver's release when it settled
	// the hand-over: the sender need not release them again. A receiver
	// that names none (or an older version) leaves the sender to release
	// them all.
	Released []string `cbor:"5,keyasint,omitempty"`
}

// Refusal codes in Ack.Code.
const (
	CodeUnknownService = "unknown-service"
	CodeBadPack        = "bad-pack"
	CodeDraining       = "draining"
	CodeCancelled      = "cancelled"
	CodeInternal       = "internal"
	// CodeSuperseded: the work belongs to a chain a guardian re-routed
	// (a newer attempt of an earlier step is out): it stops here.
	CodeSuperseded = "superseded"
	// CodeUnsettled: no guardian of some settle item answered (cut off or
	// gone): nothing was taken; the sender keeps the work and tries again.
	CodeUnsettled = "unsettled"
	// CodeTaken: another peer took this attempt of the step first (its
	// acknowledgement to the sender was lost): Ack.Guardians names it, and
	// the sender guards the step there instead of handing it on again
	// (node/guard G8).
	CodeTaken = "taken"
	// CodeBusy: the peer is at its limits (its queue of steps waiting for
	// an execution slot is full, or, for a submission, it is the origin of
	// as many running workflows as it takes). Nothing was journaled: try
	// another peer, or the same one later. It is not a failure of the peer.
	CodeBusy = "busy"
)

// Delivery is a branch's end: its result for the join holder.
type Delivery struct {
	WorkflowID string                     `cbor:"1,keyasint"`
	JoinID     string                     `cbor:"2,keyasint"`
	Branch     int                        `cbor:"3,keyasint"`
	OK         bool                       `cbor:"4,keyasint"`
	Error      string                     `cbor:"5,keyasint,omitempty"`
	Outputs    map[string]json.RawMessage `cbor:"6,keyasint,omitempty"`
	Trace      []pack.TraceEntry          `cbor:"7,keyasint,omitempty"`
	// Attempt fences re-sent branches: a delivery with a lower attempt than
	// one already recorded for the branch is stale.
	Attempt int `cbor:"8,keyasint"`
	// Settle is what the join holder settles before acknowledging (the
	// release of the last step's guardians; see pack.Settle).
	Settle []pack.Settle `cbor:"9,keyasint,omitempty"`
}

// OriginMsg is sent to a workflow's origin: either one progress event or the
// completion of the whole workflow.
type OriginMsg struct {
	WorkflowID string `cbor:"1,keyasint"`
	// Event is a finished step attempt (progress).
	Event *pack.TraceEntry `cbor:"2,keyasint,omitempty"`
	// Done is set on completion.
	Done    bool                       `cbor:"3,keyasint,omitempty"`
	OK      bool                       `cbor:"4,keyasint,omitempty"`
	Error   string                     `cbor:"5,keyasint,omitempty"`
	Outputs map[string]json.RawMessage `cbor:"6,keyasint,omitempty"`
	Trace   []pack.TraceEntry          `cbor:"7,keyasint,omitempty"`
	// Settle (completions) is what the origin settles before
	// acknowledging (see pack.Settle).
	Settle []pack.Settle `cbor:"8,keyasint,omitempty"`
	// Cancelled (with Done) says the workflow was cancelled by request,
	// not failed: the end a primary tells its replicas after a cancel.
	Cancelled bool `cbor:"9,keyasint,omitempty"`
}

// WorkflowEvent is one finished step attempt of a workflow.
type WorkflowEvent struct {
	WorkflowID string          `cbor:"1,keyasint"`
	Event      pack.TraceEntry `cbor:"2,keyasint"`
}

// ProgressReport is a batch of finished step attempts for workflows of
// one origin (node/progress.go): progress for status, never a result.
type ProgressReport struct {
	Events []WorkflowEvent `cbor:"1,keyasint"`
}

// Client operations.
const (
	OpSubmit = "submit"
	OpStatus = "status"
	OpResult = "result"
	OpCancel = "cancel"
	OpPeers  = "peers"
	OpList   = "list"
)

// ClientRequest is one client call.
type ClientRequest struct {
	Op string `cbor:"1,keyasint"`
	// ID names the workflow for status, result and cancel.
	ID string `cbor:"2,keyasint,omitempty"`
	// Source is the workflow text for submit, FileName its name for errors.
	Source   string `cbor:"3,keyasint,omitempty"`
	FileName string `cbor:"4,keyasint,omitempty"`
	// Input is the workflow input JSON for submit.
	Input json.RawMessage `cbor:"5,keyasint,omitempty"`
	// Schedule is a bedwe-schedule/1 document for publish-schedule
	// (FileName names it in error messages).
	Schedule []byte `cbor:"10,keyasint,omitempty"`
}

// ClientResponse answers a ClientRequest; exactly one payload is set.
type ClientResponse struct {
	Error    string     `cbor:"1,keyasint,omitempty"`
	Status   *Status    `cbor:"2,keyasint,omitempty"`
	Peers    []PeerInfo `cbor:"3,keyasint,omitempty"`
	Statuses []Status   `cbor:"4,keyasint,omitempty"`
	// Schedule answers OpSchedule, Published OpPublishSchedule.
	Schedule  *ScheduleInfo  `cbor:"10,keyasint,omitempty"`
	Published *PublishResult `cbor:"11,keyasint,omitempty"`
	// Refused (OpPeers) lists the peers the node refused recently: not
	// members, unauthorized clients (see package node/member).
	Refused []RefusedPeer `cbor:"12,keyasint,omitempty"`
	// Code classifies Error when it is one of the refusal codes a client
	// acts on (CodeBusy: nothing was recorded, submit again later).
	Code string `cbor:"13,keyasint,omitempty"`
}

// Workflow states.
const (
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Status describes a workflow as its origin knows it.
type Status struct {
	ID        string    `cbor:"1,keyasint" json:"id"`
	State     string    `cbor:"2,keyasint" json:"state"`
	Submitted time.Time `cbor:"3,keyasint" json:"submitted"`
	Finished  time.Time `cbor:"4,keyasint,omitempty" json:"finished,omitempty"`
	// StepsDone counts successful step attempts; StepsTotal is the number of
	// services in the workflow (an upper bound when it has CHOICE, FIRST or
	// FAILOVER).
	StepsDone  int    `cbor:"5,keyasint" json:"steps_done"`
	StepsTotal int    `cbor:"6,keyasint" json:"steps_total"`
	Error      string `cbor:"7,keyasint,omitempty" json:"error,omitempty"`
	// Recent lists the latest step attempts (newest last).
	Recent []pack.TraceEntry `cbor:"8,keyasint,omitempty" json:"recent,omitempty"`
	// Result and Trace are filled for OpResult once the workflow ended.
	Result map[string]json.RawMessage `cbor:"9,keyasint,omitempty" json:"result,omitempty"`
	Trace  []pack.TraceEntry          `cbor:"10,keyasint,omitempty" json:"trace,omitempty"`
	Origin string                     `cbor:"11,keyasint,omitempty" json:"origin,omitempty"`
	// Origins are full multiaddrs of the peers holding this record (the
	// origin, then its replicas): ask the next when one does not answer.
	Origins []string `cbor:"12,keyasint,omitempty" json:"origins,omitempty"`
}

// PeerInfo is one peer's presence as a node sees it.
type PeerInfo struct {
	ID        string    `cbor:"1,keyasint" json:"id"`
	Addrs     []string  `cbor:"2,keyasint,omitempty" json:"addrs,omitempty"`
	Zone      string    `cbor:"3,keyasint,omitempty" json:"zone,omitempty"`
	Services  []string  `cbor:"4,keyasint,omitempty" json:"services,omitempty"`
	Patterns  []string  `cbor:"5,keyasint,omitempty" json:"patterns,omitempty"`
	CPU       float64   `cbor:"6,keyasint" json:"cpu_percent"`
	MemUsed   float64   `cbor:"7,keyasint" json:"mem_percent"`
	Queue     int       `cbor:"8,keyasint" json:"queue"`
	Draining  bool      `cbor:"9,keyasint,omitempty" json:"draining,omitempty"`
	LastSeen  time.Time `cbor:"10,keyasint" json:"last_seen"`
	Self      bool      `cbor:"11,keyasint,omitempty" json:"self,omitempty"`
	Connected bool      `cbor:"12,keyasint,omitempty" json:"connected,omitempty"`
	// PoweredUntil is when the timetable says the peer's zone goes dark or
	// out of the timetable's knowledge (timetable time; zero if unknown or
	// dark now). Power says it in words: "powered", "dark", "unknown" or
	// "no timetable".
	PoweredUntil time.Time `cbor:"13,keyasint,omitempty" json:"powered_until,omitempty"`
	Power        string    `cbor:"14,keyasint,omitempty" json:"power,omitempty"`
	// Breaker is the state of this node's circuit breaker for the peer:
	// closed, open (recent hand-offs failed: peer choice passes it over)
	// or half-open (one probe allowed).
	Breaker string `cbor:"15,keyasint,omitempty" json:"breaker,omitempty"`
	// Slots is the peer's limit on concurrent step executions, Free how
	// many are free and Room how many more steps its queue takes before it
	// refuses them as busy, as the peer announced them (all zero for a
	// peer that announces no capacity).
	Slots int `cbor:"16,keyasint,omitempty" json:"slots,omitempty"`
	Free  int `cbor:"17,keyasint,omitempty" json:"free,omitempty"`
	Room  int `cbor:"18,keyasint,omitempty" json:"room,omitempty"`
}

// NodeFile is written by a running node to DATA/node.json so that local
// clients and testnets can find it.
type NodeFile struct {
	PeerID    string    `json:"peer_id"`
	Addrs     []string  `json:"addrs"` // full multiaddrs including /p2p/<id>
	Zone      string    `json:"zone"`
	Network   string    `json:"network"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// PublicKey is the node's Ed25519 public key in base64: the key that
	// signs the timetables it publishes (add it to other nodes' trusted
	// keys to accept them).
	PublicKey string `json:"public_key,omitempty"`
	// SwarmKey is the path of the private network's key the node runs
	// with (empty: a public network); local clients use it too.
	SwarmKey string `json:"swarm_key,omitempty"`
	// ClientKey is the path of the key of the node's own CLI (DATA/client.key
	// unless --client-key), whose peer ID ClientID the node always
	// authorizes as a client.
	ClientKey string `json:"client_key,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	// Members says whether the node admits only listed peers ("trusted
	// peers") or everyone ("open").
	Members string `json:"members,omitempty"`
	// HTTP is the HOST:PORT of the node's metrics listener (bedwe node
	// --http; /metrics, the dashboard at /, and /debug/pprof/ with
	// --pprof); empty: none.
	HTTP string `json:"http,omitempty"`
}

// PresenceFile is written by a running node to DATA/presence.json whenever
// its view of the mesh changes.
type PresenceFile struct {
	Self    string     `json:"self"`
	Updated time.Time  `json:"updated"`
	Peers   []PeerInfo `json:"peers"`
}

// Reliability protocols (see node/guard.go).
const (
	// ProtoPresenceHello carries a peer's presence announcement (JSON, as
	// gossiped) straight to a newcomer; the answer is "ok".
	ProtoPresenceHello = "/bedwe/presence/hello/1.0.0"
	// ProtoBeat is a long-lived stream on which a holder of guarded work
	// writes one small frame per heartbeat interval to each guardian (the
	// byte 1). Peers that do not implement node/guard G17 speak only
	// this one.
	ProtoBeat = "/bedwe/beat/1.0.0"
	// ProtoBeatKeys is ProtoBeat whose frames list the held work they are
	// for: the byte 2, then the CBOR list of the guard keys of the work
	// the holder holds and that guardian guards (node/guard G17; a
	// guardian does not read a key's absence as a let-go, see
	// ProtoBeatHeld). A holder asks for it after ProtoBeatHeld and falls
	// back to ProtoBeat.
	ProtoBeatKeys = "/bedwe/beat/1.1.0"
	// ProtoBeatHeld is ProtoBeat whose frames say both what the holder
	// holds and what it let go of: the byte 3, then a CBOR map of the
	// guard keys held (1) and the key and attempt of the work it handed
	// on lately (2), for that guardian. A guardian lets go of a pending
	// copy only on that word: a key merely not listed may be from a frame
	// written before the holder beat for the work (node/guard G17). A
	// holder asks for it first.
	ProtoBeatHeld = "/bedwe/beat/1.2.0"
)

// GuardReply answers every request of the reliability protocols
// (guard.go); fields that do not apply are left empty.
type GuardReply struct {
	OK    bool   `cbor:"1,keyasint"`
	Error string `cbor:"2,keyasint,omitempty"`
	// Known says the guardian has an entry (or a tombstone) for Key.
	Known bool `cbor:"3,keyasint,omitempty"`
	// Released says Key was moved on.
	Released bool      `cbor:"4,keyasint,omitempty"`
	Holder   pack.Peer `cbor:"5,keyasint,omitempty"`
	Attempt  int       `cbor:"6,keyasint,omitempty"`
	// Superseded tells a restarted holder its copy is stale.
	Superseded bool `cbor:"7,keyasint,omitempty"`
	// Active tells a restarted join primary that the replica took over.
	Active bool `cbor:"8,keyasint,omitempty"`
	// Origin carries a finished workflow's completion (origin-status).
	Origin *OriginMsg `cbor:"9,keyasint,omitempty"`
	// NeverTook (HeldAddWatcher): the asked peer does not hold the step at
	// that attempt and never took it — it refused the hand-over as
	// unsettled — so it did not move on either (node/guard G10).
	NeverTook bool `cbor:"10,keyasint,omitempty"`
	// Pending (GuardRelease): another guardian of the step asked this one
	// before re-routing it, so this one cannot answer for the attempt yet
	// and recorded nothing; the releaser must hear from the step's
	// primary or try again (node/guard G13).
	Pending bool `cbor:"11,keyasint,omitempty"`
	// Handing (GuardStatus): the asked peer keeps no copy of Key because
	// it is handing the step on at the asked attempt right now (its
	// receiver's ack has not reached it): a backup guardian waits rather
	// than stand in for it (node/guard G15).
	Handing bool `cbor:"12,keyasint,omitempty"`
	// TookKey (GuardOwner): the guardian was released at the asked
	// attempt by the successor Holder, which took the work TookKey (a
	// held key); the restarted holder asks it (HeldTook) before it drops
	// its step (node/guard G16, node/held H7).
	TookKey string `cbor:"13,keyasint,omitempty"`
	// Recording (GuardStatus): a join or an origin is recording the asked
	// attempt's next hop at this guardian; the asker waits rather than
	// re-route (node/guard G18).
	Recording bool `cbor:"14,keyasint,omitempty"`
	// Rerouting (GuardStatus with Rerouting): the asked guardian has
	// claimed the re-route of the asked attempt already; the asker waits
	// for its notice rather than re-route too (node/guard G19).
	Rerouting bool `cbor:"15,keyasint,omitempty"`
}

// RefusedPeer is a peer a node refused recently: its connection was closed
// at the transport (not a member) or its client request was refused.
type RefusedPeer struct {
	ID   string `cbor:"1,keyasint" json:"id"`
	Addr string `cbor:"2,keyasint,omitempty" json:"addr,omitempty"`
	// Reason says what the peer lacked, e.g. "not in --trusted-peers or
	// --clients".
	Reason string    `cbor:"3,keyasint" json:"reason"`
	Count  int       `cbor:"4,keyasint" json:"count"`
	Last   time.Time `cbor:"5,keyasint" json:"last"`
}
