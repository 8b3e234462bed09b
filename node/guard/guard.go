// Package guard is the decision core of a guardian: the copy a peer keeps
// of a step that another peer (the holder) runs, and the rules that say
// what each event does to it. It does no I/O and takes no lock: Step takes
// one event and returns a Ready that says what the node must do, in order
// (the shape of etcd's raft Step/Ready):
//
//  1. persist (Ready.Persist): write the copy, or delete it and write its
//     release tombstone in one transaction — and refuse the event if that
//     fails (the machine is stepped on a clone and kept only once written);
//  2. answer the request that stepped it (Ready.Reply);
//  3. start or stop watching holders (Ready.Watch, Ready.Unwatch);
//  4. start the asynchronous work: re-route (Ready.Reroute), ask the primary
//     guardian (Ready.AskPrimary), tell a superseded holder
//     (Ready.TellSuperseded), release the old attempt's backups
//     (Ready.ReleaseOld), recruit a backup (Ready.RecruitBackup), ask a new
//     holder to beat here (Ready.AddWatcher).
//
// # One key, two records
//
// A [Guard] is one step key (workflow and step path; attempts share it).
// It has at most one live copy (the pack, its holder, the attempt, the
// guardian's role) and at most one tombstone: the newest attempt at which
// the step was released (moved on). The tombstone outlives the copy so a
// late store or release of an older attempt is recognised.
//
// # Invariants
//
// Each rule is stated here with its reason; docs/protocol.md specifies
// them in full, with the failures they prevent.
//
//   - G1 (release or re-route, never both): of a release and a re-route of
//     the same attempt, whichever is stepped first wins. A release that
//     arrives while a re-route is claimed ([Claim] then [Rerouted]), or
//     after a newer attempt was stored or released, is answered Superseded
//     — the receiver that asked refuses its pack, which stops the
//     superseded chain at its next hop (I1 of package node).
//   - G2 (released stays released): a store of an attempt not newer than
//     the tombstone is acknowledged and ignored, so a slow hand-off's copy
//     never resurrects work that moved on.
//   - G3 (one re-route per attempt): only a primary guardian re-routes; a
//     backup asks the primary first and acts only when it cannot be
//     reached or knows nothing of the step (it never heard the holder's
//     ack). A re-route is claimed once per attempt and holder; a second
//     suspicion or hand-back of the same attempt finds nothing to do.
//   - G4 (at most once stays at most once): an at-most-once step whose
//     holder vanished is never re-run: [GiveUp] with Supersede marks the
//     step released past its attempt, so whatever the vanished holder
//     handed on is answered Superseded when it asks for its release.
//   - G5 (durable before answered): every change to the copy or the
//     tombstone is in Ready.Persist and the answer comes after it.
//   - G6 (a probe changes nothing): a Release with Probe set is answered
//     as the release would be (Superseded or not) and changes nothing, so
//     a join or an origin can refuse a superseded chain's branch end or
//     completion before it records it, and still release the guardians
//     only once it has.
//   - G7 (every guardian of a re-routed attempt says so): when the primary
//     re-routes (or gives up on an at-most-once step), it tells the old
//     attempt's other guardians with a Release marked Rerouted; their
//     tombstone then answers a late release of that attempt Superseded,
//     as the primary would, so a successor that reaches only a backup (the
//     primary cut off from it by a partition) still stops the superseded
//     chain. A backup that acts (G3) tells the primary it asked as well:
//     that primary may have no copy yet (it is still handing the step
//     again to the holder, which had taken it first) and would otherwise
//     answer a late release of the old attempt as a plain release, and
//     the old chain would run an at-most-once step a second time.
//   - G8 (one successor per attempt): a release names the successor that
//     took the step's next hop (By; empty when a holder, a join or an
//     origin releases). The tombstone keeps the first successor, and a
//     release of the same attempt by another successor is answered
//     Superseded, naming the first (Reply.Holder): a sender whose hand-off
//     ack was lost (a cut, a stream timeout) and that handed the next step
//     to a second peer starts one chain, not two — the second receiver
//     refuses the pack, and the sender hands it to the first again. A
//     receiver refused that way after other guardians had recorded it
//     gives way (Release.Yield): a tombstone naming it names the first
//     instead, so that two receivers never name each other.
//   - G9 (a guardian past an attempt refuses it): a peer that guards a
//     step and re-routed it past an attempt (or is re-routing it) refuses
//     that attempt when it is handed the step ([Guard.Supersedes]), before
//     it journals it and again after it settled, because the re-route and
//     the late hand-off of the old attempt would otherwise both run the
//     step. A peer handed a newer attempt of a step it guards at an older
//     one ([NewerAttempt]) releases its copy as re-routed at the old
//     attempt: a re-route's target is not told as a guardian, and its copy
//     would otherwise release the old attempt to a holder cut off during
//     the re-route, which would start a second chain.
//   - G10 (a copy of work nobody took is re-routed, not dropped): a holder
//     that answers it never took the attempt ([NeverTook]: it refused the
//     hand-over as unsettled and remembers that) has not moved on, so the
//     primary — the sender, which guards the step there after it gave up
//     handing it to that holder again — re-routes the step as on a
//     hand-back; dropping the copy would lose the step. A backup drops its
//     copy (G11), also one that stood in for a primary it could not reach
//     (G3, [Record.StoodIn]): the refusing holder recruited it while
//     taking the hand-over, and the sender may still be handing the step
//     to another peer, so a backup's re-route could run it twice.
//   - G11 (a refused hand-over leaves no tombstone): a receiver that
//     recruited a backup guardian while taking a hand-over and then
//     refused it (unsettled, taken by another peer first, superseded,
//     interrupted) withdraws that copy ([Withdraw]); so does a backup
//     whose holder answers that it never took the attempt (G10). The copy
//     is dropped and the attempt is not marked as moved on: a tombstone
//     there would tell the step's real guardian, recruiting the same peer
//     as its backup, that the step moved on, and (G2) make the peer ignore
//     a later store of that attempt — losing work nobody ran.
//   - G12 (a superseded chain is not re-routed): before it re-routes, a
//     guardian probes the release of the step before as its copy's holder
//     made it when it took the hand-over (the kept pack's settle items, By
//     the holder; G6). A superseded answer (G1, G8) means the holder
//     refused the hand-over or is refused at its next hop (I1), so the
//     copy is dropped with no tombstone, as a withdrawal (G11), and
//     nothing is re-routed ([ChainSuperseded]). The refusing holder's own
//     withdrawal is one message, lost if the holder is cut off as it
//     refuses; without the probe the backup it recruited would re-run a
//     step whose live chain had already delivered it.
//   - G13 (a release waits while a co-guardian decides a re-route): a
//     guardian about to re-route asks the step's other guardians whether
//     it moved on ([Rerouting]); a copy of that holder's attempt here then
//     answers a release of the attempt (and its probe) Pending for
//     [ReroutingHold], recording nothing. The releasing receiver counts it
//     as no answer, so the step's primary must answer it (superseded, once
//     it claimed) or the hand-over is refused as unsettled and tried
//     again; otherwise a backup answering a plain release between the
//     primary's question and its notice would let a flapping holder start
//     a second chain. The asker's re-route notice (G7) ends the wait; a
//     copy dropped or replaced ends it too. Nothing is dropped on the
//     question, so a primary killed after asking leaves the copy here; the
//     old chain is only delayed by the hold.
//   - G14 (two refused receivers do not swap): two receivers of one
//     attempt that each reached one copy first are each refused at the
//     other's copy and give way where they were recorded (G8); unchecked,
//     the copies would swap names and refuse every later try, and the
//     workflow would be lost. A copy that refused the peer it is asked to
//     give way to gives way only if the yielding peer's ID is the greater:
//     exactly one gives way, and both copies name the smaller. A yield
//     toward a receiver this copy never refused applies (that receiver may
//     have taken the step with the other copies alone).
//   - G15 (a backup does not stand in for a primary that is handing the
//     step on): a primary that keeps no copy because it is still handing
//     the step on — the receiver recruited the backup while taking it, and
//     its ack never reached the sender — answers a backup's question (G3)
//     so (Reply.Handing). The backup watches the holder again and asks
//     later instead of re-routing, because the sender still has the work
//     and hands it to the receiver that took it first (G8) or to another;
//     a re-route would run the step twice. A primary that cannot be
//     reached, or that knows nothing and hands nothing on, is stood in
//     for. A primary whose copy is of an older attempt than the backup's
//     (it is re-routing the step to the backup's holder) is not followed
//     back to the old holder: the backup watches its own holder again.
//   - G16 (a tombstone names who released it and what it took): a
//     successor's release carries the key of the work it is taking
//     (Release.ByKey), kept in the tombstone with its name, and a
//     restarted holder that asks about that attempt ([Guard.Owner]) is
//     told both. A release is recorded before the successor decides
//     whether it takes the hand-over and cannot always be undone when it
//     refuses, so "moved on" alone would make a restarted holder drop work
//     nobody holds; the holder asks the successor first (node/held H7).
//     testdata/owner-successor.txt.
//   - G17 (a successor's release is confirmed before the copy goes): a
//     live copy released by a named successor (By and ByKey set) is kept
//     beside the tombstone as pending ([Guard.Pending]; journaled by the
//     release's own write, PersistForgetPending, its end riding a later
//     write, Ready.PendingGone) and its holder stays watched, until the
//     holder is seen without the work ([HolderLetGo], or MovedOn) or the
//     successor says it took it ([SuccessorTook]). Only a positive word
//     counts: a beat that merely does not list the key may have been
//     written before the holder started beating for the work. A holder
//     that goes silent first gets the successor asked (Ready.AskSuccessor):
//     took it, the copy goes; never took it, the copy is live again and
//     re-routed as a silent holder's; no answer within [SuccessorGrace],
//     the copy goes. A co-guardian asked before a re-route ([Rerouting])
//     names the successor and its work (Reply.Holder, TookKey), so the
//     asker counts the release as moved on only if the successor does not
//     deny it (node: askCoGuardians); a backup whose primary answers
//     "released by this successor" ([Guard.AskedByBackup]) keeps its copy
//     pending and asks that successor too. Dropping the copy with the
//     release would leave nobody to re-route the step of a sender killed
//     after its receiver refused the hand-over. testdata/pending.txt,
//     testdata/pending-backup.txt.
//   - G18 (a record's probe holds a re-route off): a join or an origin
//     probes the release of a chain's last step before it records the
//     chain's next hop (a branch end, a completion; G6), and releases the
//     guardians only once it has. A live copy that answers such a probe
//     (Release.Recording) not superseded holds its re-route off until the
//     release drops it, or for [RecordingHold]: a Claim meanwhile is not
//     granted (Ready.RecordingUntil; the node asks again after), and a
//     co-guardian about to re-route ([Rerouting]) or a backup asking its
//     primary ([Guard.AskedByBackup]) is told (Reply.Recording) and waits
//     too. Otherwise a re-route claimed between the probe and the record
//     runs the step again after the old chain's branch end was recorded.
//     testdata/recording.txt; node:
//     TestAGuardianWaitsForTheRecordItsProbeAnswered; testnet:
//     TestACompletionBeingRecordedIsNotRunAgain,
//     TestABranchEndBeingRecordedIsNotRunAgain.
//   - G19 (one guardian re-routes): a backup that stood in for a primary
//     it could not reach (G3) still asks that primary in its last
//     questions before the claim (node: askCoGuardians). A primary that
//     answers with a live copy of the same holder's attempt is alive and
//     acts: the copy is a backup again and watches the holder
//     ([PrimaryGuards]); so it is when the primary asked this copy before
//     re-routing that attempt within [ReroutingHold] (a Claim then is not
//     granted). A guardian that has claimed says so to a co-guardian that
//     asks (Reply.Rerouting), which waits for its notice (G7) rather than
//     re-route too; and a co-guardian's live copy of a later attempt means
//     the step was re-routed past this one (moved on). Otherwise a primary
//     and its backup that each missed the other's first answer (a mute
//     connection after a one-way cut healed) would both re-route, and an
//     at-most-once step would run twice. testdata/stood-in.txt; node:
//     TestAStoodInBackupStepsBackForItsPrimary.
//   - G20 (a re-route is settled at the other guardians): the first
//     receiver of a re-routed pack settles the re-route, before it
//     acknowledges, at the attempt's other guardians (a Release marked
//     Rerouted, naming its Rerouter; pack.SettleRerouted, lenient: they
//     may have died with the holder). A guardian that re-routed the
//     attempt itself, or claimed to, answers it Superseded (G1), so the
//     receiver refuses the pack and the re-router drops its copy, marked
//     re-routed ([RerouteRefused]); of two claims, a backup that stood in
//     (G3) gives way to its primary's settle instead, so one chain goes on
//     whichever settle comes first. Without the settle, a primary and its
//     backup cut only from each other would both re-route and both chains
//     go on. A copy of the newer attempt that names the re-router as its
//     primary, or as its holder (the re-route's receiver, or the re-router
//     that took the pack itself, recruited this peer before its settle got
//     here), answers it without a change, since refusing a re-route's own
//     backup's settle would lose the workflow; a store of a newer attempt
//     ends a stood-in backup's claim if its primary re-routed, and is
//     refused by any other claim. The node checks a claim still stands
//     ([Guard.Reroutes]) right before it hands the re-routed pack on, so a
//     backup that gave way meanwhile sends nothing; and a receiver holding
//     the attempt re-routed by one guardian refuses it re-routed by
//     another (node: TestASecondRerouteOfAnAttemptHeldHereIsRefused).
//     testdata/reroute-fence.txt; testnet:
//     TestNetnsGuardiansCutFromEachOtherRerouteOnce.
//   - G21 (a re-route of an attempt that moved on is refused): a release
//     of an attempt is confirmed when it names no successor (a holder's
//     own after its hand-off was taken, a join's or an origin's after its
//     record, a move-on) or when its pending copy (G17) went because the
//     holder let go of the work, said it moved on, or the successor said
//     it took it — not after SuccessorGrace without an answer, nor when
//     this guardian kept no copy to keep pending, nor when a copy of a
//     newer attempt replaced the pending one before any word came
//     ([Mark].Unconfirmed). A re-route's settle (G20) that finds its
//     attempt released and confirmed is answered Superseded: the receiver
//     refuses the pack and the re-router drops its copy, because a primary
//     cut from its backup and from the successor (so that it missed the
//     release) would otherwise re-route a step that moved on, and the
//     at-most-once step after it would run twice. A release not confirmed
//     yet still lets the re-route go on (G7 over G17): the successor may
//     have refused the hand-over, and the re-route be the only chain left.
//     So when the re-route's receiver stores its backup copy here before
//     its settle comes (the newer attempt replaces the pending copy), the
//     tombstone says unconfirmed, in the same write as the new copy
//     (PersistSaveMark). testdata/moved-on-reroute.txt; a restart keeps
//     pending copies: TestARestartedGuardianStillAsksAboutItsPendingCopy;
//     testnet: TestNetnsAGuardianCutOffDoesNotRerouteAStepThatMovedOn.
//
// The node owns persistence, the network and timers; the scripted tests in
// testdata/*.txt drive the machine and show each decision (go test
// ./node/guard -update rewrites them after a deliberate rule change).
package guard

import (
	"fmt"
	"slices"
	"time"

	"github.com/bedwe/bedwe/pack"
)

// Role says which guardian of a step acts first.
type Role uint8

// The roles.
const (
	// RolePrimary re-routes when the holder goes silent.
	RolePrimary Role = iota + 1
	// RoleBackup waits for the primary and asks it first.
	RoleBackup
)

func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleBackup:
		return "backup"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Record is a guardian's live copy of a step held elsewhere, as journaled.
type Record struct {
	Key     string    `cbor:"1,keyasint"`
	Pack    []byte    `cbor:"2,keyasint"`
	Holder  pack.Peer `cbor:"3,keyasint"`
	Attempt int       `cbor:"4,keyasint"`
	Role    Role      `cbor:"5,keyasint"`
	Primary pack.Peer `cbor:"6,keyasint,omitempty"`
	// Tried lists holders that went silent on this step: never again.
	Tried []string  `cbor:"7,keyasint,omitempty"`
	Since time.Time `cbor:"8,keyasint"`
	// Backups are the other guardians a primary copy told about.
	Backups []pack.Peer `cbor:"9,keyasint,omitempty"`
	// Stood in: a backup copy that acts as the primary (G3: its primary
	// was gone, or did not know the step). It is still the copy the
	// holder stored while taking the hand-over, so a holder that never
	// took it withdraws it (G10), as from any backup.
	StoodIn bool `cbor:"10,keyasint,omitempty"`
	// RestoredAt: when this copy was live again after its release, the
	// successor having said it never took the work (G17).
	RestoredAt time.Time `cbor:"11,keyasint,omitempty"`
}

// OtherGuardians are the peers told when this copy's attempt is re-routed
// or given up (G7): the backups a primary copy knows of, and the primary
// a backup that acts (G3) asked — which kept no copy, or had none yet
// (still handing the step to the holder again, G8), and would otherwise
// answer a late release of the old attempt as a plain release.
func (r *Record) OtherGuardians() []pack.Peer {
	out := slices.Clone(r.Backups)
	if p := r.Primary; p.ID != "" && p.ID != r.Holder.ID && !slices.ContainsFunc(out, func(x pack.Peer) bool { return x.ID == p.ID }) {
		out = append(out, p)
	}
	return out
}

func (r *Record) clone() *Record {
	c := *r
	c.Tried = slices.Clone(r.Tried)
	c.Backups = slices.Clone(r.Backups)
	return &c
}

// Mark is a release tombstone: the step moved on at Attempt, or (Rerouted)
// Attempt was re-routed by the primary and a release of it is superseded.
type Mark struct {
	At       time.Time `cbor:"1,keyasint"`
	Attempt  int       `cbor:"2,keyasint"`
	Rerouted bool      `cbor:"3,keyasint,omitempty"`
	// By is the successor whose release raised the mark (G8).
	By string `cbor:"4,keyasint,omitempty"`
	// ByKey is the work By took (a held key), for a restarted holder to
	// ask it about (G16).
	ByKey string `cbor:"5,keyasint,omitempty"`
	// Unconfirmed: the release By made was never confirmed (G17): this
	// guardian kept no live copy of the attempt to keep pending, or
	// dropped its pending copy without an answer (SuccessorGrace) or on
	// an answer too late to trust. A release with no By is confirmed by
	// what raised it (a holder's release after its hand-off was taken, a
	// join's or an origin's after its record, a move-on), and one with a
	// By whose pending copy went because the holder let go of the work,
	// said it moved on, or By said it took it is confirmed. A re-route of
	// an attempt whose release is confirmed is refused (G21).
	Unconfirmed bool `cbor:"6,keyasint,omitempty"`
	// Pending: the journaled live copy of Attempt became the pending copy
	// (G17, PersistForgetPending), and stays so until its journal entry
	// goes. Not cleared in the journal when the pending copy goes (its
	// entry's delete is what ends it there, Ready.PendingGone).
	Pending bool `cbor:"7,keyasint,omitempty"`
}

// Guard is everything one guardian knows of one step key.
type Guard struct {
	key  string
	copy *Record
	mark *Mark
	// rerouting is set between Claim and its end (Rerouted, GiveUp,
	// Aborted). It is not persisted: a restarted guardian re-routes anew.
	rerouting bool
	// asked: a co-guardian asked before re-routing the copy's attempt
	// (G13). Not persisted either: the hold is short, and a restarted
	// guardian answered nothing meanwhile.
	asked askedReroute
	// refused are the successors this copy refused as second receivers
	// of the tombstone's attempt (G8), for G14. Not persisted: after a
	// restart a yield applies without G14's tie-break.
	refused refusedSuccessors
	// pending is the copy a named successor released, kept until the
	// release is confirmed (G17). Journaled: the live copy's entry stays,
	// and the tombstone says it is pending (Mark.Pending,
	// PersistForgetPending); its end is journaled lazily
	// (Ready.PendingGone): a restarted guardian that lost that write asks
	// again.
	pending *Record
	// askedTook: the successor was asked about pending since (zero: not
	// asked yet).
	askedTook time.Time
	// recording: a join or an origin probed a release of the copy's
	// attempt to record the chain's next hop (G18). Not persisted: the
	// hold is short, and a restart takes longer than a record.
	recording recordingHold
}

// RecordingHold is how long a copy holds its re-route off after a join or
// an origin probed a release of its attempt before recording the chain's
// next hop (G18): far longer than a record and its release take; the
// release ends the hold at once.
const RecordingHold = 15 * time.Second

// recordingHold is a join's or an origin's probe before it records (G18).
type recordingHold struct {
	attempt int
	until   time.Time
}

// recordingUntil reports until when a re-route of attempt at at must wait
// for a join or an origin recording its next hop (G18); zero when not.
func (g *Guard) recordingUntil(attempt int, at time.Time) time.Time {
	if g.copy == nil || g.copy.Attempt != attempt || g.recording.until.IsZero() ||
		g.recording.attempt != attempt || !at.Before(g.recording.until) {
		return time.Time{}
	}
	return g.recording.until
}

// SuccessorGrace is how long a guardian waits for the successor named by
// a pending copy's release to say whether it took the work, once the
// holder went silent, before it drops the copy (the release unconfirmed).
const SuccessorGrace = time.Minute

// NeverTookTrust is how old a release may be for its successor's "never
// took the work" to be believed (G17): a successor remembers work it
// handed on for 30 minutes (node: handedOnMemory), and a refused hand-over is
// tried again within seconds, so an answer about an older release is
// read as no answer — the copy goes, as with no answer at all, rather
// than start a second chain from a forgotten hand-on.
const NeverTookTrust = 10 * time.Minute

// refusedSuccessors are the receivers a tombstone of attempt refused,
// naming its first successor (G8).
type refusedSuccessors struct {
	attempt int
	peers   []string
}

func (r refusedSuccessors) has(attempt int, peer string) bool {
	return r.attempt == attempt && slices.Contains(r.peers, peer)
}

// ReroutingHold is how long a copy answers releases of its attempt
// Pending after a co-guardian asked about it before re-routing it (G13):
// longer than a re-route's hand-off usually takes, after which the asker's
// notice (G7) makes the answer Superseded.
const ReroutingHold = 15 * time.Second

// askedReroute is a co-guardian's question before a re-route (G13).
type askedReroute struct {
	by      string
	attempt int
	until   time.Time
}

// holds reports whether a release of attempt at at must wait (G13).
func (g *Guard) holds(attempt int, at time.Time) bool {
	return g.copy != nil && !g.rerouting && g.asked.by != "" && g.asked.attempt == attempt &&
		g.copy.Attempt == attempt && at.Before(g.asked.until)
}

// New returns an empty guard for key.
func New(key string) *Guard { return &Guard{key: key} }

// Restore rebuilds a guard from its journaled records (either may be nil).
//
// pending is the journaled pending copy (G17), if any: kept only beside a
// tombstone of its attempt that names its successor (its end may not have
// been journaled yet; such a copy is stale and dropped, see
// [Guard.Pending]). A restored pending copy's holder is watched again, and
// the successor asked once that holder is silent, as before the restart.
func Restore(key string, rec *Record, mark *Mark, pending *Record) *Guard {
	g := &Guard{key: key, mark: mark}
	if rec != nil {
		g.copy = rec.clone()
	}
	if pending != nil && g.pendingBacked(pending) {
		g.pending = pending.clone()
	}
	return g
}

// pendingBacked reports whether p may be pending here: no live copy, and
// a tombstone of p's attempt, not re-routed, naming the successor that
// released it.
func (g *Guard) pendingBacked(p *Record) bool {
	return g.copy == nil && g.mark != nil && g.mark.Attempt == p.Attempt && !g.mark.Rerouted && g.mark.By != ""
}

// Clone returns a deep copy; the node steps a clone and keeps it once its
// effects are persisted.
func (g *Guard) Clone() *Guard {
	c := *g
	if g.copy != nil {
		c.copy = g.copy.clone()
	}
	// pending is never changed in place: shared.
	if g.mark != nil {
		m := *g.mark
		c.mark = &m
	}
	c.refused.peers = slices.Clone(g.refused.peers)
	return &c
}

// Key is the step key.
func (g *Guard) Key() string { return g.key }

// Copy returns the live copy (nil when there is none). Do not modify it.
func (g *Guard) Copy() *Record { return g.copy }

// Mark returns the release tombstone (nil when there is none).
func (g *Guard) Mark() *Mark { return g.mark }

// Pending returns the copy released by a successor that has not been
// confirmed yet (G17; nil when there is none). Do not modify it.
func (g *Guard) Pending() *Record { return g.pending }

// Watched returns the copy whose holder this guard watches: the live copy,
// else the pending one (nil when there is neither).
func (g *Guard) Watched() *Record {
	if g.copy != nil {
		return g.copy
	}
	return g.pending
}

// Reroutes reports whether this guard's claim to re-route holder's
// attempt still stands: the live copy is of that attempt and claimed
// (Claim), and nothing ended the claim since (a stood-in backup gives way
// to its primary's re-route, G20).
func (g *Guard) Reroutes(holder string, attempt int) bool {
	return g.copy != nil && g.rerouting && g.copy.Holder.ID == holder && g.copy.Attempt == attempt
}

// Empty reports whether the guard holds neither a copy nor a tombstone.
func (g *Guard) Empty() bool { return g.copy == nil && g.mark == nil && g.pending == nil }

// Holds reports whether the live copy, or the pending one (G17), is of
// work held by holder: its silence concerns this guard.
func (g *Guard) Holds(holder string) bool {
	r := g.Watched()
	return r != nil && r.Holder.ID == holder
}

// Persist says what to write before anything else is done.
type Persist uint8

// The persist kinds.
const (
	PersistNone Persist = iota
	// PersistSave writes the live copy.
	PersistSave
	// PersistForget deletes the live copy and writes the tombstone, in one
	// transaction.
	PersistForget
	// PersistDropMark deletes the tombstone (pruned).
	PersistDropMark
	// PersistDelete deletes the live copy and leaves the tombstone as it
	// is (G11: a copy withdrawn by a holder that never took the step).
	PersistDelete
	// PersistRestore writes the live copy and deletes the tombstone and
	// the pending copy, in one transaction (G17: the successor never took
	// the work).
	PersistRestore
	// PersistForgetPending writes the tombstone and keeps the live copy's
	// journal entry as the pending copy ([Guard.Pending]), marked so in
	// the same transaction (G17): a restarted guardian still asks the
	// successor about it.
	PersistForgetPending
	// PersistSaveMark writes the live copy and the tombstone, in one
	// transaction (G21: a copy of a newer attempt replaced a pending copy
	// whose release was never confirmed, and the tombstone says so).
	PersistSaveMark
)

// Reply is the answer to the request that stepped the guard (or to a
// query).
type Reply struct {
	OK, Known, Released, Superseded bool
	// Pending: a co-guardian is deciding whether to re-route this
	// attempt; nothing was recorded, ask the step's primary (G13).
	Pending bool
	// Handing (a primary's answer to its backup): it keeps no copy
	// because it is handing the step on at that attempt right now (G15).
	Handing bool
	// Recording (an answer to a co-guardian about to re-route, or to a
	// backup asking its primary): a join or an origin is recording this
	// attempt's next hop; wait rather than re-route (G18).
	Recording bool
	// Rerouting (an answer to a co-guardian about to re-route): this
	// guardian has claimed the re-route of the asked attempt already;
	// wait for its notice (G7) rather than re-route too (G19).
	Rerouting bool
	Attempt   int
	Holder    pack.Peer
	// TookKey (Owner): the work the successor Holder took when it
	// released this attempt (G16).
	TookKey string
	Error   string
}

// Order asks the node to re-route the copy: check that the workflow has
// not ended, then Claim, hand the pack to a peer outside Tried and the
// silent Holder with attempt+1, and step Rerouted (or GiveUp / Aborted).
type Order struct {
	Pack    []byte
	Holder  pack.Peer
	Attempt int
	Tried   []string
	Since   time.Time
	Why     string
	// Handback: the holder asked for the re-route itself (it drains
	// before a power cut): it is alive, nothing needs checking first.
	Handback bool
}

// Ask asks the node to wait for the primary guardian, then ask it about
// the key and step PrimaryAnswer (with Why, for a re-route).
type Ask struct {
	Primary pack.Peer
	Silent  string
	Attempt int
	Why     string
}

// Notice tells a peer the key moved on to Attempt.
type Notice struct {
	Peer    pack.Peer
	Attempt int
}

// ReleaseOld releases the backups of a superseded attempt, marking it
// re-routed there (a Release with Rerouted set, G7).
type ReleaseOld struct {
	Peers   []pack.Peer
	Attempt int
}

// Ready is what one step asks the node to do, in field order.
type Ready struct {
	Persist Persist
	Reply   *Reply
	// Watch: holders to watch; Unwatch: holders no longer watched for this
	// key (the node unwatches those nothing else needs).
	Watch   []pack.Peer
	Unwatch []string
	// Claimed: the node may go on with the re-route (or redispatch) it
	// claimed. Dropped: the copy was dropped (MovedOn).
	Claimed, Dropped bool
	Reroute          *Order
	AskPrimary       *Ask
	TellSuperseded   *Notice
	ReleaseOld       *ReleaseOld
	RecruitBackup    bool
	// AddWatcher: ask this holder to beat to this guardian at the attempt.
	AddWatcher *Notice
	// AskSuccessor: ask the successor that released the pending copy
	// whether it took the work, and step SuccessorTook (G17).
	AskSuccessor *AskTook
	// RecordingUntil (a Claim not granted): a join or an origin is
	// recording the attempt's next hop; ask the step's questions again
	// after this time, then Claim again (G18).
	RecordingUntil time.Time
	// PendingGone: this pending copy went (its release confirmed, or
	// nothing backs it any more). The node deletes its journal entry
	// with a later write rather than a commit of its own (one fewer
	// fsync a hop): lost to a crash, the entry comes back as pending and
	// is asked about again, or is stale and dropped (Restore).
	PendingGone *Record
}

// AskTook asks Successor whether it took Key (its held key), the work it
// released Holder's Attempt for.
type AskTook struct {
	Successor pack.Peer
	Key       string
	Holder    string
	Attempt   int
	// Again: asked before without an answer; wait a while first.
	Again bool
}

// Event is something that happened to a guard.
type Event interface{ isEvent() }

// Store: this peer guards Pack, held by Holder at Attempt (a hand-off it
// made, as primary, or a primary asking it to be a backup). Recruit asks
// for a backup to be recruited when Backups is empty.
type Store struct {
	Pack    []byte
	Holder  pack.Peer
	Attempt int
	Role    Role
	Primary pack.Peer
	Tried   []string
	Backups []pack.Peer
	Recruit bool
	At      time.Time
}

// Release: the holder (or its successor) moved the step on at Attempt.
// Probe asks what a release would be answered without releasing anything
// (a join or an origin asks before it records a branch end or a
// completion, so that it can refuse a superseded chain's, G6). Rerouted
// comes from the primary guardian: Attempt was re-routed, so a later
// release of it is answered Superseded (G7).
//
// By names the successor that releases (G8): empty from holders, joins
// and origins.
type Release struct {
	Attempt  int
	At       time.Time
	Probe    bool
	Rerouted bool
	By       string
	// ByKey: the work By took (its held key), kept with By in the
	// tombstone and named to a restarted holder that asks (G16).
	ByKey string
	// Yield: the successor Yield was refused elsewhere (By took the
	// attempt first) and gives way; a tombstone naming Yield names By
	// instead (G8). Nothing else changes.
	Yield string
	// Recording, with Probe: a join or an origin asks before it records
	// the chain's next hop (a branch end, a completion), and releases
	// once it has. A live copy of the attempt that answers not superseded
	// holds its re-route off for RecordingHold (G18).
	Recording bool
	// Rerouter, with Rerouted: the guardian that re-routed Attempt (G7's
	// notice, or the settle of the re-routed pack's receiver). A stood-in
	// backup re-routing the attempt gives way to its primary's (G20).
	Rerouter string
}

// MovedOn: the step is known to have moved on at Attempt while Holder held
// it (the holder said it no longer holds it, or the workflow ended).
type MovedOn struct {
	Holder  string
	Attempt int
	At      time.Time
}

// Silent: the failure detector suspects Holder.
type Silent struct {
	Holder string
	Why    string
}

// Handback: the holder From asks for the step at Attempt to be re-routed
// (its zone goes dark before the step would end).
type Handback struct {
	From    string
	Attempt int
	Why     string
}

// PrimaryAnswer: what the primary guardian said of the key (Reached false:
// it could not be asked), after Silent made a backup Ask.
type PrimaryAnswer struct {
	Silent  string
	Attempt int
	Reached bool
	Reply   Reply
	Why     string
	At      time.Time
}

// Claim: the node starts the re-route of Holder's attempt it was ordered.
type Claim struct {
	Holder  string
	Attempt int
	At      time.Time
}

// ClaimDispatch: the node takes over the origin's first pack (its head is
// a pattern, not a step) to dispatch it itself with attempt+1.
type ClaimDispatch struct {
	Holder  string
	Attempt int
	At      time.Time
}

// Rerouted: the claimed re-route handed the pack (Pack, Attempt) to Target
// (Local: this peer), which recruited Backups.
type Rerouted struct {
	Target  pack.Peer
	Local   bool
	Pack    []byte
	Attempt int
	Backups []pack.Peer
	At      time.Time
}

// GiveUp: the claimed re-route cannot go on (no peer could take it, or the
// step is at-most-once); the node fails the branch. Supersede marks the
// step released past the attempt (G4).
type GiveUp struct {
	Supersede bool
	At        time.Time
}

// Aborted: the claimed re-route stopped (the workflow was cancelled or the
// node is stopping) without a decision.
type Aborted struct{}

// BackupAdded: Peer agreed to guard the copy at Attempt too.
type BackupAdded struct {
	Peer    pack.Peer
	Attempt int
}

// Prune: forget a tombstone older than Before (a copy is never pruned).
type Prune struct{ Before time.Time }

// NeverTook: asked to take this peer as its watcher, Holder answered that
// it never took the step at Attempt (it refused the hand-over as
// unsettled, after it had registered as the successor with some
// guardians of the step before), so nothing moved on from it either (G10).
type NeverTook struct {
	Holder  string
	Attempt int
	Why     string
	At      time.Time
}

// NewerAttempt: this peer was handed Attempt of the step (it is a
// re-route's target, which no guardian tells as one). A copy of an older
// attempt was re-routed, whoever told whom: it is released as the
// primary's "re-routed" release would (G9).
type NewerAttempt struct {
	Attempt int
	At      time.Time
}

// Withdraw: Holder stored this copy while it was taking the hand-over of
// the step at Attempt (a holder's backup) and then refused that hand-over
// (unsettled, taken by another peer first, superseded, interrupted):
// nothing moved on from it, so the copy naming it is dropped and no
// tombstone is written (G11).
type Withdraw struct {
	Holder  string
	Attempt int
}

// Rerouting: From, another guardian of the step, asks whether Holder's
// Attempt moved on before it re-routes it. A copy of that attempt here
// answers releases of it Pending until At+ReroutingHold (G13).
type Rerouting struct {
	From    string
	Holder  string
	Attempt int
	At      time.Time
}

// ChainSuperseded: a guardian of the step before, asked as the copy's
// Holder asked when it took the hand-over at Attempt (a probe of that
// release, G6), answered superseded: a guardian re-routed the step before
// past this chain's attempt, or another successor took it first. The
// holder refused that hand-over or is refused at its next hop, so
// nothing moves on from this copy (G12).
type ChainSuperseded struct {
	Holder  string
	Attempt int
}

// PrimaryGuards: a backup that stood in for its primary (G3) reached that
// primary in its last questions before re-routing, and the primary still
// guards Holder's Attempt with a live copy: the primary acts; this copy is
// a backup again and watches the holder (G19).
type PrimaryGuards struct {
	Holder  string
	Attempt int
}

// RerouteRefused: the claimed re-route's receiver refused the pack as
// superseded: another guardian of the step re-routed the attempt first
// and answered its settle so (G20). The copy goes, marked re-routed;
// nothing is re-routed or given up here.
type RerouteRefused struct {
	Attempt int // the attempt whose re-route was claimed
	At      time.Time
}

// HolderLetGo: Holder let go of Attempt of the step (its beats say so,
// after it handed the step on): a pending copy of that attempt of its
// work is dropped (G17).
type HolderLetGo struct {
	Holder  string
	Attempt int
}

// Took is what a successor said of the work it released a step for.
type Took uint8

// What a successor can say.
const (
	// TookUnknown: no answer, or it is still taking the work.
	TookUnknown Took = iota
	// TookKnown: it holds the work, or ran it and handed it on.
	TookKnown
	// TookNever: it holds nothing and remembers nothing of the work.
	TookNever
)

// SuccessorTook: Successor, asked (Ready.AskSuccessor) about Holder's
// Attempt, answered Said; At is when.
type SuccessorTook struct {
	Successor string
	Holder    string
	Attempt   int
	Said      Took
	Why       string
	At        time.Time
}

func (HolderLetGo) isEvent()     {}
func (RerouteRefused) isEvent()  {}
func (SuccessorTook) isEvent()   {}
func (Store) isEvent()           {}
func (Release) isEvent()         {}
func (MovedOn) isEvent()         {}
func (Silent) isEvent()          {}
func (Handback) isEvent()        {}
func (PrimaryAnswer) isEvent()   {}
func (Claim) isEvent()           {}
func (ClaimDispatch) isEvent()   {}
func (Rerouted) isEvent()        {}
func (GiveUp) isEvent()          {}
func (Aborted) isEvent()         {}
func (BackupAdded) isEvent()     {}
func (Prune) isEvent()           {}
func (NewerAttempt) isEvent()    {}
func (NeverTook) isEvent()       {}
func (ChainSuperseded) isEvent() {}
func (Withdraw) isEvent()        {}
func (Rerouting) isEvent()       {}
func (PrimaryGuards) isEvent()   {}

// Supersedes reports whether this guardian knows the step moved past
// attempt by a re-route: it guards a newer attempt, is re-routing attempt
// now, or its tombstone is of a newer attempt or of attempt re-routed. A
// peer handed attempt of the step refuses it then (G9).
func (g *Guard) Supersedes(attempt int) bool {
	switch {
	case g.copy != nil:
		return g.copy.Attempt > attempt || (g.rerouting && g.copy.Attempt == attempt)
	case g.mark != nil:
		return g.mark.Attempt > attempt || (g.mark.Rerouted && g.mark.Attempt == attempt)
	}
	return false
}

// Status answers a co-guardian's question about the key.
func (g *Guard) Status() Reply {
	switch {
	case g.copy != nil:
		return Reply{OK: true, Known: true, Holder: g.copy.Holder, Attempt: g.copy.Attempt}
	case g.mark != nil:
		return Reply{OK: true, Known: true, Released: true, Attempt: g.mark.Attempt}
	}
	return Reply{OK: true}
}

// Owner answers a restarted holder from asking whether its attempt still
// owns the step: Superseded when a newer attempt is guarded, or this
// attempt is guarded as held by another peer.
//
// A tombstone of that very attempt that names its successor and the work
// it took names them too (Holder, TookKey): a release is recorded before
// the successor decides whether it takes the hand-over, so the holder
// asks the successor before it drops its step (G16).
func (g *Guard) Owner(from string, attempt int) Reply {
	r := g.Status()
	if g.copy != nil {
		r.Superseded = g.copy.Attempt > attempt || (g.copy.Attempt == attempt && g.copy.Holder.ID != from)
	}
	if m := g.mark; g.copy == nil && m != nil && m.Attempt == attempt && !m.Rerouted && m.By != "" && m.ByKey != "" {
		r.Holder, r.TookKey = pack.Peer{ID: m.By}, m.ByKey
	}
	return r
}

// AskedByBackup answers a backup guardian whose holder went silent and
// that asks this primary about the holder's attempt (G3): Status, and when
// a tombstone of that very attempt names the successor that released it
// and the work it took, those too (Holder, TookKey), as Rerouting and
// Owner do. Such a release may not be confirmed yet (G17: the successor
// may have refused the hand-over after it was recorded), so the backup
// keeps its copy as pending and asks that successor rather than drop it.
// A join or an origin recording that attempt's next hop (G18) is said too
// (Recording): the backup waits, as this primary does.
func (g *Guard) AskedByBackup(holder string, attempt int, at time.Time) Reply {
	r := g.Status()
	if m := g.mark; g.copy == nil && m != nil && m.Attempt == attempt && !m.Rerouted && m.By != "" && m.ByKey != "" {
		r.Holder, r.TookKey = pack.Peer{ID: m.By}, m.ByKey
	}
	r.Recording = !g.recordingUntil(attempt, at).IsZero()
	return r
}

// Step applies one event and returns what the node must do.
func (g *Guard) Step(ev Event) Ready {
	before := g.pending
	rd := g.step(ev)
	g.keepPending(&rd)
	if before != nil && (g.pending == nil || g.pending.Attempt != before.Attempt) {
		rd.PendingGone = before
	}
	return rd
}

// keepPending drops a pending copy (G17) that nothing backs any more: a
// live copy is back (a newer attempt stored, or the copy restored), or the
// tombstone it was kept beside is gone, re-routed or of another attempt.
func (g *Guard) keepPending(rd *Ready) {
	p := g.pending
	if p == nil {
		return
	}
	if g.pendingBacked(p) {
		return
	}
	g.pending, g.askedTook = nil, time.Time{}
	if !slices.Contains(rd.Unwatch, p.Holder.ID) {
		rd.Unwatch = append(rd.Unwatch, p.Holder.ID)
	}
}

// dropPending drops the pending copy, its release confirmed or (after
// SuccessorGrace without an answer, or a "never took" too late to trust)
// taken as moved on unconfirmed. A confirmed drop is journaled with a
// later write (Ready.PendingGone); an unconfirmed one, rare, at once,
// with the tombstone that says so.
func (g *Guard) dropPending(confirmed bool) Ready {
	h := g.pending.Holder.ID
	g.pending, g.askedTook = nil, time.Time{}
	rd := Ready{Unwatch: []string{h}, Dropped: true}
	if g.mark != nil {
		g.mark.Pending = false
		if !confirmed {
			g.mark.Unconfirmed = true
			rd.Persist = PersistForget
		}
	}
	return rd
}

// releaseConfirmed reports whether the tombstone's release is confirmed
// (G21): no copy is pending on it, and it names no successor or that
// successor's release was confirmed (G17).
func (g *Guard) releaseConfirmed() bool {
	return g.mark != nil && g.pending == nil && (g.mark.By == "" || !g.mark.Unconfirmed)
}

// askSuccessor asks the successor that released the pending copy whether
// it took the work.
func (g *Guard) askSuccessor() Ready {
	return Ready{AskSuccessor: &AskTook{Successor: pack.Peer{ID: g.mark.By}, Key: g.mark.ByKey, Holder: g.pending.Holder.ID, Attempt: g.pending.Attempt}}
}

// silent is what a silent holder's live copy asks for: a backup asks the
// primary first (G3), a primary re-routes.
func (g *Guard) silent(why string) Ready {
	if g.copy.Role == RoleBackup {
		return Ready{AskPrimary: &Ask{Primary: g.copy.Primary, Silent: g.copy.Holder.ID, Attempt: g.copy.Attempt, Why: why}}
	}
	return Ready{Reroute: g.order(why)}
}

// successorTook applies what the successor of a pending copy said (G17).
func (g *Guard) successorTook(e SuccessorTook) Ready {
	p := g.pending
	if p == nil || p.Holder.ID != e.Holder || p.Attempt != e.Attempt {
		return Ready{}
	}
	if e.Successor != g.mark.By {
		// The tombstone names another successor since (a yield, G8):
		// ask that one.
		return g.askSuccessor()
	}
	switch e.Said {
	case TookKnown:
		return g.dropPending(true)
	case TookNever:
		if e.At.Sub(g.mark.At) > NeverTookTrust {
			return g.dropPending(false)
		}
		// The successor refused the hand-over after its release was
		// recorded, and the holder is silent: nobody else holds the work.
		// The copy is live again (the tombstone goes: nothing moved on)
		// and handled as a silent holder's.
		g.copy, g.pending, g.mark, g.askedTook = p.clone(), nil, nil, time.Time{}
		g.copy.RestoredAt = e.At
		rd := g.silent(e.Why)
		rd.Persist = PersistRestore
		return rd
	}
	if g.askedTook.IsZero() {
		g.askedTook = e.At
	}
	if e.At.Sub(g.askedTook) >= SuccessorGrace {
		// No answer for so long: dropped with the release, unconfirmed.
		return g.dropPending(false)
	}
	rd := g.askSuccessor()
	rd.AskSuccessor.Again = true
	return rd
}

func (g *Guard) step(ev Event) Ready {
	switch e := ev.(type) {
	case HolderLetGo:
		if g.pending == nil || g.pending.Holder.ID != e.Holder || g.pending.Attempt != e.Attempt {
			return Ready{}
		}
		return g.dropPending(true)
	case SuccessorTook:
		return g.successorTook(e)
	case Store:
		return g.store(e)
	case Release:
		return g.release(e)
	case MovedOn:
		if p := g.pending; g.copy == nil && p != nil && p.Holder.ID == e.Holder && p.Attempt == e.Attempt {
			return g.dropPending(true)
		}
		if g.copy == nil || g.copy.Holder.ID != e.Holder || g.copy.Attempt != e.Attempt || g.rerouting {
			return Ready{}
		}
		rd := g.forget(e.Attempt, e.At)
		rd.Dropped = true
		return rd
	case Silent:
		if p := g.pending; g.copy == nil && p != nil && p.Holder.ID == e.Holder {
			// G17: did the successor take the work before the holder went?
			return g.askSuccessor()
		}
		if g.copy == nil || g.copy.Holder.ID != e.Holder || g.rerouting {
			return Ready{}
		}
		return g.silent(e.Why)
	case Handback:
		if g.copy == nil || g.copy.Holder.ID != e.From || g.copy.Attempt != e.Attempt {
			return Ready{Reply: &Reply{Error: "no guard copy of " + g.key + " held by that peer at that attempt"}}
		}
		if g.rerouting {
			return Ready{Reply: &Reply{OK: true}} // under way already
		}
		o := g.order(e.Why)
		o.Handback = true
		return Ready{Reply: &Reply{OK: true}, Reroute: o}
	case PrimaryAnswer:
		return g.primaryAnswer(e)
	case Claim:
		if g.copy == nil || g.copy.Holder.ID != e.Holder || g.copy.Attempt != e.Attempt || g.rerouting {
			return Ready{}
		}
		if until := g.recordingUntil(e.Attempt, e.At); !until.IsZero() {
			return Ready{RecordingUntil: until} // G18
		}
		if g.copy.StoodIn && g.asked.by != "" && g.asked.by == g.copy.Primary.ID && g.asked.attempt == e.Attempt && e.At.Before(g.asked.until) {
			// G19: the primary this backup stood in for asked it before
			// re-routing the same attempt: the primary is alive and acts.
			return g.backToBackup()
		}
		g.rerouting = true
		return Ready{Claimed: true}
	case ClaimDispatch:
		if g.copy == nil || g.copy.Holder.ID != e.Holder || g.copy.Attempt != e.Attempt || g.rerouting {
			return Ready{}
		}
		holder := g.copy.Holder
		rd := g.forget(e.Attempt, e.At)
		rd.Claimed = true
		rd.TellSuperseded = &Notice{Peer: holder, Attempt: e.Attempt + 1}
		return rd
	case Rerouted:
		return g.rerouted(e)
	case RerouteRefused:
		if g.copy == nil || !g.rerouting || g.copy.Attempt != e.Attempt {
			return Ready{}
		}
		g.rerouting = false
		rd := g.forget(e.Attempt, e.At)
		if g.mark.Attempt == e.Attempt {
			g.mark.Rerouted = true
		}
		return rd
	case GiveUp:
		if g.copy == nil || !g.rerouting {
			return Ready{}
		}
		g.rerouting = false
		at := g.copy.Attempt
		var old *ReleaseOld
		if e.Supersede {
			at++
			if others := g.copy.OtherGuardians(); len(others) > 0 {
				old = &ReleaseOld{Peers: others, Attempt: g.copy.Attempt}
			}
		}
		rd := g.forget(at, e.At)
		rd.ReleaseOld = old
		return rd
	case Aborted:
		g.rerouting = false
		return Ready{}
	case BackupAdded:
		if g.copy == nil || g.copy.Attempt != e.Attempt || slices.ContainsFunc(g.copy.Backups, func(p pack.Peer) bool { return p.ID == e.Peer.ID }) {
			return Ready{}
		}
		g.copy.Backups = append(g.copy.Backups, e.Peer)
		return Ready{Persist: PersistSave}
	case NeverTook:
		if g.copy == nil || g.copy.Holder.ID != e.Holder || g.copy.Attempt != e.Attempt || g.rerouting {
			return Ready{}
		}
		if g.copy.Role == RoleBackup || g.copy.StoodIn {
			// A backup's copy of work its holder never took was stored by
			// that holder while it was taking the hand-over it then
			// refused: the sender (the primary) still has the work, or
			// gave up and guards the step itself. Dropped, with no
			// tombstone: nothing moved on (G11). So is a backup's that
			// stood in for a primary it could not reach (G3): that
			// primary is the sender all the same, and re-routing the copy
			// could follow the sender's own hand-off of the step to
			// another peer within a fraction of a second — the step would
			// run twice.
			return g.withdraw()
		}
		// The holder answered: nothing to confirm about its silence.
		o := g.order(e.Why)
		o.Handback = true
		return Ready{Reroute: o}
	case Withdraw:
		if g.copy == nil || g.copy.Holder.ID != e.Holder || g.copy.Attempt != e.Attempt || g.rerouting {
			// Another holder's copy (the step's real one, guarded here
			// since), another attempt, or a re-route already claimed.
			return Ready{Reply: &Reply{OK: true}}
		}
		rd := g.withdraw()
		rd.Reply = &Reply{OK: true}
		return rd
	case Rerouting:
		r := g.Status()
		if m := g.mark; g.copy == nil && m != nil && !m.Rerouted && m.By != "" && m.ByKey != "" {
			// G17: released by a successor; the asker checks with it.
			r.Holder, r.TookKey = pack.Peer{ID: m.By}, m.ByKey
		}
		if g.copy != nil && g.copy.Holder.ID == e.Holder && g.copy.Attempt == e.Attempt && !g.rerouting {
			g.asked = askedReroute{by: e.From, attempt: e.Attempt, until: e.At.Add(ReroutingHold)}
		}
		r.Recording = !g.recordingUntil(e.Attempt, e.At).IsZero()                                                 // G18
		r.Rerouting = g.copy != nil && g.rerouting && g.copy.Holder.ID == e.Holder && g.copy.Attempt == e.Attempt // G19
		return Ready{Reply: &r}
	case PrimaryGuards:
		if g.copy == nil || !g.copy.StoodIn || g.copy.Holder.ID != e.Holder || g.copy.Attempt != e.Attempt || g.rerouting {
			return Ready{}
		}
		return g.backToBackup()
	case ChainSuperseded:
		if g.copy == nil || g.copy.Holder.ID != e.Holder || g.copy.Attempt != e.Attempt || g.rerouting {
			return Ready{} // moved on, or being re-routed, meanwhile
		}
		return g.withdraw()
	case NewerAttempt:
		if g.copy == nil || g.copy.Attempt >= e.Attempt {
			return Ready{}
		}
		rd := g.release(Release{Attempt: g.copy.Attempt, Rerouted: true, At: e.At})
		rd.Reply = nil // nobody asked
		return rd
	case Prune:
		if g.copy != nil || g.mark == nil || !g.mark.At.Before(e.Before) {
			return Ready{}
		}
		g.mark = nil
		return Ready{Persist: PersistDropMark}
	}
	panic(fmt.Sprintf("guard: unknown event %T", ev))
}

func (g *Guard) store(e Store) Ready {
	ok := &Reply{OK: true}
	if g.mark != nil && g.mark.Attempt >= e.Attempt {
		return Ready{Reply: ok} // G2: released before the copy got here
	}
	if g.copy != nil && (g.copy.Attempt > e.Attempt || (g.copy.Attempt == e.Attempt && g.rerouting)) {
		return Ready{Reply: ok} // a newer attempt is guarded already
	}
	if c := g.copy; c != nil && g.rerouting {
		// A newer attempt's copy while this guardian re-routes the older
		// one: another guardian re-routed it too, and its receiver
		// recruited this peer as a backup (G20). A backup that stood in
		// gives way to its primary's re-route; any other claim stands,
		// and the receiver, refused here, recruits another backup (its
		// settle here is refused too).
		if !c.StoodIn || c.Primary.ID == "" || (e.Primary.ID != c.Primary.ID && e.Holder.ID != c.Primary.ID) {
			return Ready{Reply: &Reply{Error: fmt.Sprintf("re-routing attempt %d of this step here", c.Attempt)}}
		}
		g.rerouting = false
	}
	var old string
	if g.copy != nil {
		old = g.copy.Holder.ID
	}
	g.asked, g.recording = askedReroute{}, recordingHold{}
	g.copy = &Record{
		Key: g.key, Pack: e.Pack, Holder: e.Holder, Attempt: e.Attempt, Role: e.Role, Primary: e.Primary,
		Tried: slices.Clone(e.Tried), Since: e.At, Backups: slices.Clone(e.Backups),
	}
	rd := Ready{Persist: PersistSave, Reply: ok, Watch: []pack.Peer{e.Holder}, RecruitBackup: e.Recruit && len(e.Backups) == 0}
	if old != "" && old != e.Holder.ID {
		rd.Unwatch = []string{old}
	}
	if p, m := g.pending, g.mark; p != nil && m != nil && m.Attempt == p.Attempt && m.Pending {
		// A copy of a newer attempt came before any word on the pending
		// copy's release (keepPending then drops the pending copy): a
		// re-route's receiver recruited this peer as its backup (the
		// re-router heard that the successor never took the work). The
		// release stays unconfirmed (G21), written with the copy: read
		// as confirmed, it would refuse that very re-route, and nobody
		// would hold the step.
		m.Pending, m.Unconfirmed = false, true
		rd.Persist = PersistSaveMark
	}
	return rd
}

func (g *Guard) release(e Release) Ready {
	if p := g.pending; p != nil && e.Rerouted && !e.Probe && e.Attempt >= p.Attempt {
		// G7 over G17: the primary re-routed the attempt; its chain goes
		// on, and this copy must not start another.
		g.pending, g.askedTook = nil, time.Time{}
		g.mark.Pending, g.mark.Unconfirmed = false, true
		rd := g.release(e)
		rd.Unwatch = append(rd.Unwatch, p.Holder.ID)
		if rd.Persist == PersistNone {
			// At once, not with a later write: restored after a crash,
			// the pending copy would be re-routed a second time.
			rd.Persist = PersistForget
		}
		return rd
	}
	if e.Yield != "" {
		if g.copy == nil && g.mark != nil && g.mark.Attempt == e.Attempt && !g.mark.Rerouted && g.mark.By == e.Yield && e.By != "" {
			if g.refused.has(e.Attempt, e.By) && e.Yield < e.By {
				// G14: this copy refused e.By, which gives way at the
				// copies that named it just as e.Yield does here; of
				// two receivers each refused at the other's copy only
				// the greater peer ID gives way, or the copies swap.
				return Ready{Reply: &Reply{OK: true}}
			}
			g.mark.By = e.By
			return Ready{Persist: PersistForget, Reply: &Reply{OK: true}}
		}
		return Ready{Reply: &Reply{OK: true}}
	}
	if !e.Rerouted && g.holds(e.Attempt, e.At) {
		// G13: a co-guardian may be re-routing this attempt right now;
		// its claim would answer Superseded, this copy cannot tell yet.
		return Ready{Reply: &Reply{OK: true, Known: true, Pending: true, Attempt: g.copy.Attempt, Holder: g.copy.Holder}}
	}
	if e.Probe {
		superseded := (g.copy != nil && (g.copy.Attempt > e.Attempt || (g.copy.Attempt == e.Attempt && g.rerouting))) ||
			(g.copy == nil && g.mark != nil && (g.mark.Attempt > e.Attempt || (g.mark.Attempt == e.Attempt && g.mark.Rerouted) ||
				(g.mark.Attempt == e.Attempt && e.By != "" && g.mark.By != "" && g.mark.By != e.By)))
		r := g.Status()
		r.Superseded = superseded
		if g.copy == nil && g.mark != nil && g.mark.Attempt == e.Attempt && !g.mark.Rerouted && e.By != "" && g.mark.By != "" && g.mark.By != e.By {
			r.Holder = pack.Peer{ID: g.mark.By} // G8: taken by that successor
		}
		if e.Recording && !superseded && g.copy != nil && g.copy.Attempt == e.Attempt {
			// G18: the prober records the next hop on this answer and
			// releases after; a claim in between would start a second
			// chain beside the one it records.
			g.recording = recordingHold{attempt: e.Attempt, until: e.At.Add(RecordingHold)}
		}
		return Ready{Reply: &r}
	}
	if c := g.copy; c != nil && c.Attempt == e.Attempt && g.rerouting && e.Rerouted && c.StoodIn && e.Rerouter != "" && e.Rerouter == c.Primary.ID {
		// G20: this backup stood in for a primary it could not reach, and
		// that primary re-routed the same attempt: the primary's chain
		// goes on. This copy's own re-route is refused where the primary
		// answers its receiver's settle (superseded, below).
		g.rerouting = false
		rd := g.forget(e.Attempt, e.At)
		if g.mark.Attempt == e.Attempt {
			g.mark.Rerouted = true
		}
		rd.Reply = &Reply{OK: true}
		return rd
	}
	if m, c := g.mark, g.copy; m != nil && m.Attempt == e.Attempt && !m.Rerouted && g.releaseConfirmed() && e.Rerouted && e.Rerouter != "" &&
		c != nil && c.Attempt > e.Attempt && (c.Primary.ID == e.Rerouter || c.Holder.ID == e.Rerouter) {
		// G21 before G20's own-chain rule: the re-route's receiver
		// recruited this peer as its backup before it settled here, but
		// the attempt it re-routes moved on here, its release confirmed.
		// Refused like any re-route of a confirmed release (below); the
		// receiver withdraws the copy it stored here (G11).
		return Ready{Reply: &Reply{OK: true, Known: true, Superseded: true, Released: true, Attempt: m.Attempt}}
	}
	if c := g.copy; c != nil && c.Attempt > e.Attempt && e.Rerouted && e.Rerouter != "" && (c.Primary.ID == e.Rerouter || c.Holder.ID == e.Rerouter) {
		// G20: this copy guards the newer attempt of that very re-route
		// (its receiver — the re-router itself, when it took the pack —
		// recruited this peer as a backup before its settle got here):
		// nothing to change.
		return Ready{Reply: &Reply{OK: true}}
	}
	if g.copy != nil && (g.copy.Attempt > e.Attempt || (g.copy.Attempt == e.Attempt && g.rerouting)) {
		// G1: the step was re-routed (or is being) first. So it is for
		// another guardian's re-route of the same attempt (G20): one of
		// the two chains goes on.
		return Ready{Reply: &Reply{OK: true, Known: true, Superseded: true, Attempt: g.copy.Attempt}}
	}
	if g.copy == nil && g.mark != nil {
		if g.mark.Attempt > e.Attempt || (g.mark.Attempt == e.Attempt && g.mark.Rerouted && !e.Rerouted) {
			return Ready{Reply: &Reply{OK: true, Known: true, Superseded: true, Released: true, Attempt: g.mark.Attempt}}
		}
		if g.mark.Attempt == e.Attempt && !g.mark.Rerouted && e.By != "" && g.mark.By != "" && g.mark.By != e.By {
			// G8: released by another successor first; the answer names
			// it, so the sender guards the step there (it may have missed
			// that successor's ack).
			if g.refused.attempt != e.Attempt {
				g.refused = refusedSuccessors{attempt: e.Attempt}
			}
			if !slices.Contains(g.refused.peers, e.By) {
				g.refused.peers = append(g.refused.peers, e.By)
			}
			return Ready{Reply: &Reply{OK: true, Known: true, Superseded: true, Released: true, Attempt: g.mark.Attempt, Holder: pack.Peer{ID: g.mark.By}}}
		}
		if g.mark.Attempt == e.Attempt && !g.mark.Rerouted && !e.Rerouted && g.mark.By == "" && e.By != "" {
			g.mark.By, g.mark.ByKey = e.By, e.ByKey
			return Ready{Persist: PersistForget, Reply: &Reply{OK: true}}
		}
		if g.mark.Attempt == e.Attempt && (g.mark.Rerouted || !e.Rerouted) {
			return Ready{Reply: &Reply{OK: true}} // released already
		}
		if g.mark.Attempt == e.Attempt && e.Rerouter != "" && g.releaseConfirmed() {
			// G21: the attempt moved on here, its release confirmed (no
			// copy is pending, G17): the holder handed the step on, or a
			// join or an origin recorded its next hop. A re-route of it
			// is a second chain; its receiver refuses it and the
			// re-router drops its copy.
			return Ready{Reply: &Reply{OK: true, Known: true, Superseded: true, Released: true, Attempt: g.mark.Attempt}}
		}
		// A re-route mark over a release of the same attempt: the
		// release came first and was answered; keep it (G1).
		if g.mark.Attempt == e.Attempt {
			return Ready{Reply: &Reply{OK: true, Known: true, Released: true, Attempt: g.mark.Attempt}}
		}
	}
	raised := g.mark == nil || g.mark.Attempt < e.Attempt
	var pending *Record
	if c := g.copy; c != nil && raised && c.Attempt == e.Attempt && !e.Rerouted && e.By != "" && e.ByKey != "" {
		pending = c
	}
	rd := g.forget(e.Attempt, e.At)
	if raised {
		g.mark.Rerouted = e.Rerouted
		g.mark.By, g.mark.ByKey = e.By, e.ByKey
		// G21: a successor's release with no copy here to keep pending
		// cannot be confirmed here.
		g.mark.Unconfirmed = e.By != "" && pending == nil
		g.mark.Pending = pending != nil
	}
	if pending != nil {
		// G17: kept, and its holder watched, until the release is
		// confirmed. Watched anew if need be: a holder already found
		// silent before this release came (a late one, its answer lost)
		// is no longer watched, and without a second Silent the successor
		// would never be asked.
		g.pending, g.askedTook = pending, time.Time{}
		rd.Unwatch = nil
		rd.Watch = append(rd.Watch, pending.Holder)
		rd.Persist = PersistForgetPending
	}
	rd.Reply = &Reply{OK: true}
	return rd
}

// backToBackup makes a copy that stood in for its primary (G3) a backup
// again, watching its holder: the primary was found alive and acting (G19).
func (g *Guard) backToBackup() Ready {
	g.copy.Role, g.copy.StoodIn = RoleBackup, false
	return Ready{Persist: PersistSave, Watch: []pack.Peer{g.copy.Holder}}
}

// withdraw drops the live copy of work its holder never took, leaving the
// tombstone as it is (G11).
func (g *Guard) withdraw() Ready {
	rd := Ready{Persist: PersistDelete, Unwatch: []string{g.copy.Holder.ID}, Dropped: true}
	g.copy, g.asked, g.recording = nil, askedReroute{}, recordingHold{}
	return rd
}

// forget drops the live copy and raises the tombstone to attempt.
func (g *Guard) forget(attempt int, at time.Time) Ready {
	var rd Ready
	if g.copy != nil {
		rd.Unwatch = []string{g.copy.Holder.ID}
		g.copy = nil
	}
	// A claim of the dropped copy ends with it: its re-route, if it
	// still reports, finds no copy; a later copy may be claimed.
	g.rerouting = false
	g.asked, g.recording = askedReroute{}, recordingHold{}
	if g.mark == nil || g.mark.Attempt < attempt {
		g.mark = &Mark{At: at, Attempt: attempt}
	}
	rd.Persist = PersistForget
	return rd
}

func (g *Guard) order(why string) *Order {
	return &Order{
		Pack: g.copy.Pack, Holder: g.copy.Holder, Attempt: g.copy.Attempt,
		Tried: append(slices.Clone(g.copy.Tried), g.copy.Holder.ID), Since: g.copy.Since, Why: why,
	}
}

func (g *Guard) primaryAnswer(e PrimaryAnswer) Ready {
	if g.copy == nil || g.copy.Holder.ID != e.Silent || g.copy.Attempt != e.Attempt || g.rerouting {
		return Ready{} // moved on meanwhile
	}
	r := e.Reply
	switch {
	case e.Reached && r.Recording:
		// G18: a join or an origin is recording the holder's next hop at
		// the primary; the chain moved on unless the record fails. Watch
		// the holder again and ask again.
		return Ready{Watch: []pack.Peer{g.copy.Holder}}
	case e.Reached && !r.Known && r.Handing:
		// The primary still has the work: it is handing the step on (the
		// holder's ack never reached it) and will guard it where it lands,
		// or hand it to another receiver. Standing in now would start a
		// second chain (G15); watch the holder again and ask again.
		return Ready{Watch: []pack.Peer{g.copy.Holder}}
	case !e.Reached || !r.Known:
		// The primary is gone too, or never heard the holder's ack (its
		// hand-off's answer was lost: it keeps no copy and no tombstone,
		// and may have handed the step to another peer, which G8 refused):
		// this backup acts (G3).
		g.copy.Role, g.copy.StoodIn = RolePrimary, true
		return Ready{Persist: PersistSave, Reroute: g.order(e.Why)}
	case r.Released && !g.copy.RestoredAt.IsZero() && e.At.Sub(g.copy.RestoredAt) < SuccessorGrace:
		// G17: this copy is live again because the successor never took
		// the work; the primary's release may be that very release, not
		// confirmed yet. The primary decides once it sees the holder
		// silent (it asks the successor too); watch the holder again and
		// ask again.
		return Ready{Watch: []pack.Peer{g.copy.Holder}}
	case r.Released && r.Attempt == g.copy.Attempt && r.Holder.ID != "" && r.TookKey != "":
		// G17 at a backup: the primary was released by a named successor,
		// which may have refused the hand-over after its release was
		// recorded (the primary's own copy is pending, or was lost to a
		// restart). The holder is silent already: keep this copy as
		// pending beside the same tombstone and ask that successor now.
		// Dropping it instead would lose the workflow when the primary
		// later restored its copy and, before re-routing, heard from this
		// backup that the step was released (a one-way cut).
		pending := g.copy
		rd := g.forget(g.copy.Attempt, e.At)
		g.mark.By, g.mark.ByKey, g.mark.Pending = r.Holder.ID, r.TookKey, true
		g.pending, g.askedTook = pending, time.Time{}
		rd.Unwatch = nil
		rd.AskSuccessor = g.askSuccessor().AskSuccessor
		rd.Persist = PersistForgetPending
		return rd
	case r.Released:
		return g.forget(g.copy.Attempt, e.At)
	case r.Attempt < g.copy.Attempt:
		// The primary knows only an older attempt: it is re-routing the
		// step to this copy's holder (who recruited this backup) and has
		// not heard its ack yet — G15 at a re-route. Following it back to
		// the old holder would, were the primary gone next, re-route from
		// the old attempt a second chain of this one's attempt number.
		return Ready{Watch: []pack.Peer{g.copy.Holder}}
	case r.Holder.ID != e.Silent || r.Attempt > g.copy.Attempt:
		// The primary re-routed: follow the new holder.
		g.copy.Holder, g.copy.Attempt = r.Holder, r.Attempt
		return Ready{Persist: PersistSave, Watch: []pack.Peer{r.Holder}, Unwatch: []string{e.Silent}, AddWatcher: &Notice{Peer: r.Holder, Attempt: r.Attempt}}
	}
	// The primary still sees the holder: the suspicion was this peer's
	// alone; watch it again.
	return Ready{Watch: []pack.Peer{g.copy.Holder}}
}

func (g *Guard) rerouted(e Rerouted) Ready {
	if g.copy == nil || !g.rerouting {
		return Ready{}
	}
	g.rerouting = false
	g.asked, g.recording = askedReroute{}, recordingHold{}
	prev := g.copy
	rd := Ready{Unwatch: []string{prev.Holder.ID}, TellSuperseded: &Notice{Peer: prev.Holder, Attempt: e.Attempt}}
	var old []pack.Peer
	for _, b := range prev.OtherGuardians() {
		if b.ID != e.Target.ID && !slices.ContainsFunc(e.Backups, func(x pack.Peer) bool { return x.ID == b.ID }) {
			old = append(old, b)
		}
	}
	if len(old) > 0 {
		rd.ReleaseOld = &ReleaseOld{Peers: old, Attempt: prev.Attempt}
	}
	if e.Local {
		// This peer took the pack itself: its backups guard it now.
		f := g.forget(e.Attempt, e.At)
		rd.Persist = f.Persist
		return rd
	}
	g.copy = &Record{
		Key: g.key, Pack: e.Pack, Holder: e.Target, Attempt: e.Attempt, Role: RolePrimary,
		Tried: append(slices.Clone(prev.Tried), prev.Holder.ID), Since: e.At, Backups: slices.Clone(e.Backups),
	}
	rd.Persist = PersistSave
	rd.Watch = []pack.Peer{e.Target}
	return rd
}
