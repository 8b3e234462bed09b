// Package held is the decision core of a holder: a peer that accepted a
// pack (or, at the origin, the first pack of a submitted workflow) and
// owns its head step until the next holder, join or origin has taken what
// follows. It does no I/O and takes no lock: Step takes one event and
// returns a Ready that says what the node must do, in order (the shape of
// etcd's raft Step/Ready, as in packages node/join and node/guard):
//
//  1. persist (Ready.Persist): write the record, or delete it — and refuse
//     the event if that fails (the node steps a clone and keeps it only
//     once written, so a failed write changes nothing);
//  2. answer the request that stepped it (Ready.Reply);
//  3. act: stop the running step (Ready.Stop), run it (Ready.Run), hand
//     on what follows it (Ready.Forward, with the settle items the
//     successor must carry out), release guardians (Ready.Release),
//     recruit a guardian (Ready.Recruit), ask the guardians and the origin
//     whether the work is still this peer's (Ready.AskOwners), tell the
//     beat loop its targets changed (Ready.BeatsChanged), and record what
//     happened (Ready.Note).
//
// # Phases
//
// A holder moves through named phases, never back:
//
//	accepting ──settled──▶ running ──ran──▶ ran ──forwarding──▶ forwarding ──forwarded──▶ forwarded ──released──▶ done
//	    │                    ▲
//	    └──refused──▶ done   │ owned
//	resuming ────────────────┘ (restored from the journal; not owned ──▶ superseded)
//
// and from any live phase to superseded (a guardian re-routed the step) or
// cancelled (the workflow was cancelled while the step ran).
//
// # Invariants
//
// Each rule is stated here with its reason; docs/protocol.md specifies
// them in full.
//
//   - H1 (acknowledged only when settled): an accepted pack is
//     acknowledged only after it is journaled (I4) and the hand-over is
//     settled: the guardians of the step before released it here. A
//     settle answered superseded drops the pack and refuses it, which
//     stops a superseded chain at its next hop (I1); an interrupted settle
//     drops and refuses it too (nothing was settled).
//   - H2 (a superseded holder does nothing more): once superseded,
//     cancelled or done, every later event is ignored: no outcome is
//     journaled again (a stale record would be resumed after a restart),
//     nothing is forwarded, no guardian is added.
//   - H3 (the settle list is taken once): entering forwarding fixes the
//     guardians the successor releases. A guardian offered after that is
//     refused (answered "moved on"), so no guardian is left watching work
//     the successor's settle did not release — such a guardian would
//     re-run finished work once this holder is gone. A guardian already
//     listed is confirmed until the successor took the work.
//   - H4 (ran once, then forwarded): the outcome of an at-most-once step
//     (once=true), or of a step that ran for at least RerunCost, is
//     journaled before anything is handed on, so a restarted holder
//     forwards the outcome instead of running the step again; an
//     at-most-once step is never run twice by the same holder. The outcome
//     of a quick step that may run again is journaled with its hand-on
//     (the Forwarded write): a holder restarted in between runs it again,
//     as a re-route after its death would (at least once), and a hop makes
//     one fsync'd write less on its critical path. Restarted
//     after the successor took it, the holder asks first (H5): the
//     guardians the successor released drop it. Tests:
//     testdata/restart.txt; TestQuickStepRunAgainAfterAKillInItsWindow
//     (package testnet: real processes, the holder SIGKILLed inside the
//     window by node.FailpointKillAfterRan, the re-run counted).
//   - H6 (released once): the guardians are released by the successor
//     when it settles the hand-over (H1); the holder releases again only
//     those the successor does not name as released (an older successor,
//     a guardian it could not reach, a join or origin). When it names
//     every guardian, forwarded and released are one step and one journal
//     write: the record is dropped (and the hand-on remembered) at once.
//   - H5 (a restarted holder asks first): restored work runs or is
//     forwarded only after its guardians and the origin were asked: any
//     guardian that re-routed the step (or released it, for work not yet
//     forwarded) or an origin whose workflow ended drops it. It goes on
//     only once every guardian answered, or the restart grace passed: a
//     guardian that does not answer may be the one that was released
//     (after a blackout the others come back first), and no answer is not
//     "still yours".
//   - H7 (a release stands only for a successor that took the work): a
//     guardian records a successor's release before that successor
//     decides whether it takes the hand-over, and a receiver that then
//     refuses it (unsettled: another guardian of the step did not answer
//     in time) cannot always undo the release — the guardian that
//     recorded it may be the one that did not answer. So a restored
//     holder that has not handed its step on, told by a guardian that a
//     successor released it, drops its work only once that successor
//     (named by the guardian, node/guard G16) says it took the work, or
//     when a releasing guardian names nobody (a join or an origin
//     released it, or the tombstone is older than the name), or when
//     the successor stays silent past the restart grace. A successor
//     that holds nothing and remembers nothing of the work never took
//     it: the holder goes on, and its next hand-off reaches that
//     successor again (G8). Dropping the step on the guardian's word
//     alone would let a blackout lose a workflow with nothing run.
//
// The node owns the journal, the network and timers; the scripted tests in
// testdata/*.txt drive the machine and show each decision (go test
// ./node/held -update rewrites them after a deliberate rule change).
package held

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/pack"
)

// Record is what the journal keeps for held work: the pack as received
// and, once the step ran, its outcome. A restarted peer forwards an
// executed step's outcome instead of running it again.
type Record struct {
	Pack     *pack.Pack        `cbor:"-"`
	PackRaw  []byte            `cbor:"1,keyasint,omitempty"`
	Executed bool              `cbor:"2,keyasint"`
	OK       bool              `cbor:"3,keyasint"`
	Output   json.RawMessage   `cbor:"4,keyasint,omitempty"`
	Error    string            `cbor:"5,keyasint,omitempty"`
	Trace    []pack.TraceEntry `cbor:"6,keyasint,omitempty"`
	// Guardians are the peers watching this holder for this pack.
	Guardians []pack.Peer `cbor:"7,keyasint,omitempty"`
	// Forwarded is set once the residual was handed on or delivered.
	Forwarded bool `cbor:"8,keyasint,omitempty"`
	// DispatchOnly marks the origin's first pack: nothing to run, only to
	// dispatch.
	DispatchOnly bool `cbor:"9,keyasint,omitempty"`
	// Key is the journal key of the held pack, GuardKey the step's key at
	// its guardians (attempts share it).
	Key      string `cbor:"10,keyasint,omitempty"`
	GuardKey string `cbor:"11,keyasint,omitempty"`
}

func (r *Record) clone() Record {
	c := *r
	c.Trace = slices.Clone(r.Trace)
	c.Guardians = slices.Clone(r.Guardians)
	return c
}

// headOnce reports whether the held step is at-most-once (once=true).
func (r *Record) headOnce() bool {
	if r.DispatchOnly || r.Pack == nil {
		return false
	}
	head, err := r.Pack.Head()
	return err == nil && head.Once()
}

// Attempt is the attempt of the held step.
func (r *Record) Attempt() int { return r.Pack.Attempt }

// Advanced is the pack after the head step: on success the step is
// consumed and its output recorded; on failure the workflow is left as it
// was. A dispatch-only pack is returned as it is.
func (r *Record) Advanced() *pack.Pack {
	next := r.Pack.Clone()
	if r.DispatchOnly {
		return next
	}
	next.Trace = append(next.Trace, r.Trace...)
	if !r.OK {
		return next
	}
	head, err := next.Head()
	if err != nil {
		return next // nothing ran: only a dispatch-only pack has no service head
	}
	if next.Outputs == nil {
		next.Outputs = map[string]json.RawMessage{}
	}
	next.Outputs[head.Label()] = r.Output
	next.Workflow = &grammar.Workflow{Steps: next.Workflow.Steps[1:]}
	return next
}

// Phase is where a holder is in its life.
type Phase uint8

// The phases, in the order a holder moves through them.
const (
	// PhaseAccepting: journaled, recruiting a backup and settling the
	// hand-over; not acknowledged yet.
	PhaseAccepting Phase = iota + 1
	// PhaseResuming: restored from the journal; asking the guardians and
	// the origin whether the work is still this peer's.
	PhaseResuming
	// PhaseRunning: the step runs (or is about to).
	PhaseRunning
	// PhaseRan: the step ended (its outcome journaled unless it was quick,
	// H4); what follows is handed on next.
	PhaseRan
	// PhaseForwarding: the settle list is taken and what follows is being
	// handed on.
	PhaseForwarding
	// PhaseForwarded: the successor took what follows; the guardians are
	// being released.
	PhaseForwarded
	// PhaseDone: nothing left; the record is deleted.
	PhaseDone
	// PhaseSuperseded: a guardian re-routed the step; the record is
	// deleted and nothing more happens here.
	PhaseSuperseded
	// PhaseCancelled: the workflow was cancelled while the step ran.
	PhaseCancelled
)

var phaseNames = map[Phase]string{
	PhaseAccepting: "accepting", PhaseResuming: "resuming", PhaseRunning: "running", PhaseRan: "ran",
	PhaseForwarding: "forwarding", PhaseForwarded: "forwarded", PhaseDone: "done",
	PhaseSuperseded: "superseded", PhaseCancelled: "cancelled",
}

func (p Phase) String() string {
	if s, ok := phaseNames[p]; ok {
		return s
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Ended reports whether p is final (done, superseded, cancelled).
func (p Phase) Ended() bool { return p >= PhaseDone }

// Holder is everything one peer knows of one piece of work it holds.
type Holder struct {
	self  string
	rec   Record
	phase Phase
}

// Accept returns the holder of a pack this peer just received (or, with
// DispatchOnly set, the origin's first pack); step it with Accepted.
// self is this peer's ID (never listed in settle items).
func Accept(self string, rec Record) *Holder {
	return &Holder{self: self, rec: rec.clone(), phase: PhaseAccepting}
}

// Restore returns the holder of work read back from the journal after a
// restart; step it with Restored.
func Restore(self string, rec Record) *Holder {
	return &Holder{self: self, rec: rec.clone(), phase: PhaseResuming}
}

// Clone returns a deep copy; the node steps a clone and keeps it once its
// effects are persisted.
func (h *Holder) Clone() *Holder {
	c := *h
	c.rec = h.rec.clone()
	return &c
}

// Phase is the holder's phase.
func (h *Holder) Phase() Phase { return h.phase }

// Record is the holder's record: what the journal keeps, and, between a
// quick step's outcome and its hand-on (H4), that outcome not yet
// journaled. Do not modify it.
func (h *Holder) Record() *Record { return &h.rec }

// Guardians are the peers guarding the held step.
func (h *Holder) Guardians() []pack.Peer { return h.rec.Guardians }

// Beats reports whether this peer beats to the guardians: from the moment
// the step may run until the guardians are released.
func (h *Holder) Beats() bool {
	return h.phase >= PhaseRunning && h.phase <= PhaseForwarded
}

// CanHandBack reports whether the step is running and not finished, so
// its guardians may be asked to re-route it before a power cut.
func (h *Holder) CanHandBack() bool {
	return h.phase == PhaseRunning && !h.rec.Executed && !h.rec.DispatchOnly && len(h.rec.Guardians) > 0
}

// MayRecruit reports whether a replacement guardian may be recruited now
// (H3: never once the settle list is taken).
func (h *Holder) MayRecruit() bool {
	return h.phase == PhaseRunning || h.phase == PhaseRan
}

// Persist says what to write before anything else is done.
type Persist uint8

// The persist kinds.
const (
	PersistNone Persist = iota
	// PersistSave writes the record (the pack bytes with the first save).
	PersistSave
	// PersistDrop deletes the record and the pack bytes.
	PersistDrop
)

// Refusal codes of Reply.Code (the hand-off's wire codes).
const (
	CodeSuperseded = "superseded"
	CodeInternal   = "internal"
	// CodeUnsettled: no guardian of a settle item answered; the sender
	// keeps the work and tries again.
	CodeUnsettled = "unsettled"
)

// Reply is the answer to the request that stepped the holder.
type Reply struct {
	OK bool
	// Code and Error explain a refusal.
	Code, Error string
	// Guardians (an accepted hand-off) are the backups recruited besides
	// the sender. Released (an offered watcher) says the work moved on.
	Guardians []pack.Peer
	Released  bool
}

// Forward asks the node to hand on Pack (the work after the step, settle
// items included): to the next holder, the join or the origin.
type Forward struct {
	Pack *pack.Pack
	// Failed: the step failed (the branch ends with Error).
	Failed bool
	Error  string
}

// AskOwners asks the node to ask Guardians whether they re-routed or
// released the attempt, and (Origin) the origin whether the workflow
// ended, then step Owners with the answers.
type AskOwners struct {
	Guardians []pack.Peer
	Attempt   int
	Origin    bool
}

// Note is a reliability event for the node to record.
type Note struct {
	// Kind is "superseded" or "handed-on".
	Kind   string
	Reason string
}

// Ready is what one step asks the node to do, in field order.
type Ready struct {
	Persist Persist
	Reply   *Reply
	// Stop cancels the running step (superseded).
	Stop bool
	// Run: run the step (or, when it ran before a restart or is
	// dispatch-only, go straight to forwarding it).
	Run     bool
	Forward *Forward
	// Release: tell these guardians the step moved on at Attempt.
	Release []pack.Peer
	// Withdraw: tell these backups, recruited while the hand-over was
	// being taken, that it was refused: they drop their copy and mark
	// nothing as moved on (node/guard G11). With Attempt.
	Withdraw []pack.Peer
	Attempt  int
	// Recruit: find a new guardian (none of Exclude).
	Recruit bool
	Exclude []pack.Peer
	Ask     *AskOwners
	// BeatsChanged: the set of peers to beat to changed.
	BeatsChanged bool
	Notes        []Note
	// Ended: the holder reached a final phase; forget it.
	Ended bool
}

// Event is something that happened to a holder.
type Event interface{ isEvent() }

// Accepted: the pack was received; journal it.
type Accepted struct{}

// BackupsRecruited: these peers agreed to guard the step too (or their
// answer never came); Refused were named as backups when the pack was
// accepted (Record.Guardians) and refused the copy: they are taken off.
type BackupsRecruited struct{ Peers, Refused []pack.Peer }

// SettleResult is how settling a hand-over ended.
type SettleResult uint8

// The settle results.
const (
	// SettleOK: every item was settled (or its peer is gone).
	SettleOK SettleResult = iota + 1
	// SettleSuperseded: a guardian had re-routed the step being released.
	SettleSuperseded
	// SettleInterrupted: the settling stopped before every answer came.
	SettleInterrupted
	// SettleUnsettled: no peer of some settle item answered (it may be cut
	// off and re-routing): the hand-over is refused, the sender keeps it.
	SettleUnsettled
)

// Settled: the hand-over's settle items were carried out (Err explains
// an interruption).
type Settled struct {
	Result SettleResult
	Err    string
}

// Restored: the record was read back from the journal after a restart.
type Restored struct{}

// Owners: what the guardians and the origin answered a restored holder.
// Superseded: a guardian re-routed the attempt; Released: a guardian was
// released (by a successor); Ended: the origin says the workflow ended;
// Answered: every guardian answered; GiveUp: the node stops asking (a
// guardian still silent past the restart grace). Successor: what the
// successor that the releasing guardians named said when asked whether
// it took the work (H7).
type Owners struct {
	Superseded, Released, Ended, Answered, GiveUp bool
	Successor                                     SuccessorSaid
}

// SuccessorSaid is what the successor named by a released guardian said
// of the work it was handed (H7).
type SuccessorSaid uint8

// What a successor said.
const (
	// SuccessorUnnamed: no guardian named a successor (a holder, a join
	// or an origin released it, or a tombstone older than the name): the
	// release stands.
	SuccessorUnnamed SuccessorSaid = iota
	// SuccessorTook: it holds the work, or ran it and handed it on.
	SuccessorTook
	// SuccessorNeverTook: it holds nothing and remembers nothing of the
	// work: it refused the hand-over after the guardian had recorded its
	// release.
	SuccessorNeverTook
	// SuccessorUnknown: it did not answer, or is still taking the work or
	// reading its journal back.
	SuccessorUnknown
)

func (s SuccessorSaid) String() string {
	switch s {
	case SuccessorUnnamed:
		return "unnamed"
	case SuccessorTook:
		return "took"
	case SuccessorNeverTook:
		return "never-took"
	case SuccessorUnknown:
		return "unknown"
	}
	return fmt.Sprintf("successor(%d)", uint8(s))
}

// Ran: the step ended with this outcome after running for Took (the
// node's clock; H4 journals the outcome of a step that took RerunCost or
// more before handing it on).
type Ran struct {
	OK     bool
	Output json.RawMessage
	Error  string
	Trace  []pack.TraceEntry
	Took   time.Duration
}

// RerunCost is how long a step must have run for its outcome to be
// journaled before it is handed on (H4): a quicker step that is not
// at-most-once is run again after a restart instead, which costs less
// than the fsync'd write every hop would otherwise wait for (0.2–1 ms on
// an SSD, tens of ms on an SD card).
const RerunCost time.Duration = 100 * time.Millisecond

// Stopped: the step did not end (its context ended). Cancelled: because
// the workflow was cancelled (else the work was superseded or the node is
// stopping, and nothing is decided here).
type Stopped struct{ Cancelled bool }

// StartForwarding: the node is about to hand on what follows the step.
type StartForwarding struct{}

// Forwarded: the successor (next holder, join or origin) took what
// follows the step. Released lists the guardians (peer IDs) the successor
// says it released when it settled (api.Ack.Released); when that is every
// guardian, the step is done at once (H6).
type Forwarded struct{ Released []string }

// Released: the guardians were told the step moved on.
type Released struct{}

// Superseded: a guardian re-routed the step at a newer Attempt.
type Superseded struct{ Attempt int }

// OfferWatcher: Peer offers to guard the step at Attempt (a recruited
// guardian, a backup, or a guardian reconciling its copy).
type OfferWatcher struct {
	Peer    pack.Peer
	Attempt int
}

// GuardiansLost: none of the guardians took a beat for too long.
type GuardiansLost struct{}

func (Accepted) isEvent()         {}
func (BackupsRecruited) isEvent() {}
func (Settled) isEvent()          {}
func (Restored) isEvent()         {}
func (Owners) isEvent()           {}
func (Ran) isEvent()              {}
func (Stopped) isEvent()          {}
func (StartForwarding) isEvent()  {}
func (Forwarded) isEvent()        {}
func (Released) isEvent()         {}
func (Superseded) isEvent()       {}
func (OfferWatcher) isEvent()     {}
func (GuardiansLost) isEvent()    {}

// Step applies one event and returns what the node must do.
func (h *Holder) Step(ev Event) Ready {
	if h.phase.Ended() {
		// H2: a final holder does nothing more; an offered watcher is
		// told the work moved on, so it drops what it holds.
		switch ev.(type) {
		case OfferWatcher:
			return Ready{Reply: &Reply{OK: true, Released: true}}
		case Settled:
			// Superseded while it was being accepted: refused.
			return Ready{Reply: &Reply{Code: CodeSuperseded, Error: "a guardian re-routed this step while it was being handed over"}}
		}
		return Ready{}
	}
	switch e := ev.(type) {
	case Accepted:
		if h.phase != PhaseAccepting {
			return Ready{}
		}
		return Ready{Persist: PersistSave}
	case BackupsRecruited:
		if h.phase != PhaseAccepting || len(e.Peers)+len(e.Refused) == 0 {
			return Ready{}
		}
		h.rec.Guardians = slices.DeleteFunc(h.rec.Guardians, func(g pack.Peer) bool {
			return g.ID != h.rec.Pack.Sender.ID && slices.ContainsFunc(e.Refused, func(r pack.Peer) bool { return r.ID == g.ID })
		})
		h.rec.Guardians = append(h.rec.Guardians, e.Peers...)
		return Ready{Persist: PersistSave}
	case Settled:
		return h.settled(e)
	case Restored:
		if h.phase != PhaseResuming {
			return Ready{}
		}
		if len(h.rec.Guardians) == 0 {
			return h.run()
		}
		return Ready{Ask: &AskOwners{Guardians: slices.Clone(h.rec.Guardians), Attempt: h.rec.Attempt(), Origin: !h.rec.Forwarded}}
	case Owners:
		return h.owners(e)
	case Ran:
		if h.phase != PhaseRunning || h.rec.Executed {
			return Ready{}
		}
		h.rec.Executed, h.rec.OK, h.rec.Output, h.rec.Error, h.rec.Trace = true, e.OK, e.Output, e.Error, slices.Clone(e.Trace)
		h.phase = PhaseRan
		if e.Took < RerunCost && !h.rec.headOnce() {
			// H4: a quick step that may run again is journaled with its
			// hand-on.
			return Ready{}
		}
		return Ready{Persist: PersistSave}
	case Stopped:
		if !e.Cancelled || (h.phase != PhaseRunning && h.phase != PhaseRan) {
			return Ready{}
		}
		h.phase = PhaseCancelled
		return Ready{Persist: PersistDrop, Release: h.others(), Attempt: h.rec.Attempt(), BeatsChanged: true, Ended: true}
	case StartForwarding:
		return h.startForwarding()
	case Forwarded:
		if h.phase != PhaseForwarding {
			return Ready{}
		}
		h.rec.Forwarded = true
		h.phase = PhaseForwarded
		r := Ready{Persist: PersistSave, Release: h.others(), Attempt: h.rec.Attempt()}
		if h.releasedAll(e.Released) {
			// H6: nothing left to release; one write instead of two.
			h.phase = PhaseDone
			r = Ready{Persist: PersistDrop, BeatsChanged: true, Ended: true}
		}
		if !h.rec.DispatchOnly {
			r.Notes = []Note{{Kind: "handed-on"}}
		}
		return r
	case Released:
		if h.phase != PhaseForwarded {
			return Ready{}
		}
		h.phase = PhaseDone
		return Ready{Persist: PersistDrop, BeatsChanged: true, Ended: true}
	case Superseded:
		if e.Attempt <= h.rec.Attempt() {
			return Ready{}
		}
		h.phase = PhaseSuperseded
		return Ready{Persist: PersistDrop, Stop: true, BeatsChanged: true, Ended: true,
			Notes: []Note{{Kind: "superseded", Reason: fmt.Sprintf("a guardian re-routed it at attempt %d", e.Attempt)}}}
	case OfferWatcher:
		return h.offer(e)
	case GuardiansLost:
		if !h.MayRecruit() {
			return Ready{}
		}
		return Ready{Recruit: true, Exclude: slices.Clone(h.rec.Guardians)}
	}
	return Ready{}
}

func (h *Holder) settled(e Settled) Ready {
	if h.phase != PhaseAccepting {
		return Ready{}
	}
	backups := h.backups()
	switch e.Result {
	case SettleOK:
		r := h.run()
		r.Reply = &Reply{OK: true, Guardians: backups}
		return r
	case SettleSuperseded:
		h.phase = PhaseSuperseded
		return Ready{Persist: PersistDrop, Ended: true, Withdraw: backups, Attempt: h.rec.Attempt(),
			Reply: &Reply{Code: CodeSuperseded, Error: "a guardian re-routed an earlier step of this chain"},
			Notes: []Note{{Kind: "superseded", Reason: "refused at its next hop"}}}
	}
	h.phase = PhaseDone
	if e.Result == SettleUnsettled {
		return Ready{Persist: PersistDrop, Ended: true, Withdraw: backups, Attempt: h.rec.Attempt(),
			Reply: &Reply{Code: CodeUnsettled, Error: "no guardian of the step before answered: " + e.Err}}
	}
	return Ready{Persist: PersistDrop, Ended: true, Withdraw: backups, Attempt: h.rec.Attempt(),
		Reply: &Reply{Code: CodeInternal, Error: "settling the hand-over was interrupted: " + e.Err}}
}

// run moves on from accepting or resuming: the step runs (or, ran before
// a restart, is forwarded; or, forwarded before a restart, its guardians
// are released).
func (h *Holder) run() Ready {
	switch {
	case h.rec.Forwarded:
		h.phase = PhaseForwarded
		return Ready{Release: h.others(), Attempt: h.rec.Attempt(), BeatsChanged: true}
	case h.rec.Executed:
		h.phase = PhaseRan
	default:
		h.phase = PhaseRunning
	}
	return Ready{Run: true, BeatsChanged: true}
}

func (h *Holder) owners(e Owners) Ready {
	if h.phase != PhaseResuming {
		return Ready{}
	}
	drop := func(why string) Ready {
		h.phase = PhaseSuperseded
		return Ready{Persist: PersistDrop, Ended: true, Notes: []Note{{Kind: "superseded", Reason: why}}}
	}
	switch {
	case e.Superseded:
		return drop("a guardian re-routed it")
	case e.Ended && !h.rec.Forwarded:
		return drop("the workflow has ended")
	case e.Released && !h.rec.Forwarded:
		switch e.Successor {
		case SuccessorUnnamed, SuccessorTook:
			return drop("a guardian was released by a later holder")
		case SuccessorUnknown:
			if e.GiveUp {
				return drop("a guardian was released by a later holder, which did not say whether it took the work")
			}
		case SuccessorNeverTook:
			// H7: the release was recorded for a hand-over that was then
			// refused; nothing moved on.
			if e.Answered || e.GiveUp {
				return h.run()
			}
		}
	case e.Answered || e.GiveUp:
		return h.run()
	}
	// Nobody answered yet: the node asks again.
	return Ready{Ask: &AskOwners{Guardians: slices.Clone(h.rec.Guardians), Attempt: h.rec.Attempt(), Origin: !h.rec.Forwarded}}
}

func (h *Holder) startForwarding() Ready {
	if h.phase != PhaseRan && (h.phase != PhaseRunning || !h.rec.DispatchOnly) {
		return Ready{}
	}
	h.phase = PhaseForwarding
	next := h.rec.Advanced()
	if g := h.others(); len(g) > 0 {
		// Whoever takes what follows releases this step's guardians (H3:
		// this list is final).
		next.Settle = []pack.Settle{{Kind: pack.SettleGuard, Key: h.rec.GuardKey, Attempt: h.rec.Attempt(), Peers: g}}
	} else {
		next.Settle = nil
	}
	f := &Forward{Pack: next}
	if h.rec.Executed && !h.rec.OK && !h.rec.DispatchOnly {
		f.Failed, f.Error = true, h.rec.Error
	}
	return Ready{Forward: f}
}

func (h *Holder) offer(e OfferWatcher) Ready {
	if e.Attempt != h.rec.Attempt() || h.phase >= PhaseForwarded {
		return Ready{Reply: &Reply{OK: true, Released: true}}
	}
	for _, g := range h.rec.Guardians {
		if g.ID == e.Peer.ID {
			return Ready{Reply: &Reply{OK: true}}
		}
	}
	if h.phase == PhaseForwarding {
		// H3: the successor releases only the listed guardians.
		return Ready{Reply: &Reply{OK: true, Released: true}}
	}
	h.rec.Guardians = append(h.rec.Guardians, e.Peer)
	return Ready{Persist: PersistSave, Reply: &Reply{OK: true}, BeatsChanged: true}
}

// releasedAll reports whether released names every guardian other than
// this peer (and there is one: a step nobody guards is released by the
// usual path, which has nothing to do).
func (h *Holder) releasedAll(released []string) bool {
	others := h.others()
	if len(others) == 0 || len(released) == 0 {
		return false
	}
	for _, g := range others {
		if !slices.Contains(released, g.ID) {
			return false
		}
	}
	return true
}

// others are the guardians other than this peer.
func (h *Holder) others() []pack.Peer {
	var out []pack.Peer
	for _, g := range h.rec.Guardians {
		if g.ID != h.self && g.ID != "" {
			out = append(out, g)
		}
	}
	return out
}

// backups are the guardians recruited while accepting: all but the
// sender (the first guardian when the pack has a sender).
func (h *Holder) backups() []pack.Peer {
	gs := h.rec.Guardians
	if h.rec.Pack != nil && h.rec.Pack.Sender.ID != "" && len(gs) > 0 && gs[0].ID == h.rec.Pack.Sender.ID {
		gs = gs[1:]
	}
	return slices.Clone(gs)
}
