// Package join is the decision core of a join: the record a peer keeps for
// a FORK, FIRST or FAILOVER it split (or a copy of one it replicates), and
// the rules that say what each event does to it. It does no I/O and takes
// no lock: Step takes one event and returns a Ready that says what the node
// must do, in order (the shape of etcd's raft Step/Ready):
//
//  1. persist the record (Ready.Persist) — and refuse the event if that fails;
//  2. send Ready.Replicate to every other holder and wait for their answers;
//  3. answer the sender (Ready.Ack);
//  4. start the asynchronous work: cancel losing branches, start the next
//     FAILOVER branch, move the continuation on, tell replicas it moved.
//
// # Copies and roles
//
// A join has k+1 copies: the primary (the peer that split the pattern) and
// k replicas, in distinct zones where the mesh allows, never on a peer that
// runs one of the join's branches. Exactly one copy acts (decides and
// forwards); the others record. Each copy is in one [Role]:
//
//	Primary     the splitting peer, acting
//	Recovering  a restarted primary that asks its replicas whether one took
//	            over; it refuses deliveries until it knows
//	Replica     a passive copy; Rank orders the replicas
//	Acting      a replica that took over (the acting copy went silent, a
//	            branch end could reach only this copy, or a hand-over)
//	Moved       a copy that handed over or was taken over: it never acts
//	            again and refuses deliveries so they go on to the next holder
//
// and in one [Phase]: Open (waiting for branch ends), Decided (the outcome
// is known; the continuation is being moved on) and Forwarded (the next
// holder, join or origin acknowledged the continuation; nothing is left).
//
// # Invariants
//
// Each rule is stated here with its reason; docs/protocol.md specifies
// them in full.
//
//   - J1 (one result per branch): a branch's result is recorded once per
//     attempt; a delivery with an attempt not newer than the recorded one,
//     or any delivery after the outcome is decided, is acknowledged and
//     ignored. The outcome, once decided, never changes.
//   - J2 (durable before acknowledged): an acting copy acknowledges a
//     branch end only after it persisted the result and sent it to its
//     replicas (Ready.Persist, then Ready.Replicate, then Ready.Ack); a
//     replica acknowledges an update only after persisting it.
//   - J3 (one actor): a passive replica acts only when every copy ranked
//     before it is silent or gone: the first replica on the acting copy's
//     silence, a later one only after asking the earlier ones
//     (Ready.AskEarlier). A Moved or Recovering copy never acts.
//   - J4 (forward once per copy): a copy asks for the continuation to be
//     moved on once per time it becomes the actor of a decided join —
//     whichever way it became the actor: the actor's silence, the earlier
//     replicas' silence, or a branch end that reached it directly after
//     it had recorded every end from the actor's updates (forwarding
//     nothing that last way would lose the workflow; testdata/replica.txt)
//     — and Forwarded is final.
//   - J5 (one split per chain): before any branch starts, the acting copy
//     settles Split — it releases the guardians of the step before the
//     pattern, and a guardian that had re-routed that step answers that
//     the split is superseded, which abandons the join. A release and a
//     re-route are decided atomically at each guardian, so of a late
//     re-route and this join exactly one goes on.
//   - J6 (each branch started once): a branch's first holder registers
//     with every copy before it acknowledges the pack (BranchStarted), so a
//     copy that takes over starts only branches nobody holds and none has
//     ended. A second holder of the same start at the same attempt — the
//     actor's hand-off to the first timed out after the first took it — is
//     refused, naming the first (RefuseTaken), and the actor hands the
//     pack to the first again: a first that holds it, or ran it and handed
//     it on, answers as taken; one that registered and then dropped the
//     pack takes it now (node handToFirst). A re-routed start (a newer
//     attempt) replaces the holder. The registration counts once one copy
//     answered; a copy whose call failed is told again once the holder
//     has taken the pack (node completeSettle), or taking the join over
//     later it would start the branch a second time.
//   - J7 (one continuation after a false suspicion): a copy that takes
//     over acts at the next epoch and tells every other copy, the primary
//     included (NewActor); an acting copy that hears of a newer actor
//     stops. The receiver of a continuation settles it with every other
//     copy, naming the forwarder's [Token]; a copy that knows a newer
//     actor answers superseded and the receiver refuses the pack. Of two
//     actors that both forward, at most one continuation is accepted as
//     long as each can reach the other.
//   - J8 (one receiver per continuation): the receiver of a continuation
//     names itself when it settles (ActorForwarded.By), and a copy keeps
//     the first receiver of its actor's continuation (ForwardedBy). A
//     second receiver of the same actor's continuation — the actor's
//     hand-off to the first timed out after the first took it, as when a
//     cut starts between the two — is refused, naming the first
//     (RefuseTaken); the actor then hands the pack to that first receiver
//     again, which holds it already or takes it now, so the step after
//     the join runs once. A receiver (or branch
//     holder) refused that way after other copies had recorded it gives
//     way (ActorForwarded.Yield, BranchStarted.Yield): those copies record
//     the first instead, so two receivers never name each other.
//   - J9 (no branch end stranded): a copy that learns of a newer actor
//     sends it every branch end it recorded, and a replica that records
//     an update from a peer other than the actor it follows (an old
//     actor, cut off while a replica took over, took a branch end and
//     replicated it) relays it to that actor (Ready.Relay). Without it a
//     branch end acknowledged by the old actor reaches only copies that
//     do not act, and the new actor waits for ever. An acting copy
//     records a relayed end as a branch end (J2).
//   - J10 (a join moves on once): a continuation that was taken stays
//     the only one. An acting copy forwards (Forwarded) only once its
//     receiver acknowledged (ForwardDone; a continuation refused as
//     superseded stops the copy instead, and it sends no notice), and a
//     passive copy that had the actor's notice (ActorForwarded with no
//     receiver, sent after the ack) records Taken. Either refuses a
//     newer actor's continuation as superseded and ignores its takeover
//     notice (NewActor): a replica that missed the settle and the notice
//     (cut off) and took the decided join over later would forward it a
//     second time, and J7's "a newer actor wins" alone would let it
//     through — the step after the join would run twice, even on one
//     peer, whose handed-on memory takes a newer chain afresh
//     (testdata/taken.txt). A copy that only saw a
//     receiver's settle cannot tell whether that receiver took it
//     (another copy may have refused it, naming a newer actor) and lets
//     the newer actor's continuation through, as J7 says. The node adds
//     that a sender whose copy of the join knows a newer actor stops
//     handing on the old actor's continuation (continuationSuperseded).
//   - J11 (two refused takers do not swap): two receivers of one
//     continuation (or two holders of one branch start) that each reached
//     one copy first are each refused at the other's copy, and each gives
//     way where it was recorded (J8, J6): the copies would swap names, and
//     every later try would be refused again, and the workflow lost — the
//     guard copies' race of G14 (node/guard). A
//     copy that refused the peer it is asked to record instead (a swap in
//     the making) applies the yield only if the yielding peer's ID is the
//     greater: of the two, exactly one gives way, and every copy names the
//     smaller. A yield toward a peer this copy never refused applies. The
//     refusals are kept in memory only: after a restart a yield applies
//     without J11's tie-break (testdata/swap.txt).
//
// The node owns persistence, the network and timers; tests in this package
// drive the machine with scripted events (testdata/*.txt) and compare what
// it says to do.
package join

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bedwe/bedwe/pack"
)

// Role is what a copy of a join does.
type Role uint8

// The roles (see the package doc).
const (
	RolePrimary Role = iota + 1
	RoleRecovering
	RoleReplica
	RoleActing
	RoleMoved
)

var roleNames = map[Role]string{RolePrimary: "primary", RoleRecovering: "recovering", RoleReplica: "replica", RoleActing: "acting", RoleMoved: "moved"}

func (r Role) String() string {
	if s, ok := roleNames[r]; ok {
		return s
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Phase is how far the pattern is.
type Phase uint8

// The phases (see the package doc).
const (
	PhaseOpen Phase = iota + 1
	PhaseDecided
	PhaseForwarded
	// PhaseAbandoned: the split turned out to be superseded (a guardian
	// re-routed the step before it, so another chain splits again); this
	// join never acts.
	PhaseAbandoned
)

var phaseNames = map[Phase]string{PhaseOpen: "open", PhaseDecided: "decided", PhaseForwarded: "forwarded", PhaseAbandoned: "abandoned"}

func (p Phase) String() string {
	if s, ok := phaseNames[p]; ok {
		return s
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Body is a branch or continuation: canonical workflow text plus the
// service paths in source order (the node parses it).
type Body struct {
	Text  string   `cbor:"1,keyasint"`
	Paths []string `cbor:"2,keyasint"`
}

// Result is one branch's end as recorded.
type Result struct {
	OK      bool                       `cbor:"1,keyasint"`
	Error   string                     `cbor:"2,keyasint,omitempty"`
	Outputs map[string]json.RawMessage `cbor:"3,keyasint,omitempty"`
	Trace   []pack.TraceEntry          `cbor:"4,keyasint,omitempty"`
	Attempt int                        `cbor:"5,keyasint"`
}

// Record is the persisted state of one copy of a join. The first fields
// are fixed at the split and identical on every copy.
type Record struct {
	ID         string                     `cbor:"1,keyasint"`
	WorkflowID string                     `cbor:"2,keyasint"`
	Kind       pack.FrameKind             `cbor:"3,keyasint"`
	Branches   []*Body                    `cbor:"4,keyasint"`
	Rest       *Body                      `cbor:"5,keyasint,omitempty"`
	Origin     []pack.Peer                `cbor:"6,keyasint"`
	Input      json.RawMessage            `cbor:"7,keyasint,omitempty"`
	Outputs    map[string]json.RawMessage `cbor:"8,keyasint,omitempty"`
	Trace      []pack.TraceEntry          `cbor:"9,keyasint,omitempty"`
	Frames     []pack.Frame               `cbor:"10,keyasint,omitempty"`
	Created    time.Time                  `cbor:"11,keyasint"`
	// Replicas are the replica copies in rank order (never the primary).
	Replicas []pack.Peer `cbor:"12,keyasint,omitempty"`
	// Primary is the copy that split the pattern (empty in records
	// written before takeover epochs).
	Primary pack.Peer `cbor:"14,keyasint,omitempty"`
	// Split is what the pack that was split asked its receiver to settle
	// (the release of the guardians of the step before the pattern): the
	// copy that acts settles it before it starts any branch, and learns
	// there whether its chain was superseded.
	Split []pack.Settle `cbor:"13,keyasint,omitempty"`

	// Results holds the branch ends recorded so far, by branch index.
	Results map[int]*Result `cbor:"20,keyasint,omitempty"`
	// Next is the FAILOVER branch in progress.
	Next int `cbor:"21,keyasint"`
	// Phase, and once decided: OK, Error and the Winners whose outputs
	// continue.
	Phase   Phase  `cbor:"22,keyasint"`
	OK      bool   `cbor:"23,keyasint,omitempty"`
	Error   string `cbor:"24,keyasint,omitempty"`
	Winners []int  `cbor:"25,keyasint,omitempty"`
	// Started records, per branch, the peer that accepted its first pack
	// (it registered itself with every holder before acknowledging).
	Started map[int]Start `cbor:"26,keyasint,omitempty"`
	// SplitSettled is set once Split was settled without being superseded.
	SplitSettled bool `cbor:"27,keyasint,omitempty"`

	// Role of this copy; Rank is its place among the replicas (0 first).
	Role Role `cbor:"30,keyasint"`
	Rank int  `cbor:"31,keyasint,omitempty"`
	// Actor is the copy this one believes acts (for a passive or moved
	// copy: whom it watches, or whom branch ends should go to).
	Actor pack.Peer `cbor:"32,keyasint,omitempty"`
	// Epoch counts takeovers: a copy that starts acting in another's
	// place acts at the epoch after the one it knew (J7). EpochActor is
	// the copy that acts at Epoch — not always Actor: a passive copy may
	// watch an earlier replica that has not taken over (yet).
	Epoch      int    `cbor:"33,keyasint,omitempty"`
	EpochActor string `cbor:"34,keyasint,omitempty"`
	// ForwardedBy is the receiver that took the continuation of the
	// actor this copy knows (J8): a second receiver of the same
	// actor's continuation is refused, naming it.
	ForwardedBy string `cbor:"35,keyasint,omitempty"`
	// Taken is set on a passive copy once the actor it knows said that
	// its continuation was acknowledged (the actor's notice, after
	// ForwardDone): the join moved on for good, and a newer actor's
	// continuation is refused (J10).
	Taken bool `cbor:"36,keyasint,omitempty"`
}

// Token orders actors: the newer epoch wins, and of two copies that took
// over at the same epoch the one with the greater peer ID (J7).
type Token struct {
	Epoch int
	Actor string
}

// Before reports whether t is older than u.
func (t Token) Before(u Token) bool {
	return t.Epoch < u.Epoch || (t.Epoch == u.Epoch && t.Actor < u.Actor)
}

// Start says who holds a started branch, and which actor started it. An
// acting copy records a pending start (no Holder yet) for every branch it
// is about to dispatch, so a start by an older actor arriving meanwhile is
// refused (J7).
type Start struct {
	Holder  pack.Peer `cbor:"1,keyasint"`
	Attempt int       `cbor:"2,keyasint"`
	Epoch   int       `cbor:"3,keyasint,omitempty"`
	Actor   string    `cbor:"4,keyasint,omitempty"`
}

// Token is the actor that started the branch.
func (s Start) Token() Token { return Token{Epoch: s.Epoch, Actor: s.Actor} }

// Join is one copy of a join and its rules.
type Join struct {
	rec Record
	// refused are the second receivers of a continuation and second
	// holders of a branch start this copy refused (RefuseTaken, J6/J8),
	// for J11. Not persisted: after a restart a yield applies without
	// J11's tie-break.
	refused []refusal
}

// refusal is a peer refused as the second taker of the continuation
// (branch continuationBranch, attempt the actor's epoch) or of a branch
// start at attempt.
type refusal struct {
	branch, attempt int
	peer            string
}

// continuationBranch marks a refusal of the continuation's receiver.
const continuationBranch = -1

// refuse remembers that peer was refused as the second taker (J11).
func (j *Join) refuse(branch, attempt int, peer string) {
	r := refusal{branch: branch, attempt: attempt, peer: peer}
	if !slices.Contains(j.refused, r) {
		j.refused = append(j.refused, r)
	}
}

// keepsFirst reports whether a yield of yielding to by is one half of a
// swap (J11): this copy refused by, which gives way at the copies that
// recorded it just as yielding does here, and only the greater peer ID of
// the two gives way.
func (j *Join) keepsFirst(branch, attempt int, yielding, by string) bool {
	return slices.Contains(j.refused, refusal{branch: branch, attempt: attempt, peer: by}) && yielding < by
}

// New returns the primary copy of a new join. rec must carry the fields
// fixed at the split; its Replicas are those that accepted a copy.
func New(rec Record, self pack.Peer) *Join {
	rec.Role, rec.Phase, rec.Actor, rec.Primary, rec.EpochActor = RolePrimary, PhaseOpen, self, self, self.ID
	if rec.Results == nil {
		rec.Results = map[int]*Result{}
	}
	return &Join{rec: rec}
}

// Clone returns an independent copy: the node steps a clone, persists its
// record, and only then keeps it, so a failed write leaves the copy as it
// was.
func (j *Join) Clone() *Join { return &Join{rec: j.Record(), refused: slices.Clone(j.refused)} }

// Actor is the copy this one believes acts.
func (j *Join) Actor() pack.Peer { return j.rec.Actor }

// WorkflowID is the workflow the join belongs to.
func (j *Join) WorkflowID() string { return j.rec.WorkflowID }

// Replicas are the replica copies in rank order.
func (j *Join) Replicas() []pack.Peer { return append([]pack.Peer{}, j.rec.Replicas...) }

// ReplicaCopy is the record a primary sends to the replica of rank rank.
func (j *Join) ReplicaCopy(rank int) Record {
	cp := j.rec
	cp.Role, cp.Rank = RoleReplica, rank
	cp.Results = copyResults(j.rec.Results)
	cp.Started = copyStarted(j.rec.Started)
	return cp
}

// Load returns a copy read back from the journal after a restart: an
// acting copy that has replicas and has not forwarded recovers first (it
// asks them whether one took over while it was down).
func Load(rec Record) *Join {
	if rec.Results == nil {
		rec.Results = map[int]*Result{}
	}
	j := &Join{rec: rec}
	if rec.Role == RolePrimary && rec.Phase != PhaseForwarded && len(rec.Replicas) > 0 {
		j.rec.Role = RoleRecovering
	}
	return j
}

// FromReplicaCopy returns a passive copy from what its primary sent.
func FromReplicaCopy(rec Record) *Join {
	if rec.Results == nil {
		rec.Results = map[int]*Result{}
	}
	rec.Role = RoleReplica
	return &Join{rec: rec}
}

// Resume says what a copy read back from the journal (Load) must do
// first: a recovering primary asks its replicas; an acting copy of a
// decided join forwards it again (its forwarding was not acknowledged
// before the restart); a passive copy watches its actor.
func (j *Join) Resume() Ready {
	r := none()
	switch {
	case j.rec.Role == RoleRecovering:
		r.AskReplicas = true
	case j.Acting():
		return j.act(r)
	case j.rec.Role == RoleReplica && j.rec.Phase != PhaseForwarded && j.rec.Phase != PhaseAbandoned:
		r.Watch = true
	}
	return r
}

// Record returns the state to persist (a copy the caller may keep).
func (j *Join) Record() Record {
	cp := j.rec
	cp.Results = copyResults(j.rec.Results)
	cp.Started = copyStarted(j.rec.Started)
	return cp
}

// ID is the join's ID.
func (j *Join) ID() string { return j.rec.ID }

// Role is this copy's role.
func (j *Join) Role() Role { return j.rec.Role }

// Phase is the pattern's phase.
func (j *Join) Phase() Phase { return j.rec.Phase }

// Prunable reports whether this copy may be deleted under a retention
// cut-off: it was created before it, and either the pattern moved on or
// was abandoned, or (a passive copy that never heard the end) the
// workflow ended. An open copy of a running workflow is never pruned.
func (j *Join) Prunable(before time.Time, workflowEnded bool) bool {
	if !j.rec.Created.Before(before) {
		return false
	}
	switch j.rec.Phase {
	case PhaseForwarded, PhaseAbandoned:
		return true
	}
	return workflowEnded
}

// Acting reports whether this copy decides and forwards.
func (j *Join) Acting() bool { return j.rec.Role == RolePrimary || j.rec.Role == RoleActing }

// BranchEnded reports whether nothing of branch is left to run: this copy
// recorded the branch's end, or the pattern was decided (or abandoned)
// without it. A guardian of a step of that branch whose holder went
// silent asks before it re-routes (node: branchEnded): a holder killed
// after its branch end was recorded, while the join's release of its
// guardians was lost or late, would otherwise have its step run again.
func (j *Join) BranchEnded(branch int) bool {
	if j.rec.Phase != PhaseOpen {
		return true
	}
	_, recorded := j.rec.Results[branch]
	return recorded
}

// Pending reports whether this copy still has work: it acts and the
// continuation has not been acknowledged.
func (j *Join) Pending() bool {
	return j.Acting() && (j.rec.Phase == PhaseOpen || j.rec.Phase == PhaseDecided)
}

// Watching returns the peer a passive copy watches (the actor) and whether
// it watches anyone.
func (j *Join) Watching() (pack.Peer, bool) {
	if j.rec.Role == RoleReplica && (j.rec.Phase == PhaseOpen || j.rec.Phase == PhaseDecided) && j.rec.Actor.ID != "" {
		return j.rec.Actor, true
	}
	return pack.Peer{}, false
}

// Holders lists the peers a branch end may deliver to, in order: the
// primary, then the replicas.
func Holders(primary pack.Peer, replicas []pack.Peer) []pack.Peer {
	return append([]pack.Peer{primary}, replicas...)
}

// Others are the holders an acting copy replicates to: every replica but
// itself.
func (j *Join) Others(self string) []pack.Peer {
	var out []pack.Peer
	for _, r := range j.rec.Replicas {
		if r.ID != self {
			out = append(out, r)
		}
	}
	return out
}

// OtherCopies are every other copy: the primary (when this copy is not
// it) and the replicas. Takeovers and forwarded continuations are settled
// with all of them, so a live primary that was only suspected learns that
// it no longer acts (J7).
func (j *Join) OtherCopies(self string) []pack.Peer {
	var out []pack.Peer
	if j.rec.Primary.ID != "" && j.rec.Primary.ID != self {
		out = append(out, j.rec.Primary)
	}
	return append(out, j.Others(self)...)
}

// Token is the actor token this copy knows: its epoch and actor.
func (j *Join) Token() Token {
	actor := j.rec.EpochActor
	if actor == "" {
		actor = j.rec.Primary.ID
	}
	if actor == "" {
		actor = j.rec.Actor.ID
	}
	return Token{Epoch: j.rec.Epoch, Actor: actor}
}

// Earlier are the replicas ranked before this one (asked before it acts).
func (j *Join) Earlier() []pack.Peer {
	if j.rec.Rank <= 0 || j.rec.Rank > len(j.rec.Replicas) {
		return nil
	}
	return append([]pack.Peer{}, j.rec.Replicas[:j.rec.Rank]...)
}

func copyStarted(m map[int]Start) map[int]Start {
	if m == nil {
		return nil
	}
	out := make(map[int]Start, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyResults(m map[int]*Result) map[int]*Result {
	out := make(map[int]*Result, len(m))
	for k, v := range m {
		r := *v
		out[k] = &r
	}
	return out
}

// Refusal classifies an Ack that refuses.
type Refusal uint8

// Refusals.
const (
	// RefuseNone: the event was taken.
	RefuseNone Refusal = iota
	// RefuseMoved: this copy no longer acts; deliver to the next holder.
	RefuseMoved
	// RefuseRecovering: ask again shortly (a restarted primary is checking
	// with its replicas).
	RefuseRecovering
	// RefuseNotActing: an update reached a copy that is not passive.
	RefuseNotActing
	// RefuseSuperseded: a continuation forwarded by an actor older than
	// the one this copy knows (J7): the receiver refuses that pack.
	RefuseSuperseded
	// RefuseUnsettled: the node could not ask the guardians of the
	// branch's last step (none answered); nothing was recorded, the
	// sender tries again. The node sets it, never the machine.
	RefuseUnsettled
	// RefuseTaken: another receiver (Ack.TakenBy) took this actor's
	// continuation first (J8): the receiver refuses the pack and the
	// actor counts the hand-off as made to the first.
	RefuseTaken
)

// Ack is the answer to the event's sender.
type Ack struct {
	OK      bool
	Refusal Refusal
	Error   string
	// TakenBy names the receiver that took the continuation first
	// (RefuseTaken, J8).
	TakenBy string
}

// Ready is what the node must do after a Step, in field order.
type Ready struct {
	// Persist: write Record() to the journal; on error, refuse the event
	// (Ack with the error) and do nothing else.
	Persist bool
	// Replicate: send this branch end to every other holder (Others) and
	// wait for their answers before acknowledging.
	Replicate *Deliver
	// Ack answers the sender of a Deliver or Update.
	Ack Ack
	// Cancel lists branches to cancel (FORK failed, FIRST won).
	Cancel []int
	// SettleSplit: settle Record().Split with its peers, then
	// Step(SplitSettled{...}).
	SettleSplit bool
	// StartBranches are branches to dispatch now (never started, or the
	// next FAILOVER branch).
	StartBranches []int
	// Forward: move the continuation on (merged outputs, or the failure up
	// a level); then Step(ForwardDone{}).
	Forward bool
	// NotifyForwarded: tell every other holder the continuation moved on.
	NotifyForwarded bool
	// AskEarlier: ask the earlier-ranked replicas (Earlier) whether one
	// acts, then Step(EarlierAnswered{...}).
	AskEarlier bool
	// AskReplicas: (recovering primary) ask every replica whether it took
	// over, then Step(Recovered{...}).
	AskReplicas bool
	// Unwatch: stop watching the actor (nothing left to watch it for).
	Unwatch bool
	// Watch: watch the actor (a new one).
	Watch bool
	// TookOver: this copy just started acting (log and count it).
	TookOver string
	// Relay: send these branch ends to RelayTo, the actor this copy
	// follows, as updates, asking until it answers (J9).
	Relay   []Deliver
	RelayTo pack.Peer
}

func none() Ready { return Ready{Ack: Ack{OK: true}} }

// Event is something that happened to a copy of a join.
type Event interface{ isEvent() }

// Deliver is a branch end arriving from the branch's last holder.
type Deliver struct {
	Branch  int
	Attempt int
	OK      bool
	Error   string
	Outputs map[string]json.RawMessage
	Trace   []pack.TraceEntry
}

// Update is a branch end the acting copy recorded, sent to a replica.
// From is the peer that sent it (the actor as it sees itself); empty when
// unknown.
type Update struct {
	Deliver Deliver
	From    string
}

// ActorSilent says the failure detector declared the actor silent.
type ActorSilent struct{ Why string }

// EarlierAnswered says what the earlier-ranked replicas said: Acting is
// the first that acts (or is alive and passive, so it will act), Reached
// whether any answered at all.
type EarlierAnswered struct {
	Acting  *pack.Peer
	Reached bool
}

// ForwardDone says the continuation was acknowledged by its next holder,
// or (Superseded) refused because a copy knows a newer actor or that the
// join moved on already (J7, J10): this copy then stops acting and tells
// nobody that it moved the join on.
type ForwardDone struct{ Superseded bool }

// ActorForwarded says the actor with Token moved the continuation on (the
// continuation's receiver, or the actor itself, tells every other copy).
type ActorForwarded struct {
	Token Token
	// By is the receiver that took the continuation (empty when the
	// actor itself tells the copies, after the receiver acknowledged).
	By string
	// Yield: the receiver Yield was refused elsewhere and gives way to
	// By; a copy that recorded Yield records By instead (J8).
	Yield string
}

// HandedOver (on the acting copy) says the replica To accepted to act in
// its place (a drain before a power cut).
type HandedOver struct{ To pack.Peer }

// TakeHandOver (on a replica) makes it act with the actor's latest record.
type TakeHandOver struct {
	Record Record
	From   pack.Peer
}

// Recovered (on a recovering primary) says what its replicas said: TakenBy
// is the replica that acts now, or nil when none took over.
type Recovered struct{ TakenBy *pack.Peer }

// NewActor says another copy started acting at Epoch.
type NewActor struct {
	Actor pack.Peer
	Epoch int
}

// BranchStarted says the peer Holder accepted the first pack of Branch
// at Attempt, started by the actor Token (it tells every holder before it
// acknowledges the pack).
type BranchStarted struct {
	Branch  int
	Holder  pack.Peer
	Attempt int
	Token   Token
	// Yield: the holder Yield was refused elsewhere and gives way to
	// Holder; a copy that recorded Yield records Holder instead (J6).
	Yield string
}

// SplitSettled says how settling Split went: Superseded when a guardian
// of the step before the pattern had re-routed it.
type SplitSettled struct{ Superseded bool }

func (Deliver) isEvent()         {}
func (Update) isEvent()          {}
func (ActorSilent) isEvent()     {}
func (EarlierAnswered) isEvent() {}
func (ForwardDone) isEvent()     {}
func (ActorForwarded) isEvent()  {}
func (HandedOver) isEvent()      {}
func (TakeHandOver) isEvent()    {}
func (Recovered) isEvent()       {}
func (NewActor) isEvent()        {}
func (BranchStarted) isEvent()   {}
func (SplitSettled) isEvent()    {}

// Step applies one event and says what to do. self is this peer.
func (j *Join) Step(ev Event, self pack.Peer) Ready {
	r := j.step(ev, self)
	if len(r.StartBranches) > 0 && j.Acting() {
		// Pending starts (J7): this actor's, until the branch's first
		// holder registers.
		if j.rec.Started == nil {
			j.rec.Started = map[int]Start{}
		}
		tok := j.Token()
		for _, i := range r.StartBranches {
			j.rec.Started[i] = Start{Epoch: tok.Epoch, Actor: tok.Actor}
		}
		r.Persist = true
	}
	return r
}

func (j *Join) step(ev Event, self pack.Peer) Ready {
	switch ev := ev.(type) {
	case Deliver:
		return j.deliver(ev, self)
	case Update:
		if j.rec.Role != RoleReplica && j.rec.Role != RoleMoved {
			if j.Acting() {
				// An old actor's update reaching the new actor: record it
				// like a branch end (it was accepted, so it must count).
				return j.deliver(ev.Deliver, self)
			}
			return Ready{Ack: Ack{Refusal: RefuseNotActing, Error: "join " + j.rec.ID + " is " + j.rec.Role.String() + " here"}}
		}
		r := j.record(ev.Deliver)
		if r.Persist && j.rec.Role == RoleReplica && ev.From != "" && ev.From != j.rec.Actor.ID && j.rec.Actor.ID != self.ID {
			// J9: from an actor this copy knows was taken over.
			r.Relay, r.RelayTo = []Deliver{ev.Deliver}, j.rec.Actor
		}
		return r
	case ActorSilent:
		if _, watching := j.Watching(); !watching {
			return none()
		}
		if j.rec.Rank > 0 {
			r := none()
			r.AskEarlier = true
			return r
		}
		return j.takeOver(self, ev.Why)
	case EarlierAnswered:
		if _, watching := j.Watching(); !watching {
			return none()
		}
		if ev.Acting != nil {
			if ev.Acting.ID == j.rec.Actor.ID {
				return none()
			}
			j.rec.Actor = *ev.Acting
			r := none()
			r.Persist, r.Watch = true, true
			return r
		}
		return j.takeOver(self, "the actor and every earlier replica are silent")
	case ForwardDone:
		if !j.Acting() || j.rec.Phase != PhaseDecided {
			return none()
		}
		if ev.Superseded {
			// Not acknowledged: no notice, which would tell the copies
			// the continuation was taken (J10) and make them refuse the
			// newer actor's. The newer actor's continuation, or its
			// notice, moves this copy on when it reaches it.
			j.rec.Role = RoleMoved
			r := none()
			r.Persist = true
			return r
		}
		j.rec.Phase = PhaseForwarded
		r := none()
		r.Persist, r.NotifyForwarded = true, true
		return r
	case ActorForwarded:
		mine := j.Token()
		if ev.Yield != "" {
			if j.rec.Phase == PhaseForwarded && ev.Token == mine && j.rec.ForwardedBy == ev.Yield && ev.By != "" {
				if j.keepsFirst(continuationBranch, ev.Token.Epoch, ev.Yield, ev.By) {
					return none() // J11: the other receiver gives way
				}
				j.rec.ForwardedBy = ev.By
				r := none()
				r.Persist = true
				return r
			}
			return none()
		}
		switch {
		case ev.Token.Before(mine):
			// J7: an older actor's continuation; this copy knows a newer one.
			return Ready{Ack: Ack{Refusal: RefuseSuperseded, Error: fmt.Sprintf(
				"join %s: the continuation comes from an actor at epoch %d, taken over since (epoch %d)", j.rec.ID, ev.Token.Epoch, mine.Epoch)}}
		case ev.Token == mine && j.Acting():
			return none() // this copy's own continuation
		case j.rec.Phase == PhaseAbandoned:
			return none()
		case j.rec.Phase == PhaseForwarded && !mine.Before(ev.Token):
			// The same actor's continuation again (J8): the receiver
			// that took it first, or its actor's notice, is answered as
			// before; a second receiver is refused, naming the first.
			switch {
			case ev.By == "" && !j.Acting() && !j.rec.Taken:
				// The actor's notice: its continuation was taken (J10).
				j.rec.Taken = true
				r := none()
				r.Persist = true
				return r
			case ev.By == "" || ev.By == j.rec.ForwardedBy:
				return none()
			case j.rec.ForwardedBy == "":
				j.rec.ForwardedBy = ev.By
				r := none()
				r.Persist = true
				return r
			}
			j.refuse(continuationBranch, ev.Token.Epoch, ev.By)
			return Ready{Ack: Ack{Refusal: RefuseTaken, TakenBy: j.rec.ForwardedBy, Error: fmt.Sprintf(
				"join %s: the continuation of the actor at epoch %d was taken by another peer first", j.rec.ID, ev.Token.Epoch)}}
		}
		if j.rec.Phase == PhaseForwarded && (j.Acting() || j.rec.Taken) {
			// J10: this copy's continuation (an acting copy forwarded
			// only once its receiver acknowledged) or its actor's was
			// taken: the join moved on. A newer actor — a replica that
			// missed that, cut off, and took the join over — moves it on
			// a second time: its receiver is refused, and its own notice
			// changes nothing. Accepted, the step after the join would
			// run twice.
			if ev.By == "" {
				return none()
			}
			return Ready{Ack: Ack{Refusal: RefuseSuperseded, Error: fmt.Sprintf(
				"join %s moved on already: the continuation of the actor at epoch %d was taken (by %s); a newer actor's (epoch %d) is refused",
				j.rec.ID, mine.Epoch, short(j.rec.ForwardedBy), ev.Token.Epoch)}}
		}
		// A newer (or this copy's) actor moved it on: it never acts again.
		j.rec.Phase, j.rec.Epoch, j.rec.EpochActor, j.rec.ForwardedBy = PhaseForwarded, ev.Token.Epoch, ev.Token.Actor, ev.By
		j.rec.Taken = ev.By == ""
		if ev.Token.Actor != j.rec.Actor.ID {
			j.rec.Actor = pack.Peer{ID: ev.Token.Actor}
		}
		r := none()
		r.Persist, r.Unwatch = true, true
		if j.Acting() {
			j.rec.Role = RoleMoved
		}
		return r
	case HandedOver:
		if !j.Acting() || j.rec.Phase == PhaseForwarded {
			return none()
		}
		j.rec.Role, j.rec.Actor = RoleMoved, ev.To
		r := none()
		r.Persist = true
		return r
	case TakeHandOver:
		if j.rec.Phase == PhaseForwarded || j.Acting() {
			return none() // nothing to take, or we act already
		}
		rec := ev.Record
		if rec.Results == nil {
			rec.Results = map[int]*Result{}
		}
		rec.Role, rec.Actor, rec.Rank, rec.Epoch, rec.EpochActor = RoleActing, self, j.rec.Rank, max(rec.Epoch, j.rec.Epoch)+1, self.ID
		j.rec = rec
		r := none()
		r.Persist, r.Unwatch, r.TookOver = true, true, "the acting copy handed the join over before a power cut"
		if rec.Phase == PhaseDecided {
			r.Forward = true
		}
		return r // branches of an open join are held already: the hand-over copies their starts
	case Recovered:
		if j.rec.Role != RoleRecovering {
			return none()
		}
		if ev.TakenBy != nil {
			j.rec.Role, j.rec.Actor = RoleMoved, *ev.TakenBy
			r := none()
			r.Persist = true
			return r
		}
		j.rec.Role = RolePrimary
		return j.act(none())
	case BranchStarted:
		if ev.Branch < 0 || ev.Branch >= len(j.rec.Branches) {
			return none()
		}
		old, started := j.rec.Started[ev.Branch]
		if ev.Yield != "" {
			if started && old.Token() == ev.Token && old.Attempt == ev.Attempt && old.Holder.ID == ev.Yield && ev.Holder.ID != "" {
				if j.keepsFirst(ev.Branch, ev.Attempt, ev.Yield, ev.Holder.ID) {
					return none() // J11: the other holder gives way
				}
				old.Holder = ev.Holder
				j.rec.Started[ev.Branch] = old
				r := none()
				r.Persist = true
				return r
			}
			return none()
		}
		if started && ev.Token.Before(old.Token()) {
			// J7: a newer actor started this branch; this start is of a
			// superseded actor and stops at its first holder.
			return Ready{Ack: Ack{Refusal: RefuseSuperseded, Error: fmt.Sprintf(
				"join %s: branch %d was started again by a newer actor (epoch %d)", j.rec.ID, ev.Branch, old.Epoch)}}
		}
		if started && old.Token() == ev.Token && old.Holder.ID != "" && old.Holder.ID != ev.Holder.ID && old.Attempt == ev.Attempt {
			// J6: the same start taken by a second holder (the actor's
			// hand-off to the first timed out after the first took it):
			// refused, naming the first, to whom the actor hands it again.
			j.refuse(ev.Branch, ev.Attempt, ev.Holder.ID)
			return Ready{Ack: Ack{Refusal: RefuseTaken, TakenBy: old.Holder.ID, Error: fmt.Sprintf(
				"join %s: branch %d attempt %d was taken by another peer first", j.rec.ID, ev.Branch, ev.Attempt)}}
		}
		if j.rec.Phase != PhaseOpen {
			return none()
		}
		if started && old.Token() == ev.Token && old.Holder.ID != "" && old.Attempt > ev.Attempt {
			return none()
		}
		r := none()
		if j.Token().Before(ev.Token) {
			r = j.newActor(pack.Peer{ID: ev.Token.Actor}, ev.Token.Epoch, self)
		}
		if j.rec.Started == nil {
			j.rec.Started = map[int]Start{}
		}
		j.rec.Started[ev.Branch] = Start{Holder: ev.Holder, Attempt: ev.Attempt, Epoch: ev.Token.Epoch, Actor: ev.Token.Actor}
		r.Persist = true
		return r
	case SplitSettled:
		if !j.Acting() || j.rec.Phase != PhaseOpen || j.rec.SplitSettled {
			return none()
		}
		r := none()
		r.Persist = true
		if ev.Superseded {
			j.rec.Phase = PhaseAbandoned
			r.NotifyForwarded = true // the other copies stop too
			return r
		}
		j.rec.SplitSettled = true
		r.StartBranches = j.unstarted()
		return r
	case NewActor:
		if !j.Token().Before(Token{Epoch: ev.Epoch, Actor: ev.Actor.ID}) {
			return none() // not newer than the actor this copy knows
		}
		if j.rec.Phase == PhaseForwarded && (j.Acting() || j.rec.Taken) {
			// J10: the join moved on; a replica that took it over since
			// (cut off, it missed that) must not turn this copy into one
			// that lets its continuation through.
			return none()
		}
		return j.newActor(ev.Actor, ev.Epoch, self)
	}
	return none()
}

// newActor makes a newer actor the one this copy follows: a copy that was
// only suspected learns it was taken over and stops acting (J7); the new
// actor's fence stops anything it already sent. The branch ends this copy
// recorded go to the new actor, which may lack them (J9).
func (j *Join) newActor(actor pack.Peer, epoch int, self pack.Peer) Ready {
	r := none()
	if j.Acting() || j.rec.Role == RoleRecovering {
		j.rec.Role = RoleMoved
	} else if j.rec.Role == RoleReplica {
		r.Watch = true
	}
	j.rec.Actor, j.rec.Epoch, j.rec.EpochActor = actor, epoch, actor.ID
	r.Persist = true
	if actor.ID != self.ID && (j.rec.Phase == PhaseOpen || j.rec.Phase == PhaseDecided) && len(j.rec.Results) > 0 {
		r.Relay, r.RelayTo = j.results(), actor
	}
	return r
}

// results lists the branch ends this copy recorded, by branch.
func (j *Join) results() []Deliver {
	var out []Deliver
	for b := range len(j.rec.Branches) {
		if res, ok := j.rec.Results[b]; ok {
			out = append(out, Deliver{Branch: b, Attempt: res.Attempt, OK: res.OK, Error: res.Error, Outputs: res.Outputs, Trace: res.Trace})
		}
	}
	return out
}

// deliver handles a branch end reaching this copy directly.
func (j *Join) deliver(d Deliver, self pack.Peer) Ready {
	if j.rec.Phase == PhaseAbandoned {
		return none() // a branch of a superseded split: it stops here
	}
	switch j.rec.Role {
	case RoleMoved:
		return Ready{Ack: Ack{Refusal: RefuseMoved, Error: fmt.Sprintf("join %s moved to %s", j.rec.ID, short(j.rec.Actor.ID))}}
	case RoleRecovering:
		return Ready{Ack: Ack{Refusal: RefuseRecovering, Error: fmt.Sprintf("join %s: this peer restarted and is asking its replicas whether one took over; try later", j.rec.ID)}}
	case RoleReplica:
		if j.rec.Phase == PhaseForwarded {
			return none() // late: the pattern moved on
		}
		// A branch end could not reach the actor: this replica acts now,
		// records the end as the actor (so the other copies get it), and
		// does what a copy that starts acting does: settle the split, or
		// start the branches nobody holds (J6), or forward.
		j.rec.Role, j.rec.Actor, j.rec.Epoch, j.rec.EpochActor = RoleActing, self, j.rec.Epoch+1, self.ID
		r := j.record(d)
		r.Persist, r.Unwatch, r.TookOver = true, true, "a branch end reached this replica"
		switch j.rec.Phase {
		case PhaseOpen:
			a := j.act(none())
			r.SettleSplit = a.SettleSplit
			for _, i := range a.StartBranches {
				if !slices.Contains(r.StartBranches, i) {
					r.StartBranches = append(r.StartBranches, i)
				}
			}
		case PhaseDecided:
			// Decided already from the actor's updates (this end is one
			// of them, its ack lost): the copy that now acts moves the
			// pattern on (J4): taking over without forwarding, while the
			// old actor's continuation is refused as superseded (J7),
			// would lose the workflow.
			r.Forward = true
		}
		return r
	}
	return j.record(d)
}

// takeOver makes a passive copy act.
func (j *Join) takeOver(self pack.Peer, why string) Ready {
	j.rec.Role, j.rec.Actor, j.rec.Epoch, j.rec.EpochActor = RoleActing, self, j.rec.Epoch+1, self.ID
	r := none()
	r.Persist, r.Unwatch, r.TookOver = true, true, why
	return j.act(r)
}

// act adds to r what a copy that starts (or resumes) acting must do: move
// a decided join on; for an open one, settle the split first if nobody
// did (no branch started, no result), else start the branches nobody
// holds.
func (j *Join) act(r Ready) Ready {
	switch j.rec.Phase {
	case PhaseDecided:
		r.Forward = true
	case PhaseOpen:
		if !j.rec.SplitSettled {
			if len(j.rec.Started) == 0 && len(j.rec.Results) == 0 && len(j.rec.Split) > 0 {
				r.SettleSplit = true
				return r
			}
			// A branch started or ended: the copy that started it had
			// settled the split.
			j.rec.SplitSettled = true
		}
		r.StartBranches = j.unstarted()
	}
	return r
}

// unstarted lists the branches to dispatch: for FORK and FIRST every
// branch without a start or a result; for FAILOVER the current one if it
// has neither.
func (j *Join) unstarted() []int {
	var out []int
	for i := range j.rec.Branches {
		if j.rec.Kind == pack.FrameFailover && i != j.rec.Next {
			continue
		}
		// A pending start of this very actor (a restart lost its
		// dispatch) is started again; anyone else's start stands.
		if s, ok := j.rec.Started[i]; ok && (s.Holder.ID != "" || s.Token() != j.Token()) {
			continue
		}
		if _, ok := j.rec.Results[i]; ok {
			continue
		}
		out = append(out, i)
	}
	return out
}

// record applies a branch end: the core of J1.
func (j *Join) record(d Deliver) Ready {
	r := none()
	if prev, seen := j.rec.Results[d.Branch]; j.rec.Phase != PhaseOpen || (seen && prev.Attempt >= d.Attempt) || d.Branch < 0 || d.Branch >= len(j.rec.Branches) {
		return r // duplicate, stale or late: already counted
	}
	j.rec.Results[d.Branch] = &Result{OK: d.OK, Error: d.Error, Outputs: d.Outputs, Trace: d.Trace, Attempt: d.Attempt}
	r.Persist = true
	acting := j.Acting()
	total := len(j.rec.Branches)
	var cancel []int
	startNext := false
	switch j.rec.Kind {
	case pack.FrameFork:
		if !d.OK {
			j.decide(false, fmt.Sprintf("FORK branch %d failed: %s", d.Branch+1, d.Error), nil)
			cancel = others(total, d.Branch)
		} else if j.allOK(total) {
			j.decide(true, "", allBranches(total))
		}
	case pack.FrameFirst:
		if d.OK {
			j.decide(true, "", []int{d.Branch})
			cancel = others(total, d.Branch)
		} else if len(j.rec.Results) == total {
			j.decide(false, "every FIRST branch failed: "+j.branchErrors(), nil)
		}
	case pack.FrameFailover:
		switch {
		case d.OK:
			j.decide(true, "", []int{d.Branch})
		case d.Branch == j.rec.Next && j.rec.Next+1 < total:
			j.rec.Next++
			startNext = true
		case d.Branch == j.rec.Next:
			j.decide(false, "every FAILOVER branch failed: "+j.branchErrors(), nil)
		}
	}
	if !acting {
		return r // a passive replica only records
	}
	dd := d
	r.Replicate = &dd
	r.Cancel = cancel
	if startNext {
		r.StartBranches = []int{j.rec.Next}
	}
	r.Forward = j.rec.Phase == PhaseDecided
	return r
}

// allOK reports whether every branch has a successful result.
func (j *Join) allOK(total int) bool {
	if len(j.rec.Results) < total {
		return false
	}
	for i := range total {
		if res, ok := j.rec.Results[i]; !ok || !res.OK {
			return false
		}
	}
	return true
}

func (j *Join) decide(ok bool, msg string, winners []int) {
	j.rec.Phase, j.rec.OK, j.rec.Error, j.rec.Winners = PhaseDecided, ok, msg, winners
}

func allBranches(total int) []int {
	out := make([]int, total)
	for i := range out {
		out[i] = i
	}
	return out
}

func others(total, except int) []int {
	var out []int
	for i := range total {
		if i != except {
			out = append(out, i)
		}
	}
	return out
}

func (j *Join) branchErrors() string {
	var keys []int
	for k := range j.rec.Results {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("branch %d: %s", k+1, j.rec.Results[k].Error))
	}
	return strings.Join(parts, "; ")
}

// Continuation returns what moves on once the pattern is decided: the
// data as at the split plus the winners' outputs, the trace of the split
// and of every branch (in branch order), and the outcome.
func (j *Join) Continuation() (outputs map[string]json.RawMessage, trace []pack.TraceEntry, ok bool, errMsg string) {
	outputs = make(map[string]json.RawMessage, len(j.rec.Outputs))
	for k, v := range j.rec.Outputs {
		outputs[k] = v
	}
	trace = append([]pack.TraceEntry{}, j.rec.Trace...)
	var keys []int
	for k := range j.rec.Results {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		trace = append(trace, j.rec.Results[k].Trace...)
	}
	for _, w := range j.rec.Winners {
		if r := j.rec.Results[w]; r != nil {
			for label, out := range r.Outputs {
				outputs[label] = out
			}
		}
	}
	return outputs, trace, j.rec.OK, j.rec.Error
}

func short(id string) string {
	if len(id) > 12 {
		return "…" + id[len(id)-6:]
	}
	return id
}
