package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Holders, in one paragraph: the rules live in package node/held (a
// machine with no I/O and no lock); this file carries out what it says.
// Each piece of held work has a slot whose lock is held while an event is
// stepped on a clone and the record persisted, so a failed write leaves
// the holder unchanged; the committed machine is published through an
// atomic pointer, so readers (beats, activity, drain) never wait on a disk
// write. Running the step, handing on what follows and releasing the
// guardians happen outside the lock, in process, which follows the
// holder's phase.

// heldSlot is one piece of work this peer holds.
type heldSlot struct {
	// mu serialises stepping and the persisting of the stepped record.
	mu sync.Mutex
	// packSaved is set once the pack bytes are journaled (under mu).
	packSaved bool
	// cur is the committed machine, never changed once stored.
	cur atomic.Pointer[held.Holder]

	// rt guards the runtime fields below (never held across I/O).
	rt sync.Mutex
	// cancel stops the running step (set by process).
	cancel context.CancelFunc
	// since is when the step started here, recruited when a guardian was
	// last recruited (or the work taken).
	since, recruited time.Time
}

func (s *heldSlot) view() *held.Holder { return s.cur.Load() }

func (s *heldSlot) recruitedAt() time.Time {
	s.rt.Lock()
	defer s.rt.Unlock()
	return s.recruited
}

// heldTable is every piece of work this peer holds, by journal key.
type heldTable struct {
	t table[*heldSlot]
	// added, when set, is called after a new slot was added (the node
	// wakes its idle beat loop with it).
	added func()
}

func newHeldTable() *heldTable { return &heldTable{t: newTable[*heldSlot]()} }

// add stores a slot for m under key unless one is there, started at now;
// it returns the slot kept and whether it is new.
func (t *heldTable) add(key string, m *held.Holder, now time.Time) (*heldSlot, bool) {
	s, fresh := t.t.getOrAdd(key, func() *heldSlot {
		s := &heldSlot{since: now, recruited: now}
		s.cur.Store(m)
		return s
	})
	if fresh && t.added != nil {
		t.added()
	}
	return s, fresh
}

// len returns how many pieces of work are held.
func (t *heldTable) len() int { return t.t.len() }

func (t *heldTable) remove(key string, s *heldSlot) { t.t.removeIf(key, s) }

// all returns every slot (a snapshot).
func (t *heldTable) all() []*heldSlot { return t.t.values() }

// find returns the slot of the step gkey at attempt (nil if none).
func (t *heldTable) find(gkey string, attempt int) *heldSlot {
	for _, s := range t.all() {
		if r := s.view().Record(); r.GuardKey == gkey && r.Attempt() == attempt {
			return s
		}
	}
	return nil
}

// persistHeld writes what p says of m. The pack (which grows along a
// workflow) is written once, with the first record, in one transaction;
// later saves rewrite only the small record.
func (n *Node) persistHeld(s *heldSlot, m *held.Holder, p held.Persist) error {
	write, done, err := n.heldWrite(s, m, p)
	if err != nil || write == nil {
		return err
	}
	if err := n.journal.Update(write); err != nil {
		return err
	}
	done()
	return nil
}

// heldWrite is what persistHeld writes, as a function of a journal
// transaction (nil: nothing to write), and what to do once it committed.
func (n *Node) heldWrite(s *heldSlot, m *held.Holder, p held.Persist) (write func(*journal.Tx) error, done func(), err error) {
	rec := m.Record()
	switch p {
	case held.PersistSave:
		small := *rec
		small.PackRaw = nil
		state := rpc.MustCBOR(&small)
		if s.packSaved {
			return func(tx *journal.Tx) error { return tx.Put(journal.BucketPacks, rec.Key, state) }, func() {}, nil
		}
		raw := rec.PackRaw
		if raw == nil {
			if raw, err = pack.Encode(rec.Pack); err != nil {
				return nil, nil, fmt.Errorf("encode pack: %w", err)
			}
			rec.PackRaw = raw // m is the clone being committed
		}
		return func(tx *journal.Tx) error {
			if err := tx.Put(journal.BucketPackBytes, rec.Key, raw); err != nil {
				return err
			}
			return tx.Put(journal.BucketPacks, rec.Key, state)
		}, func() { s.packSaved = true }, nil
	case held.PersistDrop:
		now := n.clock.Now()
		// Superseded after it was taken (a guardian re-routed it), not a
		// hand-over refused while it was being taken (the refusal is the
		// answer; this peer may yet be named the first, G8).
		superseded := m.Phase() == held.PhaseSuperseded && s.view().Phase() != held.PhaseAccepting
		remember := rec.Forwarded || superseded
		return func(tx *journal.Tx) error {
				if err := tx.Delete(journal.BucketPackBytes, rec.Key); err != nil {
					return err
				}
				if remember {
					// Ran and handed on, or superseded: the same attempt
					// handed here again is answered as it ended
					// (handedon.go).
					if err := putHandedOn(tx, rec.Key, now, superseded, rec.Pack.Lineage()); err != nil {
						return err
					}
				}
				return tx.Delete(journal.BucketPacks, rec.Key)
			}, func() {
				if remember {
					n.handedOn.put(rec.Key, now, handedOnEntry{superseded: superseded, lineage: rec.Pack.Lineage()})
				}
			}, nil
	}
	return nil, nil, nil
}

// stepHeld applies ev to s and carries out the part of what the machine
// says that belongs to the holder itself: persist (a failure refuses the
// event and changes nothing), then stop the running step, tell the beat
// loop, record events and forget an ended holder. The caller acts on the
// rest (answer, run, forward, release, recruit, ask).
func (n *Node) stepHeld(s *heldSlot, ev held.Event) (held.Ready, error) {
	s.mu.Lock()
	next := s.view().Clone()
	rd := next.Step(ev)
	if err := n.persistHeld(s, next, rd.Persist); err != nil {
		s.mu.Unlock()
		return held.Ready{}, fmt.Errorf("journal held work %s: %w", next.Record().Key, err)
	}
	s.cur.Store(next)
	s.mu.Unlock()
	n.afterHeld(s, next, rd)
	return rd, nil
}

// stepHeldBackground steps an event no peer waits for. A journal that
// refuses the write is tried again for a few seconds; after that the
// holder goes on in memory (logged as an error): the work is not lost
// while this peer runs, but a restart would repeat what the journal
// missed.
func (n *Node) stepHeldBackground(s *heldSlot, ev held.Event) held.Ready {
	var err error
	for wait := 100 * time.Millisecond; wait < 4*time.Second; wait *= 2 {
		var rd held.Ready
		if rd, err = n.stepHeld(s, ev); err == nil {
			return rd
		}
		n.log.Warn("journal refused a holder write; retrying", "err", err, "in", wait)
		n.clock.Sleep(wait)
	}
	s.mu.Lock()
	next := s.view().Clone()
	rd := next.Step(ev)
	s.cur.Store(next)
	s.mu.Unlock()
	n.log.Error("journal keeps refusing; the holder goes on in memory (a restart would repeat this)", "key", next.Record().Key, "err", err)
	n.afterHeld(s, next, rd)
	return rd
}

func (n *Node) afterHeld(s *heldSlot, m *held.Holder, rd held.Ready) {
	rec := m.Record()
	if rd.Stop {
		s.rt.Lock()
		if s.cancel != nil {
			s.cancel()
		}
		s.rt.Unlock()
	}
	for _, note := range rd.Notes {
		switch note.Kind {
		case "superseded":
			n.log.Warn("held work superseded", "key", rec.Key, "attempt", rec.Attempt(), "why", note.Reason)
			n.ev.Emit(events.Event{Type: events.Superseded, Workflow: rec.Pack.WorkflowID, Step: headPath(rec.Pack), Attempt: rec.Attempt(), Reason: note.Reason})
		case "handed-on":
			n.ev.Emit(events.Event{Type: events.HandedOn, Workflow: rec.Pack.WorkflowID, Step: headPath(rec.Pack), Attempt: rec.Attempt()})
		}
	}
	if rd.Ended {
		if m.Phase() == held.PhaseDone {
			// Handed on: the beats say so to its guardians for a while
			// (node/guard G17), from before it leaves the table.
			n.letGo.add(m, n.clock.Now(), n.letGoKept())
		}
		n.helds.remove(rec.Key, s)
	}
	if rd.BeatsChanged || rd.Ended {
		n.kickBeats()
		n.touchActivity()
	}
}

// hold takes work this peer starts holding without a hand-off (the
// origin's first pack): journaled, then run.
func (n *Node) hold(rec held.Record) error {
	s, fresh := n.helds.add(rec.Key, held.Accept(n.selfID, rec), n.clock.Now())
	if !fresh {
		return fmt.Errorf("workflow %s is already held here", rec.Pack.WorkflowID)
	}
	if _, err := n.stepHeld(s, held.Accepted{}); err != nil {
		n.helds.remove(rec.Key, s)
		return err
	}
	if _, err := n.stepHeld(s, held.Settled{Result: held.SettleOK}); err != nil {
		n.helds.remove(rec.Key, s)
		n.journalFailed("drop held pack", rec.Key, n.persistHeld(s, s.view(), held.PersistDrop))
		return err
	}
	n.spawn(func(ctx context.Context) { n.process(ctx, s) })
	return nil
}

// process carries held work through its phases: run the step (unless the
// journal says it ran), hand on what follows, release the guardians. A
// guardian's re-route stops it through supersedeHeld (the machine's Stop).
func (n *Node) process(ctx context.Context, s *heldSlot) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.rt.Lock()
	s.cancel = cancel
	s.since = n.clock.Now()
	s.rt.Unlock()
	if s.view().Phase().Ended() {
		return // superseded before it started
	}
	for ctx.Err() == nil {
		m := s.view()
		rec := m.Record()
		switch {
		case m.Phase() == held.PhaseRunning && !rec.DispatchOnly:
			if !n.runHeld(ctx, s, rec) {
				return
			}
		case m.Phase() == held.PhaseRunning, m.Phase() == held.PhaseRan:
			if !n.forwardHeld(ctx, s) {
				return
			}
		case m.Phase() == held.PhaseForwarded:
			n.releaseGuardians(ctx, rec.GuardKey, rec.Attempt(), m.Guardians())
			if ctx.Err() != nil {
				return // stopping: a restart releases them again
			}
			n.stepHeldBackground(s, held.Released{})
		default:
			return
		}
	}
}

// runHeld runs the step and steps its outcome; false when nothing more is
// to be done here (cancelled, superseded, stopping).
func (n *Node) runHeld(ctx context.Context, s *heldSlot, rec *held.Record) bool {
	p := rec.Pack
	n.running.Add(1)
	n.presenceMayChange() // the queue announced
	start := n.clock.Now()
	out, trace, err := n.execute(ctx, p)
	took := n.clock.Since(start)
	n.running.Add(-1)
	n.presenceMayChange()
	n.ev.Emit(stepRunEvent(ctx, p, trace, err))
	for i := range trace {
		n.reportEvent(p, trace[i])
	}
	if errors.Is(err, errCancelled) || ctx.Err() != nil {
		if n.ctx.Err() == nil && n.isCancelled(p) {
			rd := n.stepHeldBackground(s, held.Stopped{Cancelled: true})
			n.releaseGuardians(n.ctx, rec.GuardKey, rec.Attempt(), rd.Release)
		}
		return false
	}
	ran := held.Ran{OK: err == nil, Output: out, Trace: trace, Took: took}
	if err != nil {
		ran.Error = err.Error()
	} else {
		n.learnFrom(trace)
	}
	// The outcome of an at-most-once or a slow step is journaled before
	// anything moves on, so a restart forwards it instead of running the
	// step again; a quick one is journaled with its hand-on (H4).
	n.stepHeldBackground(s, ran)
	if head, err := p.Head(); err == nil {
		n.killAfterRan.kill(head.Name, n.cfg.DataDir, n.log)
	}
	return true
}

// forwardHeld hands on what follows the step; false when the hand-on
// stopped (superseded, cancelled, stopping).
func (n *Node) forwardHeld(ctx context.Context, s *heldSlot) bool {
	rd := n.stepHeldBackground(s, held.StartForwarding{})
	f := rd.Forward
	if f == nil {
		return false
	}
	next := f.Pack
	var err error
	var h *handedOff
	switch {
	case f.Failed:
		err = n.finishBranch(ctx, next, false, f.Error)
	case len(next.Workflow.Steps) == 0:
		err = n.finishBranch(ctx, next, true, "")
	default:
		next = n.stashUnread(ctx, next)
		h, err = n.dispatchUnguarded(ctx, next)
	}
	if errors.Is(err, errSuperseded) {
		// The next holder, the join or the origin refused it: a guardian
		// re-routed this step, so this holder is superseded even if its
		// notice was lost.
		n.stepHeldBackground(s, held.Superseded{Attempt: s.view().Record().Attempt() + 1})
		return false
	}
	if err != nil {
		return false
	}
	if h != nil {
		// Guarded whatever happens to this holder: the next holder took it.
		if ctx.Err() != nil {
			n.guardHandedOff(next, *h, nil)
			return false // superseded (or stopping) while handing on
		}
		n.forwardedAndGuarded(s, next, *h)
		return true
	}
	if ctx.Err() != nil {
		return false // superseded (or stopping) while handing on
	}
	n.stepHeldBackground(s, held.Forwarded{})
	return true
}

// forwardedAndGuarded records that the holder s handed on what followed
// its step (held.Forwarded; guardians the next holder released need no
// second release, H6) and keeps this peer's guard copy of what it handed
// on (guardHandedOff), in one journal transaction: both follow the next
// holder's ack, and one commit instead of two is a fsync'd write less a
// hop. A failed write falls back to the two writes one after
// the other (each retried or logged as before).
func (n *Node) forwardedAndGuarded(s *heldSlot, next *pack.Pack, h handedOff) {
	forwarded := held.Forwarded{Released: h.released}
	store, ok := n.guardStoreFor(next, h, nil)
	if !ok {
		n.stepHeldBackground(s, forwarded)
		return
	}
	key := guardKey(next)
	gs := n.guards.locked(key)
	gm := gs.cur.Load().Clone()
	grd := gm.Step(store)
	s.mu.Lock()
	hm := s.view().Clone()
	hrd := hm.Step(forwarded)
	hwrite, hdone, err := n.heldWrite(s, hm, hrd.Persist)
	if err == nil {
		err = n.journal.Update(func(tx *journal.Tx) error {
			if gwrite := guardWrite(gm, grd.Persist); gwrite != nil {
				if err := gwrite(tx); err != nil {
					return err
				}
			}
			if hwrite != nil {
				return hwrite(tx)
			}
			return nil
		})
	}
	if err != nil {
		s.mu.Unlock()
		gs.mu.Unlock()
		n.log.Warn("journal refused the hand-on and its guard copy in one write; writing them apart", "key", key, "err", err)
		n.guardHandedOff(next, h, nil)
		n.stepHeldBackground(s, forwarded)
		return
	}
	if hdone != nil {
		hdone()
	}
	s.cur.Store(hm)
	s.mu.Unlock()
	n.pendingGoneLater(gm, grd)
	n.guards.commit(key, gs, gm)
	gs.mu.Unlock()
	n.applyGuard(key, grd)
	n.afterHeld(s, hm, hrd)
}

// releaseGuardians tells guardians that the step gkey moved on at attempt
// (the successor released them already when it settled; this covers a
// successor that could not reach one).
func (n *Node) releaseGuardians(ctx context.Context, gkey string, attempt int, gs []pack.Peer) {
	msg := api.GuardRelease{Key: gkey, Attempt: attempt}
	for _, g := range gs {
		if g.ID == n.selfID {
			continue
		}
		for try := 0; try < 3; try++ {
			if rep := n.guardCall(ctx, g, msg, 2*time.Second); rep.Error == "" {
				break
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// offerWatcher offers g as a guardian of the work gkey at attempt; the
// reply says whether it was taken (Released: the work moved on or its
// settle list is taken, so g must drop what it keeps).
func (n *Node) offerWatcher(gkey string, attempt int, g pack.Peer) api.GuardReply {
	if !n.resumed.Load() {
		// The journal's held work is not back in the table yet: not
		// finding the work says nothing (the guardian asks again later).
		return api.GuardReply{OK: true}
	}
	s := n.helds.find(gkey, attempt)
	if s == nil {
		key := journal.AttemptKey(gkey, attempt)
		_, ended := n.handedOn.get(key)
		if _, refused := n.unsettled.get(key); refused && !ended {
			// Refused as unsettled and never taken: it did not move on
			// from here either (node/guard G10).
			return api.GuardReply{OK: true, NeverTook: true}
		}
		return api.GuardReply{OK: true, Released: true}
	}
	rd, err := n.stepHeld(s, held.OfferWatcher{Peer: g, Attempt: attempt})
	if err != nil {
		return api.GuardReply{Error: err.Error()}
	}
	if rd.Reply == nil {
		return api.GuardReply{OK: true}
	}
	return api.GuardReply{OK: rd.Reply.OK, Released: rd.Reply.Released, Error: rd.Reply.Error}
}

// supersedeHeld stops held work under gkey older than attempt: a guardian
// re-routed it, so this copy is stale.
func (n *Node) supersedeHeld(gkey string, attempt int) {
	for _, s := range n.helds.all() {
		if s.view().Record().GuardKey == gkey {
			n.stepHeldBackground(s, held.Superseded{Attempt: attempt})
		}
	}
}

// resumeHeld restarts work read back from the journal (s: its slot, added
// by resume before the node answers questions about it): it asks the
// guardians (all at once) and the origin whether the work is still this
// peer's, as the machine says, then carries on with it (H5).
func (n *Node) resumeHeld(ctx context.Context, s *heldSlot, rec held.Record) {
	s.mu.Lock()
	s.packSaved = true
	s.mu.Unlock()
	n.log.Info("resuming held pack", "key", rec.Key, "executed", rec.Executed, "forwarded", rec.Forwarded)
	rd := n.stepHeldBackground(s, held.Restored{})
	deadline := n.clock.Now().Add(n.cfg.RestartGrace)
	if rd.Ask != nil && !rec.Executed {
		// Journaled before the kill, but perhaps never settled nor
		// acknowledged: the sender, restarted too, may be handing the
		// same attempt to another peer. Settling it again as its
		// successor (a no-op if it was settled) decides which of the two
		// has it (G8): one taken by another first is dropped here.
		if o, done := n.resettle(ctx, &rec, deadline); done {
			rd = n.stepHeldBackground(s, o)
		}
	}
	for rd.Ask != nil {
		owners := n.askOwners(ctx, &rec, *rd.Ask)
		owners.GiveUp = !owners.Answered && n.clock.Now().After(deadline)
		if !owners.Answered && !owners.GiveUp && !owners.Superseded && !owners.Released && !owners.Ended {
			n.log.Info("resuming held pack: waiting for every guardian to answer", "key", rec.Key, "until", deadline.Format(time.RFC3339))
		}
		if ctx.Err() != nil {
			return
		}
		if rd = n.stepHeldBackground(s, owners); rd.Ask != nil {
			select {
			case <-ctx.Done():
				return
			case <-n.clock.After(500 * time.Millisecond):
			}
		}
	}
	if !s.view().Phase().Ended() {
		n.process(ctx, s)
	}
}

// resettle settles again, as its successor, the hand-over of work read
// back from the journal before its step ran, trying until deadline while
// its peers do not answer. It returns the verdict to step when one
// decides (taken by another successor: released; a guardian re-routed:
// superseded), done false otherwise (settled, or unanswered: H5 asks on).
func (n *Node) resettle(ctx context.Context, rec *held.Record, deadline time.Time) (held.Owners, bool) {
	items := rec.Pack.Settle
	if len(items) == 0 {
		return held.Owners{}, false
	}
	for {
		err := n.settle(ctx, rec.Attempt(), items, n.successorOf(rec.Pack))
		var taken takenError
		switch {
		case errors.As(err, &taken):
			n.log.Warn("resuming held pack: another peer took it first", "key", rec.Key, "taken_by", rpc.ShortIDString(taken.By))
			return held.Owners{Released: true}, true
		case errors.Is(err, errSuperseded):
			return held.Owners{Superseded: true}, true
		case !errors.Is(err, errUnsettled) || n.clock.Now().After(deadline):
			return held.Owners{}, false
		}
		select {
		case <-ctx.Done():
			return held.Owners{}, false
		case <-n.clock.After(500 * time.Millisecond):
		}
	}
}

// askOwners asks every guardian whether it re-routed or released the
// attempt (a guardian that restarted too may still hold the copy it had,
// while the one that re-routed knows better, so any that says so wins),
// and the origin whether the workflow ended.
func (n *Node) askOwners(ctx context.Context, rec *held.Record, q held.AskOwners) held.Owners {
	replies, errs := n.guardCallAll(ctx, q.Guardians, func(pack.Peer) api.GuardRequest {
		return api.GuardOwner{Key: rec.GuardKey, Attempt: q.Attempt}
	}, settleCallTimeout)
	o := held.Owners{Answered: true}
	// The successors named, each with the work it took (one peer takes
	// one attempt's next work, whichever guardian names it).
	var named []pack.Peer
	took := map[string]string{}
	unnamed := false
	for i, rep := range replies {
		if errs[i] != nil || !rep.OK {
			o.Answered = false
			continue
		}
		o.Superseded = o.Superseded || rep.Superseded
		o.Released = o.Released || rep.Released
		switch {
		case !rep.Released:
		case rep.TookKey != "" && rep.Holder.ID != "":
			if _, dup := took[rep.Holder.ID]; !dup {
				named = append(named, rep.Holder)
			}
			took[rep.Holder.ID] = rep.TookKey
		default:
			unnamed = true
		}
	}
	if q.Origin {
		o.Ended = n.workflowEnded(ctx, rec.Pack)
	}
	// A release that names no successor stands (H7): only releases that
	// all name one are checked with it.
	if o.Released && !unnamed && !o.Superseded && !o.Ended && !rec.Forwarded {
		o.Successor = n.askSuccessors(ctx, rec.Key, named, took)
		if o.Successor == held.SuccessorNeverTook {
			n.log.Warn("resuming held pack: a guardian was released by a successor that never took the work (it refused the hand-over); going on", "key", rec.Key, "successors", len(named))
		}
	}
	return o
}

// askSuccessors asks the successors that released guardians of key
// (node/guard G16) whether they took the work (api.HeldTook), and sums up
// their answers: any that took it decides; every one that never took it
// says the release was of a refused hand-over; otherwise unknown. With
// nobody named, the release stands (unnamed). to are the successors, took
// the work each took (by peer ID). A restarted holder asks it (node/held
// H7), and so does a guardian (node/guard G17): of its pending copy's
// successor (askTook), and of the successors its co-guardians name before
// a re-route (askCoGuardians).
func (n *Node) askSuccessors(ctx context.Context, key string, to []pack.Peer, took map[string]string) held.SuccessorSaid {
	if len(to) == 0 {
		return held.SuccessorUnnamed
	}
	replies, errs := n.guardCallAll(ctx, to, func(p pack.Peer) api.GuardRequest {
		return api.HeldTook{Key: took[p.ID]}
	}, settleCallTimeout)
	never := 0
	for i, rep := range replies {
		switch {
		case errs[i] != nil || !rep.OK || rep.Pending:
			n.log.Info("a successor a guardian named does not say whether it took the work", "key", key, "successor", rpc.ShortIDString(to[i].ID), "pending", rep.Pending, "err", errs[i])
		case rep.Known:
			return held.SuccessorTook
		case rep.NeverTook:
			never++
		}
	}
	if never == len(to) {
		return held.SuccessorNeverTook
	}
	return held.SuccessorUnknown
}

// tookOp answers a restarted holder asking whether this peer took the
// work key (api.HeldTook; node/held H7): Known when it holds the work
// past accepting it (running, resuming) or ran it and handed it on,
// Pending while it is still taking it or has not read its journal back,
// NeverTook otherwise — a refused hand-over leaves neither a record nor a
// handed-on memory.
func (n *Node) tookOp(key string) api.GuardReply {
	if !n.resumed.Load() {
		return api.GuardReply{OK: true, Pending: true}
	}
	if s, ok := n.helds.t.get(key); ok {
		switch ph := s.view().Phase(); {
		case ph == held.PhaseAccepting:
			return api.GuardReply{OK: true, Pending: true}
		case !ph.Ended():
			return api.GuardReply{OK: true, Known: true}
		}
		// Ended: a hand-on is remembered before the slot goes (below).
	}
	if _, ok := n.handedOn.get(key); ok {
		return api.GuardReply{OK: true, Known: true}
	}
	return api.GuardReply{OK: true, NeverTook: true}
}
