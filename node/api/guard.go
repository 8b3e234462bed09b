package api

import "github.com/bedwe/bedwe/pack"

// The reliability protocols: one request type and one versioned protocol
// ID per operation, each answered with a GuardReply. A peer that changes a
// request incompatibly registers a new ID and keeps serving the old one
// for a while.
//
// Guardians (package node/guard) keep copies of handed-off packs; holders
// (node/held) hold the work; join copies (node/join) and workflow records
// (node/origin) are replicated between peers.
const (
	ProtoGuardStore   = "/bedwe/guard/store/1.0.0"
	ProtoGuardRelease = "/bedwe/guard/release/1.0.0"
	// ProtoGuardStoreRelease carries a GuardStore and a GuardRelease to
	// one guardian, written in one journal commit there.
	ProtoGuardStoreRelease = "/bedwe/guard/store-release/1.0.0"
	ProtoGuardStatus       = "/bedwe/guard/status/1.0.0"
	ProtoGuardOwner        = "/bedwe/guard/owner/1.0.0"
	ProtoGuardHandback     = "/bedwe/guard/handback/1.0.0"
	ProtoGuardWithdraw     = "/bedwe/guard/withdraw/1.0.0"
	ProtoHeldSuperseded    = "/bedwe/held/superseded/1.0.0"
	ProtoHeldAddWatcher    = "/bedwe/held/add-watcher/1.0.0"
	ProtoHeldTook          = "/bedwe/held/took/1.0.0"
	ProtoJoinReplica       = "/bedwe/join/replica/1.0.0"
	ProtoJoinUpdate        = "/bedwe/join/update/1.0.0"
	ProtoJoinForwarded     = "/bedwe/join/forwarded/1.0.0"
	ProtoJoinStatus        = "/bedwe/join/status/1.0.0"
	ProtoJoinHandover      = "/bedwe/join/handover/1.0.0"
	ProtoJoinActor         = "/bedwe/join/actor/1.0.0"
	ProtoJoinBranch        = "/bedwe/join/branch/1.0.0"
	ProtoOriginReplica     = "/bedwe/origin/replica/1.0.0"
	ProtoOriginDone        = "/bedwe/origin/done/1.0.0"
	ProtoOriginStatus      = "/bedwe/origin/status/1.0.0"
	ProtoOriginStash       = "/bedwe/origin/stash/1.0.0"
)

// GuardRequest is one request of the reliability protocols.
type GuardRequest interface {
	// Protocol is the versioned protocol ID the request is sent on.
	Protocol() string
}

// GuardStore asks a peer to keep a copy of Pack, a step held by Holder
// at Attempt, under Key. Primary is the guardian that re-routes first
// (empty or the receiver itself: the receiver is the primary; else it is
// a backup).
type GuardStore struct {
	Key     string    `cbor:"1,keyasint"`
	Attempt int       `cbor:"2,keyasint,omitempty"`
	Pack    []byte    `cbor:"3,keyasint"`
	Holder  pack.Peer `cbor:"4,keyasint"`
	Primary pack.Peer `cbor:"5,keyasint,omitempty"`
}

// GuardRelease tells a guardian the step Key moved on at Attempt: drop the
// copy (answered Superseded when the guardian re-routed it first). With
// Probe set nothing is dropped: the answer says what a release would be
// answered (a join or an origin asks before it records a branch end or a
// completion).
//
// Rerouted comes from the primary guardian to the other guardians of an
// attempt it re-routed: a later release of that attempt is answered
// Superseded there too (node/guard G7).
type GuardRelease struct {
	Key      string `cbor:"1,keyasint"`
	Attempt  int    `cbor:"2,keyasint,omitempty"`
	Probe    bool   `cbor:"3,keyasint,omitempty"`
	Rerouted bool   `cbor:"4,keyasint,omitempty"`
	// By is the successor that releases: the receiver of the hand-off of
	// the next step (empty from holders, joins and origins). A release of
	// the same attempt by another successor is answered Superseded
	// (node/guard G8).
	By string `cbor:"5,keyasint,omitempty"`
	// Yield, with By, is a successor that was refused elsewhere (another
	// took the attempt first: By) and gives way: a guardian that recorded
	// Yield as the successor records By instead, and nothing else changes.
	Yield string `cbor:"6,keyasint,omitempty"`
	// ByKey, with By, is the key of the work By took (its held key: the
	// next step at its attempt). A restarted holder told that a successor
	// released its step asks that successor about ByKey (HeldTook) before
	// it drops the step (node/held H7).
	ByKey string `cbor:"7,keyasint,omitempty"`
	// Recording, with Probe: a join or an origin asks before it records
	// the chain's next hop (a branch end, a completion), and releases once
	// it has; a guardian that answers not superseded holds its re-route
	// off meanwhile (node/guard G18).
	Recording bool `cbor:"8,keyasint,omitempty"`
	// Rerouter, with Rerouted, is the guardian that re-routed Attempt:
	// the primary's notice names itself (G7), and so does the settle of a
	// re-routed pack's first receiver (pack.SettleRerouted). A guardian
	// that re-routed the attempt itself answers another's Superseded, and
	// a backup that stood in gives way to its primary (node/guard G20).
	Rerouter string `cbor:"9,keyasint,omitempty"`
}

// GuardStoreRelease asks one guardian to keep the copy Store and to
// release Release, in one journal commit: a receiver whose backup
// guardian is the only guardian of the step before sends its backup's
// copy with the release that settles that step, a request and a commit
// less a hop than a GuardStore sent beside the accept and a GuardRelease
// after it. The copy is kept whatever the release is answered,
// as a store sent before the release would have been; the answer is the
// release's. An answer without an error means both were handled and are
// durable; no answer or an error means neither is known to be.
type GuardStoreRelease struct {
	Store   GuardStore   `cbor:"1,keyasint"`
	Release GuardRelease `cbor:"2,keyasint"`
}

// GuardStatus asks a guardian what it knows of Key (a backup asks its
// primary, naming its copy's Holder and Attempt).
type GuardStatus struct {
	Key string `cbor:"1,keyasint"`
	// Rerouting: the asker, another guardian of Key, re-routes Holder's
	// Attempt unless this guardian answers that it moved on. A copy of
	// that attempt here answers releases of it Pending for a while
	// (node/guard G13).
	Rerouting bool   `cbor:"2,keyasint,omitempty"`
	Holder    string `cbor:"3,keyasint,omitempty"`
	Attempt   int    `cbor:"4,keyasint,omitempty"`
}

// GuardOwner asks a guardian, from a restarted holder, whether the holder
// still owns Key at Attempt.
type GuardOwner struct {
	Key     string `cbor:"1,keyasint"`
	Attempt int    `cbor:"2,keyasint,omitempty"`
}

// GuardHandback asks a guardian, from a holder draining before a power
// cut, to re-route Key at Attempt now rather than after the cut.
type GuardHandback struct {
	Key     string `cbor:"1,keyasint"`
	Attempt int    `cbor:"2,keyasint,omitempty"`
}

// GuardWithdraw tells a backup guardian, from a receiver that stored a
// copy of Key there while taking the hand-over of the step at Attempt and
// then refused it, to drop that copy: the copy naming the caller is
// dropped, and the attempt is not marked as moved on (node/guard G11).
type GuardWithdraw struct {
	Key     string `cbor:"1,keyasint"`
	Attempt int    `cbor:"2,keyasint,omitempty"`
}

// HeldSuperseded tells an old holder that Key was re-routed at Attempt:
// stop it.
type HeldSuperseded struct {
	Key     string `cbor:"1,keyasint"`
	Attempt int    `cbor:"2,keyasint,omitempty"`
}

// HeldAddWatcher offers Watcher as a guardian of the holder's work Key at
// Attempt (answered Released when the work moved on).
type HeldAddWatcher struct {
	Key     string    `cbor:"1,keyasint"`
	Attempt int       `cbor:"2,keyasint,omitempty"`
	Watcher pack.Peer `cbor:"3,keyasint"`
}

// HeldTook asks the successor a guardian named (node/guard G16) whether it
// took the work Key (a held key: workflow, step path and attempt). It is
// answered Known when the peer holds that work or ran and handed it on,
// Pending when it is taking it now or has not read its journal back yet,
// and NeverTook when it holds nothing and remembers nothing of it: it
// refused the hand-over (node/held H7).
type HeldTook struct {
	Key string `cbor:"1,keyasint"`
}

// JoinReplica asks a peer to keep a copy of a join record (a CBOR
// node/join Record).
type JoinReplica struct {
	Record []byte `cbor:"1,keyasint"`
}

// JoinUpdate tells a join copy a branch result the actor accepted.
type JoinUpdate struct {
	Key      string   `cbor:"1,keyasint"`
	Delivery Delivery `cbor:"2,keyasint"`
}

// JoinForwarded tells a join copy that the actor named by Epoch and Actor
// moved the continuation on (join J7: a copy that knows a newer actor
// answers Superseded). By is the receiver that took it (join J8: a copy
// that knows another receiver of the same actor's continuation answers
// Superseded naming it in GuardReply.Holder); empty when the actor tells
// the copies itself.
type JoinForwarded struct {
	Key   string `cbor:"1,keyasint"`
	Epoch int    `cbor:"2,keyasint,omitempty"`
	Actor string `cbor:"3,keyasint,omitempty"`
	By    string `cbor:"4,keyasint,omitempty"`
	// Yield: a receiver refused elsewhere gives way to By (as in
	// GuardRelease).
	Yield string `cbor:"5,keyasint,omitempty"`
}

// JoinStatus asks a join copy (from a restarted primary, or a later
// replica) whether it knows the join and acts for it. With AskBranch (from
// a guardian of a step of branch Branch, before it re-routes) the answer
// is Released when nothing of that branch is left to run (join.BranchEnded).
type JoinStatus struct {
	Key       string `cbor:"1,keyasint"`
	Branch    int    `cbor:"2,keyasint,omitempty"`
	AskBranch bool   `cbor:"3,keyasint,omitempty"`
}

// JoinHandover makes the receiving replica the acting copy of the join in
// Record (from a primary draining before a power cut).
type JoinHandover struct {
	Key    string `cbor:"1,keyasint"`
	Record []byte `cbor:"2,keyasint"`
}

// JoinActor tells the other copies of a join that Holder acts for it now,
// at Epoch.
type JoinActor struct {
	Key    string    `cbor:"1,keyasint"`
	Holder pack.Peer `cbor:"2,keyasint"`
	Epoch  int       `cbor:"3,keyasint,omitempty"`
}

// JoinBranch tells a join copy that Branch is held by Holder at Attempt,
// started by the actor named by Epoch and Actor.
type JoinBranch struct {
	Key     string    `cbor:"1,keyasint"`
	Branch  int       `cbor:"2,keyasint,omitempty"`
	Attempt int       `cbor:"3,keyasint,omitempty"`
	Holder  pack.Peer `cbor:"4,keyasint"`
	Epoch   int       `cbor:"5,keyasint,omitempty"`
	Actor   string    `cbor:"6,keyasint,omitempty"`
	// Yield: a holder refused elsewhere gives way to Holder (as in
	// GuardRelease).
	Yield string `cbor:"7,keyasint,omitempty"`
}

// OriginReplica asks a peer to keep a copy of a workflow record (a CBOR
// node/origin Record).
type OriginReplica struct {
	Key    string `cbor:"1,keyasint"`
	Record []byte `cbor:"2,keyasint"`
}

// OriginDone tells a copy of a workflow record that the workflow ended
// (the primary telling a replica, or a replica handing back a completion
// it got while the primary was down).
type OriginDone struct {
	Key        string    `cbor:"1,keyasint"`
	Completion OriginMsg `cbor:"2,keyasint"`
}

// OriginStatus asks a copy of a workflow record whether the workflow
// ended (guardians before a re-route, restarted primaries).
type OriginStatus struct {
	Key string `cbor:"1,keyasint"`
}

// OriginStash asks a copy of a workflow record to keep Outputs and a run
// of trace entries (Trace), which the asking holder will drop from its
// pack once every copy has them (node/origin O6).
type OriginStash struct {
	Key     string               `cbor:"1,keyasint"`
	Outputs []pack.StashedOutput `cbor:"2,keyasint,omitempty"`
	Trace   *pack.StashedTrace   `cbor:"3,keyasint,omitempty"`
}

// Protocol returns ProtoOriginStash.
func (OriginStash) Protocol() string { return ProtoOriginStash }

// Protocol returns ProtoGuardStore.
func (GuardStore) Protocol() string { return ProtoGuardStore }

// Protocol returns ProtoGuardRelease.
func (GuardRelease) Protocol() string { return ProtoGuardRelease }

// Protocol returns ProtoGuardStoreRelease.
func (GuardStoreRelease) Protocol() string { return ProtoGuardStoreRelease }

// Protocol returns ProtoGuardStatus.
func (GuardStatus) Protocol() string { return ProtoGuardStatus }

// Protocol returns ProtoGuardOwner.
func (GuardOwner) Protocol() string { return ProtoGuardOwner }

// Protocol returns ProtoGuardHandback.
func (GuardHandback) Protocol() string { return ProtoGuardHandback }

// Protocol returns ProtoGuardWithdraw.
func (GuardWithdraw) Protocol() string { return ProtoGuardWithdraw }

// Protocol returns ProtoHeldSuperseded.
func (HeldSuperseded) Protocol() string { return ProtoHeldSuperseded }

// Protocol returns ProtoHeldAddWatcher.
func (HeldAddWatcher) Protocol() string { return ProtoHeldAddWatcher }

// Protocol returns ProtoHeldTook.
func (HeldTook) Protocol() string { return ProtoHeldTook }

// Protocol returns ProtoJoinReplica.
func (JoinReplica) Protocol() string { return ProtoJoinReplica }

// Protocol returns ProtoJoinUpdate.
func (JoinUpdate) Protocol() string { return ProtoJoinUpdate }

// Protocol returns ProtoJoinForwarded.
func (JoinForwarded) Protocol() string { return ProtoJoinForwarded }

// Protocol returns ProtoJoinStatus.
func (JoinStatus) Protocol() string { return ProtoJoinStatus }

// Protocol returns ProtoJoinHandover.
func (JoinHandover) Protocol() string { return ProtoJoinHandover }

// Protocol returns ProtoJoinActor.
func (JoinActor) Protocol() string { return ProtoJoinActor }

// Protocol returns ProtoJoinBranch.
func (JoinBranch) Protocol() string { return ProtoJoinBranch }

// Protocol returns ProtoOriginReplica.
func (OriginReplica) Protocol() string { return ProtoOriginReplica }

// Protocol returns ProtoOriginDone.
func (OriginDone) Protocol() string { return ProtoOriginDone }

// Protocol returns ProtoOriginStatus.
func (OriginStatus) Protocol() string { return ProtoOriginStatus }
