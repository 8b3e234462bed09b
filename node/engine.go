package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/pack"
)

// errCancelled marks work dropped because its workflow or branch was
// cancelled; it is not a failure to report.
var errCancelled = errors.New("cancelled")

func (n *Node) registerProtocols() {
	to := n.cfg.StreamTimeout
	n.calls.Serve(api.ProtoHandoff, n.limits.MaxBytes, to, n.handleHandoff)
	n.calls.Serve(api.ProtoDeliver, api.MaxControlFrame, to, n.handleDeliver)
	n.calls.Serve(api.ProtoOrigin, api.MaxControlFrame, to, n.handleOrigin)
	n.calls.Serve(api.ProtoOriginProgress, api.MaxControlFrame, to, n.handleProgress)
	rpc.Serve(n.host, n.clock, api.ProtoClient, api.MaxControlFrame, to, n.handleClient)
	n.serveGuard()
	n.host.SetStreamHandler(protocol.ID(api.ProtoBeat), n.serveBeat)
	n.host.SetStreamHandler(protocol.ID(api.ProtoBeatKeys), n.serveBeat)
	n.host.SetStreamHandler(protocol.ID(api.ProtoBeatHeld), n.serveBeat)
}

// handleHandoff accepts a pack from a sender: it checks the pack, checks that
// this peer declared the head service, journals the pack (fsync) and only
// then acknowledges; the step runs in the background.
func (n *Node) handleHandoff(ctx context.Context, from peer.ID, req []byte) []byte {
	p, err := pack.Decode(req, n.limits)
	if err != nil {
		n.log.Warn("rejected a malformed pack", "from", rpc.ShortID(from), "err", err)
		return rpc.AckBytes(api.CodeBadPack, "bad pack: "+err.Error())
	}
	return rpc.MustCBOR(n.accept(ctx, p, req))
}

// accept takes p if it can: it journals the pack (I4), recruits a backup
// guardian besides the sender, settles what the sender asked (see
// settle.go) and only then acknowledges, listing the backup; the step runs
// in the background. A pack whose chain a guardian re-routed meanwhile is
// refused (CodeSuperseded) and dropped: the superseded chain stops here.
func (n *Node) accept(ctx context.Context, p *pack.Pack, raw []byte) api.Ack {
	refuse := func(code, msg string) api.Ack { return api.Ack{Code: code, Error: msg} }
	head, err := p.Head()
	if err != nil {
		return refuse(api.CodeBadPack, "bad pack: "+err.Error())
	}
	if !n.services.Offers(head.Name) {
		return refuse(api.CodeUnknownService, fmt.Sprintf("peer %s (zone %s) does not offer service %q; it offers %s",
			rpc.ShortID(n.host.ID()), n.cfg.Zone, head.Name, n.offerSummary()))
	}
	if n.draining.Load() {
		return refuse(api.CodeDraining, fmt.Sprintf("peer %s is draining before a power cut", rpc.ShortID(n.host.ID())))
	}
	if n.isCancelled(p) {
		return refuse(api.CodeCancelled, "workflow "+p.WorkflowID+" was cancelled")
	}
	if e, ended := n.handedOn.get(heldKey(p)); ended {
		if ack, answered := n.endedBefore(p, head, e.v); answered {
			return ack
		}
	}
	if n.guards.view(guardKey(p)).Supersedes(p.Attempt) {
		// This peer guards the step and re-routed it past this attempt
		// (node/guard G9).
		n.log.Info("a step this peer re-routed was handed here at the old attempt; refused", "workflow", p.WorkflowID, "step", head.Name, "path", head.Path, "attempt", p.Attempt)
		return refuse(api.CodeSuperseded, fmt.Sprintf("workflow %s: peer %s re-routed this step past attempt %d; this chain stops here", p.WorkflowID, rpc.ShortID(n.host.ID()), p.Attempt))
	}
	// Handed a newer attempt of a step this peer guards at an older one:
	// that attempt was re-routed, whoever told whom (node/guard G9).
	n.noteNewerAttempt(guardKey(p), p.Attempt)
	// Admission (capacity.go): a full node refuses before anything is
	// journaled; a place taken here is given back unless the step is taken.
	giveBack, busy := n.admitStep(p)
	if busy != nil {
		return *busy
	}
	taken := false
	defer func() {
		if !taken {
			giveBack()
		}
	}()
	n.learnFrom(p.Trace)
	// The bytes received are journaled as they came (no re-encoding); a
	// local hand-off's pack is encoded here, for the journal and the backup.
	if raw == nil {
		var err error
		if raw, err = pack.Encode(p); err != nil {
			return refuse(api.CodeInternal, "encode pack: "+err.Error())
		}
	}
	rec := held.Record{Pack: p, PackRaw: raw, Key: heldKey(p), GuardKey: guardKey(p)}
	if p.Sender.ID != "" && p.Sender.ID != n.selfID {
		rec.Guardians = []pack.Peer{p.Sender}
	}
	// The backup guardian is chosen before the first write and named in
	// it, so the usual hand-over journals the holder once, not twice, and
	// the backup stores its copy while this peer writes. That order is
	// safe: both copies are durable before anything is released, and the
	// ack waits for the releases (docs/protocol.md).
	//
	// When the settle releases one step, its guardians are preferred as
	// the backup, and the copy rides the release sent to the one chosen,
	// before the other guardians are released: one request and one
	// commit there instead of two (docs/protocol.md).
	rideKey, ridePeers := rideItem(p.Settle, n.selfID)
	backup := n.pickHolderBackup(rec, ridePeers)
	if backup.ID != "" {
		rec.Guardians = append(rec.Guardians, backup)
	}
	ride := n.rideFor(rec, backup, rideKey, ridePeers)
	s, fresh := n.helds.add(rec.Key, held.Accept(n.selfID, rec), n.clock.Now())
	if !fresh {
		// The same attempt handed here again (a sender whose first
		// hand-off timed out tried again): answer as the first one ends.
		ack, again := n.acceptedBefore(ctx, s, p)
		if !again {
			return ack
		}
		// The first was refused while it was being taken: this hand-off
		// is taken afresh, with a place of its own.
		giveBack()
		taken = true
		return n.accept(ctx, p, raw)
	}
	// Two copies besides this one before anything is released: the
	// sender's (once it hears the ack) and a backup's.
	recruited := make(chan recruitedBackups, 1)
	if ride == nil {
		go func() {
			more, refused := n.recruitHolderBackup(ctx, rec, backup)
			recruited <- recruitedBackups{more, refused}
		}()
	} else {
		// Stored with the release, below (settleRiding).
		recruited <- recruitedBackups{}
	}
	_, err = n.stepHeld(s, held.Accepted{})
	backups := <-recruited
	asked := backups.more
	if backup.ID != "" {
		asked = append(asked, backup)
	}
	if err != nil {
		n.withdrawBackups(n.ctx, rec.GuardKey, p.Attempt, asked)
		n.helds.remove(rec.Key, s)
		return refuse(api.CodeInternal, err.Error())
	}
	if len(backups.more) > 0 || backups.refused {
		ev := held.BackupsRecruited{Peers: backups.more}
		if backups.refused {
			ev.Refused = []pack.Peer{backup}
		}
		if _, err := n.stepHeld(s, ev); err != nil {
			n.withdrawBackups(n.ctx, rec.GuardKey, p.Attempt, asked)
			n.helds.remove(rec.Key, s)
			n.journalFailed("drop held pack", rec.Key, n.persistHeld(s, s.view(), held.PersistDrop))
			return refuse(api.CodeInternal, err.Error())
		}
	}
	settled := held.Settled{Result: held.SettleOK}
	var takenBy takenError
	// Every settle of this hand-over ends within acceptSettleBudget, the
	// fallback after an unanswered ride included: the sender is waiting.
	settleCtx := withSettleDeadline(ctx, n.clock.Now().Add(acceptSettleBudget))
	answers, err := n.settleMissing(settleCtx, p.Attempt, p.Settle, n.successorOf(p), ride)
	if errors.Is(err, errRideUnanswered) {
		// The backup did not answer the copy it was sent with its
		// release, and nothing else was released: it stays named (it may
		// hold the copy), another peer is asked as well, and the settle
		// runs as it does without a ride.
		more := n.recruitAnotherBackup(ctx, rec, backup, ride.store)
		if len(more) > 0 {
			asked = append(asked, more...)
			if _, err := n.stepHeld(s, held.BackupsRecruited{Peers: more}); err != nil {
				n.withdrawBackups(n.ctx, rec.GuardKey, p.Attempt, asked)
				n.helds.remove(rec.Key, s)
				n.journalFailed("drop held pack", rec.Key, n.persistHeld(s, s.view(), held.PersistDrop))
				return refuse(api.CodeInternal, err.Error())
			}
		}
		answers, err = n.settleMissing(settleCtx, p.Attempt, p.Settle, n.successorOf(p), nil)
	}
	if err == nil && n.refuseSettled.fires(head.Name, n.cfg.DataDir) {
		n.log.Warn("failpoint: refusing a settled hand-over as unsettled", "failpoint", FailpointRefuseSettled, "workflow", p.WorkflowID, "step", head.Name)
		err = fmt.Errorf("%w (failpoint %s)", errUnsettled, FailpointRefuseSettled)
	}
	if errors.As(err, &takenBy) {
		settled.Result = held.SettleSuperseded
	} else if errors.Is(err, errSuperseded) {
		settled.Result = held.SettleSuperseded
	} else if errors.Is(err, errUnsettled) {
		settled = held.Settled{Result: held.SettleUnsettled, Err: err.Error()}
	} else if err != nil {
		settled = held.Settled{Result: held.SettleInterrupted, Err: err.Error()}
	} else if n.guards.view(rec.GuardKey).Supersedes(p.Attempt) {
		// Re-routed here while this hand-off settled (node/guard G9).
		n.log.Info("a step this peer re-routed while taking it at the old attempt; refused", "workflow", p.WorkflowID, "step", head.Name, "path", head.Path, "attempt", p.Attempt)
		settled.Result = held.SettleSuperseded
	}
	rd, err := n.stepHeld(s, settled)
	if err != nil {
		// The drop failed: the record stays and a restart asks its
		// guardians, which answer that the step moved on.
		n.helds.remove(rec.Key, s)
		return refuse(api.CodeInternal, err.Error())
	}
	// Released on the node's context: ctx may be the one that ended.
	n.withdrawBackups(n.ctx, rec.GuardKey, p.Attempt, rd.Withdraw)
	switch r := rd.Reply; {
	case r == nil:
		return refuse(api.CodeInternal, "workflow "+p.WorkflowID+": no decision")
	case r.Code == held.CodeSuperseded && takenBy.By != "":
		n.log.Warn("refusing work another peer took first", "workflow", p.WorkflowID, "step", head.Name, "path", head.Path, "taken_by", rpc.ShortIDString(takenBy.By))
		return api.Ack{Code: api.CodeTaken, Error: fmt.Sprintf("workflow %s: step %s (path %s) attempt %d: %v", p.WorkflowID, head.Name, head.Path, p.Attempt, takenBy),
			Guardians: []pack.Peer{{ID: takenBy.By}}}
	case r.Code == held.CodeSuperseded:
		n.log.Warn("refusing work of a superseded chain", "workflow", p.WorkflowID, "step", head.Name, "path", head.Path, "from", rpc.ShortIDString(p.Sender.ID))
		return refuse(api.CodeSuperseded, fmt.Sprintf("workflow %s: a guardian re-routed an earlier step; this chain stops at peer %s", p.WorkflowID, rpc.ShortID(n.host.ID())))
	case r.Code == held.CodeUnsettled:
		n.unsettled.put(rec.Key, n.clock.Now(), struct{}{})
		n.log.Warn("refusing an unsettled hand-over", "workflow", p.WorkflowID, "step", head.Name, "path", head.Path, "from", rpc.ShortIDString(p.Sender.ID), "err", r.Error)
		return refuse(api.CodeUnsettled, fmt.Sprintf("workflow %s: at peer %s: %s", p.WorkflowID, rpc.ShortID(n.host.ID()), r.Error))
	case !r.OK:
		return refuse(api.CodeInternal, fmt.Sprintf("workflow %s: at peer %s: %s", p.WorkflowID, rpc.ShortID(n.host.ID()), r.Error))
	}
	accepted := events.Event{Type: events.Accepted, Workflow: p.WorkflowID, Step: head.Path, Attempt: p.Attempt, From: p.Sender.ID, After: lastRan(p.Trace)}
	for _, g := range rd.Reply.Guardians {
		accepted.Guardians = append(accepted.Guardians, g.ID)
	}
	n.ev.Emit(accepted)
	n.unsettled.remove(rec.Key)
	n.completeSettle(p.Settle, p.Attempt, n.successorOf(p), answers.missed)
	taken = true
	n.spawn(func(ctx context.Context) {
		defer n.bulk.Leave(rec.Key) // if it ends without running
		n.process(ctx, s)
	})
	return api.Ack{OK: true, Guardians: rd.Reply.Guardians, Released: releasedGuardians(p.Settle, answers.got)}
}

// endedBefore answers a hand-off of a step and attempt that ended here
// before (a sender that missed the ack, or the first receiver named by a
// taken refusal), as e remembers: it ran and moved on (taken: OK), or a
// guardian re-routed it (superseded) — if the pack is of the same chain
// (pack.Lineage). Of an older chain (a holder cut off while a guardian
// re-routed a step before this one) it is refused as superseded; of a
// newer chain it is not answered (answered false) and is taken afresh.
func (n *Node) endedBefore(p *pack.Pack, head *grammar.Service, e handedOnEntry) (ack api.Ack, answered bool) {
	log := n.log.With("workflow", p.WorkflowID, "step", head.Name, "path", head.Path, "attempt", p.Attempt)
	switch order, refusal := n.chainOrder(p, e.lineage, "ended"); order {
	case -1:
		return refusal, true
	case 1:
		log.Info("a step this peer ended for an older chain was handed here by a newer one; taking it", "lineage", p.Lineage().String(), "older", e.lineage.String())
		return api.Ack{}, false
	}
	if e.superseded {
		log.Info("a step superseded here was handed here again; refused")
		return api.Ack{Code: api.CodeSuperseded, Error: fmt.Sprintf("workflow %s: a guardian re-routed this step (attempt %d) at peer %s; this chain stops here", p.WorkflowID, p.Attempt, rpc.ShortID(n.host.ID()))}, true
	}
	log.Info("a step this peer ran and handed on was handed here again; answered as taken")
	return api.Ack{OK: true}, true
}

// chainOrder compares the chain of p with the chain of the same step and
// attempt that this peer holds or ended ("held", "ended"), mine: -1 when
// p's chain is the older one, with the superseded refusal that stops it
// here (I1); +1 when p's is the newer; 0 when they are the same chain.
func (n *Node) chainOrder(p *pack.Pack, mine pack.Lineage, how string) (int, api.Ack) {
	order := p.Lineage().Compare(mine)
	if order >= 0 {
		return order, api.Ack{}
	}
	path := headPath(p)
	n.log.Info("a step of a newer chain is "+how+" here; an older chain's hand-off of it refused", "workflow", p.WorkflowID, "step", path, "attempt", p.Attempt, "lineage", p.Lineage().String(), "newer", mine.String())
	return order, api.Ack{Code: api.CodeSuperseded, Error: fmt.Sprintf("workflow %s: peer %s %s step %s attempt %d in a chain that re-routed this one; this chain stops here",
		p.WorkflowID, rpc.ShortID(n.host.ID()), how, path, p.Attempt)}
}

// noteNewerAttempt marks the guard copy of key re-routed when it is of an
// attempt older than attempt: a guardian re-routed the step, and this peer
// may be the new attempt's receiver without being told as a guardian (a
// re-route's target is not sent the old attempt's "re-routed" release).
// From then on its copy answers a release of the old attempt Superseded,
// as the primary would: a holder of the old attempt cut off during the
// re-route whose settle reached only this peer would otherwise hand on a
// second chain (isolate-join-holder).
func (n *Node) noteNewerAttempt(key string, attempt int) {
	if n.guards.view(key).Empty() {
		return // nothing guarded here: no machine to step
	}
	rd, err := n.stepGuard(key, guard.NewerAttempt{Attempt: attempt, At: n.clock.Now().UTC()})
	if err != nil {
		n.log.Error("step guard", "event", "NewerAttempt", "key", key, "err", err)
		return
	}
	if rd.Persist != guard.PersistNone {
		n.log.Info("handed a newer attempt of a step guarded here; the old one was re-routed", "key", key, "attempt", attempt)
	}
}

// acceptedBefore answers a hand-off of work this peer already holds or is
// still taking: once the first acceptance ends, OK if it took the work
// (it runs here once), else its refusal. Refusing while the first is
// still being taken would send the sender to another peer, and the step
// would run twice.
//
// A first acceptance refused as superseded while it was being taken
// (another receiver took the attempt first, G8 and J6; or a guardian's
// answer said so) is not remembered as an end (handedon.go), and its
// refusal is not the answer: again says to take this hand-off afresh once
// that slot is gone, settling anew. A sender that hands the step here
// again is one told that this peer took it first (handToFirst): the
// guardians or join copies that recorded this peer answer it as before,
// or name the receiver they recorded since (a swap resolved, guard G14,
// join J11). Answered "superseded" instead, the sender would stop its
// chain while neither receiver held the step: a FORK branch start to a
// peer whose link flapped would be lost.
func (n *Node) acceptedBefore(ctx context.Context, s *heldSlot, p *pack.Pack) (ack api.Ack, again bool) {
	// The same step and attempt of another chain (pack.Lineage) is not
	// the work held here: of an older chain it stops here, and a newer
	// chain is sent to another peer while this peer holds the older one
	// (one record per step and attempt), not answered as the older one
	// ends — a newer chain told "superseded" would drop its work.
	switch order, refusal := n.chainOrder(p, s.view().Record().Pack.Lineage(), "held"); order {
	case -1:
		return refusal, false
	case 1:
		n.log.Info("a step this peer holds for an older chain was handed here by a newer one; sent elsewhere", "workflow", p.WorkflowID, "step", headPath(p), "attempt", p.Attempt, "lineage", p.Lineage().String())
		return api.Ack{Code: api.CodeBusy, Error: fmt.Sprintf("workflow %s: peer %s holds step %s attempt %d for an older chain; try another peer", p.WorkflowID, rpc.ShortID(n.host.ID()), headPath(p), p.Attempt)}, false
	}
	// G20 at a receiver that holds the attempt already: the same attempt
	// re-routed by another guardian (two claims, both of whose receivers
	// are this peer) is a second chain, refused like a re-route whose
	// settle a guardian refused; the first one taken here goes on. A
	// re-route resent by its own re-router (its ack lost) is answered as
	// before.
	if heldBy, by := reroutedBy(s.view().Record().Pack), reroutedBy(p); heldBy != "" && by != "" && heldBy != by {
		n.log.Warn("a second guardian's re-route of a step held here refused", "workflow", p.WorkflowID, "step", headPath(p), "attempt", p.Attempt, "held_from", rpc.ShortIDString(heldBy), "refused", rpc.ShortIDString(by))
		return api.Ack{Code: api.CodeSuperseded, Error: fmt.Sprintf("workflow %s: peer %s holds step %s attempt %d as re-routed by another guardian", p.WorkflowID, rpc.ShortID(n.host.ID()), headPath(p), p.Attempt)}, false
	}
	key := s.view().Record().Key
	for {
		m := s.view()
		switch ph := m.Phase(); {
		case ph == held.PhaseSuperseded:
			if e, ok := n.handedOn.get(key); ok && e.v.superseded {
				// Superseded after it was taken: a guardian re-routed it.
				return api.Ack{Code: api.CodeSuperseded, Error: fmt.Sprintf("workflow %s: a guardian re-routed an earlier step; this chain stops at peer %s", p.WorkflowID, rpc.ShortID(n.host.ID()))}, false
			}
			if cur, ok := n.helds.t.get(key); !ok || cur != s {
				return api.Ack{}, true
			}
		case ph == held.PhaseCancelled:
			return api.Ack{Code: api.CodeCancelled, Error: "workflow " + p.WorkflowID + " was cancelled"}, false
		case ph == held.PhaseDone && m.Record().Forwarded:
			return api.Ack{OK: true}, false // it ran here and moved on
		case ph.Ended():
			return api.Ack{Code: api.CodeInternal, Error: fmt.Sprintf("workflow %s: peer %s could not take this step", p.WorkflowID, rpc.ShortID(n.host.ID()))}, false
		case ph >= held.PhaseRunning:
			return api.Ack{OK: true}, false
		}
		select {
		case <-ctx.Done():
			return api.Ack{Code: api.CodeInternal, Error: fmt.Sprintf("workflow %s: peer %s is still taking this step", p.WorkflowID, rpc.ShortID(n.host.ID()))}, false
		case <-n.clock.After(20 * time.Millisecond):
		}
	}
}

// reroutedBy is the guardian that re-routed p (the Actor of its
// pack.SettleRerouted item), "" for a pack no guardian re-routed.
func reroutedBy(p *pack.Pack) string {
	if p == nil {
		return ""
	}
	for _, it := range p.Settle {
		if it.Kind == pack.SettleRerouted {
			return it.Actor
		}
	}
	return ""
}

// pickHolderBackup chooses the backup guardian of work being accepted: a
// live peer in another zone (not this one, not the sender, the primary),
// one of prefer (rideItem's) among peers that rank alike; none when
// nobody can be asked.
func (n *Node) pickHolderBackup(rec held.Record, prefer []pack.Peer) pack.Peer {
	exclude, avoid := n.holderBackupExclusions(rec)
	var preferIDs map[peer.ID]bool
	for _, g := range prefer {
		if id, err := peer.Decode(g.ID); err == nil {
			if preferIDs == nil {
				preferIDs = map[peer.ID]bool{}
			}
			preferIDs[id] = true
		}
	}
	b, ok := n.pickGuardianPreferring(exclude, avoid, preferIDs)
	if !ok {
		return pack.Peer{}
	}
	return n.peerRef(b)
}

func (n *Node) holderBackupExclusions(rec held.Record) (map[peer.ID]bool, map[string]bool) {
	exclude := map[peer.ID]bool{n.host.ID(): true}
	primary := pack.Peer{}
	if len(rec.Guardians) > 0 {
		primary = rec.Guardians[0]
		if id, err := peer.Decode(primary.ID); err == nil {
			exclude[id] = true
		}
	}
	return exclude, map[string]bool{n.cfg.Zone: true, primary.Zone: true}
}

// recruitedBackups is what recruitHolderBackup found.
type recruitedBackups struct {
	more    []pack.Peer
	refused bool
}

// recruitHolderBackup asks first, the backup named in the held record when
// it was first journaled (pickHolderBackup), to keep a copy of the work as
// its backup guardian, the sender being the primary. When first does not
// take it, one other peer is asked, and returned in more if it took the
// copy or its answer never came. A peer whose answer never came stays a
// guardian (first stays named; another is returned in more): it may keep
// a copy, and the successor's release must reach it, or its copy would
// outlive the step and re-route it once its link came back. A first
// that refused is to be taken off the record
// (refused).
func (n *Node) recruitHolderBackup(ctx context.Context, rec held.Record, first pack.Peer) (more []pack.Peer, refused bool) {
	raw := rec.PackRaw
	if raw == nil || first.ID == "" {
		return nil, false
	}
	msg := holderBackupStore(rec, first, n.self())
	rep, err := n.guardCallErr(ctx, first, msg, settleCallTimeout)
	if err == nil && rep.OK {
		return nil, false
	}
	return n.recruitAnotherBackup(ctx, rec, first, msg), err == nil
}

// recruitAnotherBackup asks one peer other than first (and the peers
// pickHolderBackup excludes) to keep msg's copy, and returns it if it
// took the copy or its answer never came (it may keep one).
func (n *Node) recruitAnotherBackup(ctx context.Context, rec held.Record, first pack.Peer, msg api.GuardStore) []pack.Peer {
	exclude, avoid := n.holderBackupExclusions(rec)
	if id, err := peer.Decode(first.ID); err == nil {
		exclude[id] = true
	}
	b, found := n.pickGuardianAvoiding(exclude, avoid)
	if !found {
		return nil
	}
	ref := n.peerRef(b)
	if rep, err := n.guardCallErr(ctx, ref, msg, settleCallTimeout); (err == nil && rep.OK) || err != nil {
		return []pack.Peer{ref}
	}
	return nil
}

// rideFor is the copy backup keeps sent with its release of the step
// rideKey (rideItem's), when backup is one of that step's guardians
// (ridePeers), of another step than rec's, and announced the protocol
// (a board of an older release gets the store and the release apart);
// nil otherwise.
func (n *Node) rideFor(rec held.Record, backup pack.Peer, rideKey string, ridePeers []pack.Peer) *rideStore {
	if backup.ID == "" || rideKey == "" || rideKey == rec.GuardKey || !slices.ContainsFunc(ridePeers, func(g pack.Peer) bool { return g.ID == backup.ID }) {
		return nil
	}
	if id, err := peer.Decode(backup.ID); err != nil || !n.speaks(id, api.ProtoGuardStoreRelease) {
		return nil
	}
	return &rideStore{to: backup.ID, store: holderBackupStore(rec, backup, n.self())}
}

// holderBackupStore asks a peer to keep a copy of the work rec, held by
// self, as its backup guardian: the first guardian named in rec is the
// primary, unless it is first, the backup named in rec (a local hand-off:
// no sender keeps a copy).
func holderBackupStore(rec held.Record, first, self pack.Peer) api.GuardStore {
	primary := pack.Peer{}
	if len(rec.Guardians) > 0 && rec.Guardians[0].ID != first.ID {
		primary = rec.Guardians[0]
	}
	return api.GuardStore{Key: rec.GuardKey, Attempt: rec.Attempt(), Pack: rec.PackRaw, Holder: self, Primary: primary}
}

// withdrawBackups withdraws the copies of backup guardians recruited for
// work this peer does not keep after all: they drop the copy naming this
// peer and record nothing as moved on (node/guard G11), since the step
// lives on elsewhere (with its sender, or the peer that took it first).
//
// All at once, and it returns when every one answered or timed out: a
// refusal waits for it, and its sender for the refusal.
func (n *Node) withdrawBackups(ctx context.Context, key string, attempt int, backups []pack.Peer) {
	var wg sync.WaitGroup
	for _, b := range backups {
		wg.Go(func() { n.guardCall(ctx, b, api.GuardWithdraw{Key: key, Attempt: attempt}, settleCallTimeout) })
	}
	wg.Wait()
}

// learnFrom teaches the outage view how long the newest step of trace took,
// if it succeeded: every pack brings the run time of the step before it, so
// a peer learns the services it hands off, not only those it runs.
func (n *Node) learnFrom(trace []pack.TraceEntry) {
	if len(trace) == 0 {
		return
	}
	e := trace[len(trace)-1]
	if e.Outcome == pack.OutcomeOK && !e.Start.IsZero() && e.End.After(e.Start) {
		n.tt.view.Learn(e.Service, n.tt.clock.Virtual(e.End.Sub(e.Start)))
	}
}

func (n *Node) offerSummary() string {
	parts := append(append([]string{}, n.services.Names()...), n.services.Patterns()...)
	if len(parts) == 0 {
		return "nothing"
	}
	if len(parts) > 8 {
		parts = append(parts[:8], "…")
	}
	return strings.Join(parts, ", ")
}

// serviceAttrs are a step's attributes as the service sees them.
func serviceAttrs(s *grammar.Service) map[string]string {
	if len(s.Attrs) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.Attrs))
	for _, a := range s.Attrs {
		out[a.Key] = a.Value
	}
	return out
}

// readOutputs is what step s is given of the earlier outputs: all of them,
// or only the labels it declares with reads= (nil when it reads none).
func readOutputs(s *grammar.Service, outputs map[string]json.RawMessage) map[string]json.RawMessage {
	reads, declared := s.Reads()
	if !declared {
		return outputs
	}
	var out map[string]json.RawMessage
	for _, l := range reads {
		if v, ok := outputs[l]; ok {
			if out == nil {
				out = make(map[string]json.RawMessage, len(reads))
			}
			out[l] = v
		}
	}
	return out
}

// headPath is the path of p's head step ("" when the head is not a
// service: only the origin's first pack).
func headPath(p *pack.Pack) string {
	if s, err := p.Head(); err == nil {
		return s.Path
	}
	return ""
}

// lastRan is the path of the newest successful step in trace ("" if none):
// the step whose holder handed on the pack that carries this trace.
func lastRan(trace []pack.TraceEntry) string { return lastOK(trace).Path }

// lastOK is the last entry of trace that ran to completion (zero when
// none did).
func lastOK(trace []pack.TraceEntry) pack.TraceEntry {
	for i := len(trace) - 1; i >= 0; i-- {
		if trace[i].Outcome == pack.OutcomeOK {
			return trace[i]
		}
	}
	return pack.TraceEntry{}
}

// heldKey is the journal key of a held pack (journal.PackKey).
func heldKey(p *pack.Pack) string {
	return journal.PackKey(p.WorkflowID, headPath(p), p.Attempt)
}

// execute runs the head service of p with its retries, backoff and
// per-attempt timeout, returning its JSON output and one trace entry per try.
func (n *Node) execute(ctx context.Context, p *pack.Pack) (json.RawMessage, []pack.TraceEntry, error) {
	head, err := p.Head()
	if err != nil {
		return nil, nil, err
	}
	svc, ok := n.services.Lookup(head.Name)
	if !ok {
		return nil, nil, fmt.Errorf("step %s (%s): peer %s does not offer it", head.Name, head.Path, rpc.ShortID(n.host.ID()))
	}
	ctx, done := n.track(ctx, p)
	defer done()

	retries := head.Retries()
	bmin, bmax := head.Backoff()
	if bmin <= 0 {
		bmin = 200 * time.Millisecond
	}
	if bmax < bmin {
		bmax = max(bmin, 10*time.Second)
	}
	// The step's timeout attribute bounds each attempt; without one, the
	// service's own per-attempt timeout from the services file does (it
	// classifies its expiry itself); without either, the default.
	timeout := head.Timeout()
	deadline := timeout > 0
	if !deadline {
		if timeout = service.DeclaredTimeout(svc); timeout <= 0 {
			timeout, deadline = n.cfg.DefaultStepTimeout, true
		}
	}
	req := service.Request{
		WorkflowID:     p.WorkflowID,
		Step:           head.Path,
		Service:        head.Name,
		Attempt:        p.Attempt,
		IdempotencyKey: service.IdempotencyKey(p.WorkflowID, head.Path, p.Attempt),
		Peer:           n.selfID,
		Attrs:          serviceAttrs(head),
		Input:          p.Input,
		Outputs:        readOutputs(head, p.Outputs),
	}
	var trace []pack.TraceEntry
	var lastErr error
	for try := 0; try <= retries; try++ {
		if try > 0 {
			// Capped exponential backoff with full jitter.
			ceil := bmin << min(try-1, 30)
			if ceil > bmax || ceil <= 0 {
				ceil = bmax
			}
			wait := time.Duration(n.rand.Int64N(int64(ceil)) + 1)
			select {
			case <-ctx.Done():
				return nil, trace, errCancelled
			case <-n.clock.After(wait):
			}
		}
		release, err := n.acquireSlot(ctx, p, svc)
		if err != nil {
			return nil, trace, err
		}
		start := n.clock.Now()
		actx, cancel := ctx, context.CancelFunc(func() {})
		if deadline {
			actx, cancel = context.WithTimeout(ctx, timeout)
		}
		out, err := svc.Invoke(actx, req)
		release()
		// Read before cancel: after it, actx.Err() is always set.
		expired := ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		entry := pack.TraceEntry{
			Path: head.Path, Service: head.Name, Peer: n.selfID, Zone: n.cfg.Zone,
			Start: start.UTC(), End: n.clock.Now().UTC(), Attempt: p.Attempt, Outcome: pack.OutcomeOK,
		}
		if l := head.Label(); l != head.Name {
			entry.Label = l
		}
		if err == nil {
			trace = append(trace, entry)
			return out, trace, nil
		}
		if ctx.Err() != nil {
			entry.Outcome = pack.OutcomeCancelled
			entry.Note = "cancelled"
			trace = append(trace, entry)
			return nil, trace, errCancelled
		}
		if expired && !errors.As(err, new(*service.Timeout)) {
			err = fmt.Errorf("timed out after %s: %w", timeout, err)
		}
		entry.Outcome = pack.OutcomeFailed
		entry.Note = err.Error()
		trace = append(trace, entry)
		lastErr = err
		n.log.Info("step attempt failed", "workflow", p.WorkflowID, "step", head.Name, "path", head.Path, "try", try+1, "err", err)
	}
	return nil, trace, fmt.Errorf("step %s (path %s) failed on peer %s in zone %q after %d attempt(s): %w",
		head.Name, head.Path, rpc.ShortID(n.host.ID()), n.cfg.Zone, retries+1, lastErr)
}

// errChainSuperseded: the receiver refused a hand-off because a guardian
// re-routed an earlier step of its chain. It is also errCancelled (the
// sender stops as for a cancel) and errSuperseded (the sender's work is
// superseded, not handed on).
var errChainSuperseded = fmt.Errorf("%w: %w", errCancelled, errSuperseded)

// continuationSuperseded reports whether p is a join's continuation
// (its settle names the join's actor, pack.SettleJoinForwarded) whose
// actor this peer's copy of the join knows was taken over since (J7). Its
// sender stops trying: a receiver that refused it as unsettled (a copy
// cut off) and is asked again later may settle it with a copy that does
// not know the newer actor yet, while the newer actor's continuation went
// on (flapping-link; join J7).
func (n *Node) continuationSuperseded(p *pack.Pack) bool {
	for _, it := range p.Settle {
		if it.Kind != pack.SettleJoinForwarded {
			continue
		}
		if c := n.joins.get(it.Key); c != nil && (join.Token{Epoch: it.Epoch, Actor: it.Actor}).Before(c.cur.Load().Token()) {
			return true
		}
	}
	return false
}

// dispatch peels the residual p.Workflow and moves it on: a service head is
// handed to a chosen peer; a FORK, FIRST or FAILOVER head starts a join here.
// It returns errSuperseded when the receiver refused the hand-off because
// the chain was superseded (the caller's work is superseded, not handed
// on), and nil otherwise: a failure is reported to the join or origin.
func (n *Node) dispatch(ctx context.Context, p *pack.Pack) error {
	h, err := n.dispatchUnguarded(ctx, p)
	if h != nil {
		n.guardHandedOff(p, *h, nil)
	}
	return err
}

// dispatchUnguarded is dispatch that returns the hand-off of a service
// head (nil for anything else) without keeping the sender's guard copy of
// it: the caller keeps it (guardHandedOff), or a holder keeps it in the
// same journal write as its own record's end (forwardedAndGuarded). The
// hand-off names the guardians of the step before that the next holder
// released (api.Ack.Released): the sender need not release them again.
func (n *Node) dispatchUnguarded(ctx context.Context, p *pack.Pack) (*handedOff, error) {
	head, rest, err := n.peelWaiting(ctx, p)
	if errors.Is(err, errCancelled) || ctx.Err() != nil {
		return nil, nil
	}
	if err != nil {
		msg := fmt.Sprintf("workflow %s: %v", p.WorkflowID, err)
		if ferr := n.finishBranch(ctx, p, false, msg); ferr != nil {
			n.log.Error("report failure", "workflow", p.WorkflowID, "err", ferr)
		}
		return nil, nil
	}
	switch head.Kind {
	case grammar.HeadService:
		steps := []grammar.Step{head.Service}
		if rest != nil {
			steps = append(steps, rest.Steps...)
		}
		p.Workflow = &grammar.Workflow{Steps: steps}
		p.Attempt = 0
		h, err := n.handoffExcluding(ctx, p, nil, nil)
		if err == nil {
			return &h, nil
		}
		err = fmt.Errorf("step %s (path %s): %w", head.Service.Name, head.Service.Path, err)
		if errors.Is(err, errSuperseded) {
			return nil, errSuperseded
		}
		if errors.Is(err, errCancelled) || ctx.Err() != nil {
			return nil, nil
		}
		if ferr := n.finishBranch(ctx, p, false, err.Error()); ferr != nil {
			n.log.Error("report failure", "workflow", p.WorkflowID, "err", ferr)
		}
	default:
		n.startJoin(ctx, p, head, rest)
	}
	return nil, nil
}

// handedOff is a hand-off that was taken: by which peer, the backup
// guardians it recruited, the guardians of the step before that it
// released when it settled (api.Ack.Released), and the pack's bytes as
// sent (nil for a hand-off to this peer), which the sender's guard copy
// keeps instead of encoding the pack again.
type handedOff struct {
	to       peer.ID
	backups  []pack.Peer
	released []string
	raw      []byte
}

// handoffExcluding sends p (whose head is a service) to a chosen peer and
// waits for its ack, and returns the hand-off that was taken (the peer,
// its backups, the guardians it released, the bytes sent). avoid lists
// peers to skip if any other can run the step (FORK siblings); peers in
// never are never chosen (they went silent on this step). It keeps trying
// other peers on refusals and errors, and waits up to NoPeerWait for a
// provider to appear. The caller keeps the guard copy (guardHandedOff).
func (n *Node) handoffExcluding(ctx context.Context, p *pack.Pack, avoid, never map[peer.ID]bool) (handedOff, error) {
	head, err := p.Head()
	if err != nil {
		return handedOff{}, err
	}
	exclude := map[peer.ID]bool{}
	for id := range never {
		exclude[id] = true
	}
	// A step of a branch stays off the peers holding copies of its joins
	// where another peer can run it (I3: one failure must not take both).
	avoid = withJoinHolders(avoid, p.Frames)
	var refusals []string
	// busy are peers that refused as busy since the last wait: tried again
	// after a backoff, and while they refuse the wait for a peer goes on.
	busy, busyRounds := map[peer.ID]bool{}, 0
	deadline := n.clock.Now().Add(n.cfg.NoPeerWait)
	p.Sender = n.self()
	p.Hops++
	// Until a receiver acknowledges it, this peer keeps no guard copy of
	// the step: a backup the receiver recruited asks, and waits (G15).
	defer n.handing.begin(guardKey(p), p.Attempt)()
	// Receivers that refuse the hand-over as unsettled (no guardian of
	// the step before answered them) are tried again, however long it
	// takes, until UnsettledGiveUp: then unanswering guardians count as
	// gone (they were killed, not cut off).
	var unsettled unsettledClock
	var data []byte
	for {
		if n.isCancelled(p) {
			return handedOff{}, errCancelled
		}
		if n.continuationSuperseded(p) {
			return handedOff{}, errChainSuperseded
		}
		n.mu.Lock()
		wake := n.returned
		n.mu.Unlock()
		target, ok := n.pick(head.Name, head.Expect(), exclude, avoid)
		if !ok && unsettled.since(n.clock.Now()) > 0 && unsettled.since(n.clock.Now()) < 3*n.cfg.UnsettledGiveUp {
			// Every peer left refused it as unsettled: wait, then try
			// them all again.
			deadline = n.clock.Now().Add(n.cfg.NoPeerWait)
			if unsettled.maybeLenient(ctx, n, p.WorkflowID, p.Settle) {
				// The items changed: encode them anew, or the receivers
				// keep settling the old ones and refusing (a sender whose
				// guardians were killed never handed on to another peer).
				data = nil
			}
			select {
			case <-ctx.Done():
				return handedOff{}, ctx.Err()
			case <-n.clock.After(time.Second):
			}
			clear(exclude)
			for id := range never {
				exclude[id] = true
			}
			continue
		}
		if !ok {
			if n.clock.Now().After(deadline) {
				why := "no live peer offers it"
				if len(refusals) > 0 {
					why += " (" + strings.Join(refusals, "; ") + ")"
				}
				if skipped := n.passedOver(head.Name); len(skipped) > 0 {
					why += "; passed over: " + strings.Join(skipped, ", ")
				}
				return handedOff{}, fmt.Errorf("%s after waiting %s", why, n.cfg.NoPeerWait)
			}
			// Wait for a peer to appear, or retry those that refused.
			wait := 500 * time.Millisecond
			if len(busy) > 0 {
				wait, busyRounds = n.busyBackoff(busyRounds), busyRounds+1
			}
			select {
			case <-ctx.Done():
				return handedOff{}, ctx.Err()
			case <-wake:
			case <-n.clock.After(wait):
			}
			for id := range busy {
				delete(exclude, id)
			}
			clear(busy)
			if len(exclude) > 0 && n.clock.Now().After(deadline.Add(-n.cfg.NoPeerWait/2)) {
				clear(exclude)
				for id := range never {
					exclude[id] = true
				}
			}
			continue
		}
		began := n.clock.Now()
		if target == n.host.ID() {
			ack := n.accept(ctx, p.Clone(), nil)
			n.ev.Emit(handoffEvent(p, target, n.clock.Since(began), nil, ack.OK, ack.Code))
			if ack.OK {
				n.killAfterTaken.kill(head.Name, n.cfg.DataDir, n.log)
				return handedOff{to: target, backups: ack.Guardians, released: ack.Released}, nil
			}
			if ack.Code == api.CodeCancelled {
				return handedOff{}, errCancelled
			}
			if ack.Code == api.CodeSuperseded {
				return handedOff{}, errChainSuperseded
			}
			if id, ok := n.takenAt(p, ack); ok {
				return n.handToFirst(ctx, p, id)
			}
			if ack.Code == api.CodeUnsettled {
				n.killAfterUnsettled.kill(head.Name, n.cfg.DataDir, n.log)
				n.stallAfterUnsettled.stallFor(head.Name, n.cfg.DataDir, n.log, failpointUntilKilled)
				unsettled.mark(n.clock.Now())
			}
			exclude[target] = true
			if ack.Code == api.CodeBusy {
				busy[target], deadline = true, n.clock.Now().Add(n.cfg.NoPeerWait)
				continue
			}
			refusals = append(refusals, ack.Error)
			continue
		}
		if data == nil {
			// Encoded once: p does not change while peers are tried, but
			// for settle items marked Lenient (data is cleared then).
			if data, err = pack.Encode(p); err != nil {
				return handedOff{}, fmt.Errorf("encode pack: %w", err)
			}
		}
		done, err := n.breakers.Begin(target.String())
		if err != nil {
			exclude[target] = true
			refusals = append(refusals, err.Error())
			continue
		}
		seen := n.pres.version(target)
		raw, err := n.calls.Call(ctx, target, api.ProtoHandoff, data, api.MaxControlFrame, n.cfg.StreamTimeout)
		var ack api.Ack
		if err == nil {
			err = rpc.Dec.Unmarshal(raw, &ack)
		}
		// A refusal that shows the peer works (draining, not offering the
		// service, a cancelled workflow, a pack it rejects) is not the
		// peer's failure; transport errors and internal errors are.
		done(err == nil && (ack.OK || ack.Code != api.CodeInternal))
		ev := handoffEvent(p, target, n.clock.Since(began), err, ack.OK, ack.Code)
		ev.Bytes = len(data)
		n.ev.Emit(ev)
		if err == nil {
			if ack.OK {
				n.killAfterTaken.kill(head.Name, n.cfg.DataDir, n.log)
				n.tt.view.Alive(target.String())
				n.pres.noteTaken(target, seen)
				return handedOff{to: target, backups: ack.Guardians, released: ack.Released, raw: data}, nil
			}
			if ack.Code == api.CodeCancelled {
				return handedOff{}, errCancelled
			}
			if ack.Code == api.CodeSuperseded {
				// This chain was re-routed upstream; it ends here.
				return handedOff{}, errChainSuperseded
			}
			if id, ok := n.takenAt(p, ack); ok {
				return n.handToFirst(ctx, p, id)
			}
			if ack.Code == api.CodeBadPack {
				return handedOff{}, fmt.Errorf("peer %s rejected the pack: %s", rpc.ShortID(target), ack.Error)
			}
			if ack.Code == api.CodeUnsettled {
				n.killAfterUnsettled.kill(head.Name, n.cfg.DataDir, n.log)
				n.stallAfterUnsettled.stallFor(head.Name, n.cfg.DataDir, n.log, failpointUntilKilled)
				unsettled.mark(n.clock.Now())
			}
			if ack.Code == api.CodeBusy {
				// Full, not failing: another peer now, this one after a
				// backoff, and no giving up while peers are merely busy.
				exclude[target], busy[target] = true, true
				deadline = n.clock.Now().Add(n.cfg.NoPeerWait)
				n.pres.noteFull(target)
				continue
			}
			err = errors.New(ack.Error)
		}
		n.log.Info("hand-off refused or failed; trying another peer", "step", head.Name, "peer", rpc.ShortID(target), "err", err)
		refusals = append(refusals, fmt.Sprintf("%s: %v", rpc.ShortID(target), err))
		exclude[target] = true
		// Back off a little more with every failure: failed dials return at
		// once while libp2p's dial backoff lasts, and a hot loop helps nobody.
		select {
		case <-ctx.Done():
			return handedOff{}, ctx.Err()
		case <-n.clock.After(min(time.Duration(len(refusals))*50*time.Millisecond, time.Second)):
		}
	}
}

// takenAt reads a CodeTaken refusal: another peer took this attempt of
// the step first (this sender missed its ack: a cut, a stream timeout).
// The hand-off counts as made to that peer, which the caller then guards
// (guardHandedOff), so that the step is re-routed should that peer be
// gone (node/guard G8, join J6).
func (n *Node) takenAt(p *pack.Pack, ack api.Ack) (peer.ID, bool) {
	if ack.Code != api.CodeTaken || len(ack.Guardians) == 0 {
		return "", false
	}
	id, err := peer.Decode(ack.Guardians[0].ID)
	if err != nil {
		return "", false
	}
	n.log.Warn("a peer took this step before (its ack was lost); guarding it there", "workflow", p.WorkflowID, "peer", rpc.ShortID(id), "attempt", p.Attempt)
	return id, true
}

// handToFirst makes the hand-off to first, the peer a CodeTaken refusal
// named (node/guard G8, join J6 and J8): p goes to it again. A first
// receiver that holds the step answers as its first acceptance ended, and
// one that ran it and handed it on answers as taken (handedon.go): either
// way it runs there once. One that had settled and then dropped the pack
// (none of its settle answers reached it, say) takes it now, since the
// guardians and join copies that recorded it as the successor answer it
// as before; without this second hand-off such a step would be guarded at
// a peer that does not hold it, and lost. It tries until first answers
// for good or UnsettledGiveUp passes; then the hand-off counts as made
// there anyway: the caller guards it, and the step is re-routed should
// that peer be gone.
//
// A refusal that names yet another peer is followed at once, but a peer
// named a second time (two receivers each saying the other took the step
// first) is asked again only after the same backoff and within the same
// deadline as any other try, so that such a pair is not asked in a busy
// loop.
func (n *Node) handToFirst(ctx context.Context, p *pack.Pack, first peer.ID) (handedOff, error) {
	deadline := n.clock.Now().Add(n.cfg.UnsettledGiveUp)
	wait := 250 * time.Millisecond
	named := map[peer.ID]bool{first: true}
	for try := 1; ; try++ {
		var ack api.Ack
		var err error
		var data []byte
		if first == n.host.ID() {
			ack = n.accept(ctx, p.Clone(), nil)
		} else {
			var raw []byte
			if data, err = pack.Encode(p); err != nil {
				return handedOff{}, fmt.Errorf("encode pack: %w", err)
			}
			raw, err = n.calls.Call(ctx, first, api.ProtoHandoff, data, api.MaxControlFrame, n.cfg.StreamTimeout)
			if err == nil {
				err = rpc.Dec.Unmarshal(raw, &ack)
			}
		}
		switch {
		case err == nil && ack.OK:
			return handedOff{to: first, backups: ack.Guardians, released: ack.Released, raw: data}, nil
		case err == nil && ack.Code == api.CodeSuperseded:
			return handedOff{}, errChainSuperseded
		case err == nil && ack.Code == api.CodeCancelled:
			return handedOff{}, errCancelled
		case err == nil && ack.Code == api.CodeTaken:
			id, ok := n.takenAt(p, ack)
			if !ok || id == first {
				return handedOff{to: first}, nil
			}
			// first was not the first either.
			again := named[id]
			named[id], first = true, id
			if !again {
				continue
			}
			err = fmt.Errorf("the peers that took this step name each other as the first (%s now)", rpc.ShortID(id))
		case err == nil:
			err = errors.New(ack.Error)
		}
		if n.clock.Now().After(deadline) {
			n.log.Warn("the peer that took this step first has not taken it again; guarding it there", "workflow", p.WorkflowID, "peer", rpc.ShortID(first), "tries", try, "err", err)
			return handedOff{to: first}, nil
		}
		n.log.Info("the peer that took this step first did not take it again yet", "workflow", p.WorkflowID, "peer", rpc.ShortID(first), "try", try, "err", err)
		select {
		case <-ctx.Done():
			return handedOff{}, ctx.Err()
		case <-n.clock.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// unsettledClock times how long a sender's hand-over has been refused as
// unsettled (api.CodeUnsettled).
type unsettledClock struct {
	first   time.Time
	lenient bool
}

// mark records an unsettled refusal that came at now.
func (u *unsettledClock) mark(now time.Time) {
	if u.first.IsZero() {
		u.first = now
	}
}

// since is how long before now the first unsettled refusal came (0:
// none).
func (u *unsettledClock) since(now time.Time) time.Duration {
	if u.first.IsZero() {
		return 0
	}
	return now.Sub(u.first)
}

// unsettledQuick is how long unsettled refusals last before a sender that
// reaches the rest of the mesh takes the unanswering peers as killed: a
// healed cut is redialled well within it (settleRounds tries fresh
// connections at once).
const unsettledQuick = 6 * time.Second

// maybeLenient marks settle items Lenient once the refusals have lasted
// unsettledQuick while this peer reaches other peers and has not been cut
// off for twice that (it is not the one cut off, nor on a flapping link,
// so the peers that do not answer were killed: I3, two kills never stall
// the work), or UnsettledGiveUp in any case; it reports whether it marked
// any. Before UnsettledGiveUp an
// item is marked only when none of its peers answers a ping now either: a
// link that healed since the last refusal is settled on the next try
// instead (a flapping link's cut can fall between two cut-off checks; a
// guardian taken as gone there would answer the next settle "taken" and
// the step would run twice).
func (u *unsettledClock) maybeLenient(ctx context.Context, n *Node, workflow string, items []pack.Settle) bool {
	if u.lenient {
		return false
	}
	// Asked every round, so that a flapping link's cuts are remembered.
	cut := n.cutOff(ctx, "")
	if u.since(n.clock.Now()) < unsettledQuick {
		return false
	}
	giveUp := u.since(n.clock.Now()) >= n.cfg.UnsettledGiveUp
	if !giveUp && (cut || n.recentlyCutOff(2*unsettledQuick)) {
		return false
	}
	marked, left := 0, 0
	for i := range items {
		if items[i].Lenient {
			continue
		}
		if !giveUp && n.anyPingable(ctx, items[i].Peers) {
			left++
			continue
		}
		items[i].Lenient = true
		marked++
	}
	u.lenient = left == 0
	if marked > 0 {
		n.log.Warn("guardians of the step before have not answered; taking them as gone", "workflow", workflow, "after", u.since(n.clock.Now()).Round(time.Millisecond), "items", marked, "answering_pings", left)
	}
	return marked > 0
}

// withJoinHolders returns avoid plus every holder of every frame (a new
// map when there is anything to add).
func withJoinHolders(avoid map[peer.ID]bool, frames []pack.Frame) map[peer.ID]bool {
	if len(frames) == 0 {
		return avoid
	}
	out := map[peer.ID]bool{}
	for id := range avoid {
		out[id] = true
	}
	for _, f := range frames {
		for _, h := range f.Holders {
			if id, err := peer.Decode(h.ID); err == nil {
				out[id] = true
			}
		}
	}
	return out
}

// errNoArmProvider: no arm of an unguarded CHOICE can be run now.
var errNoArmProvider = errors.New("no arm of the CHOICE has a provider")

// peelWaiting peels p's residual; when an unguarded CHOICE finds no arm a
// live (and, with the timetable, powered) peer can run, it waits for a
// peer to appear, up to NoPeerWait, as a hand-off does: a zone coming back
// from a cut takes a moment to announce itself.
func (n *Node) peelWaiting(ctx context.Context, p *pack.Pack) (grammar.Head, *grammar.Workflow, error) {
	deadline := n.clock.Now().Add(n.cfg.NoPeerWait)
	for {
		n.mu.Lock()
		wake := n.returned
		n.mu.Unlock()
		head, rest, err := grammar.Peel(p.Workflow, n.selector(p))
		if !errors.Is(err, errNoArmProvider) || n.clock.Now().After(deadline) {
			return head, rest, err
		}
		if n.isCancelled(p) {
			return head, rest, errCancelled
		}
		select {
		case <-ctx.Done():
			return head, rest, ctx.Err()
		case <-wake:
		case <-n.clock.After(500 * time.Millisecond):
		}
	}
}

// selector decides CHOICE arms for p: guarded choices evaluate their guards
// over the input and outputs so far; unguarded ones take the first arm whose
// first service has a live provider.
func (n *Node) selector(p *pack.Pack) grammar.Selector {
	return func(c *grammar.Choice) (int, error) {
		guarded := false
		for _, a := range c.Arms {
			if a.Kind != grammar.ArmPlain {
				guarded = true
			}
		}
		if guarded {
			env := grammar.GuardEnv(p.Input, p.Outputs)
			var tried []string
			for i, a := range c.Arms {
				if a.Kind == grammar.ArmElse {
					return i, nil
				}
				prog, err := expr.Compile(a.Guard, expr.AllowUndefinedVariables(), expr.AsBool())
				if err != nil {
					return 0, fmt.Errorf("CHOICE guard %q does not compile: %v", a.Guard, err)
				}
				out, err := expr.Run(prog, env)
				if err != nil {
					return 0, fmt.Errorf("CHOICE guard %q failed: %v", a.Guard, err)
				}
				if b, _ := out.(bool); b {
					return i, nil
				}
				tried = append(tried, a.Guard)
			}
			return 0, fmt.Errorf("no CHOICE arm matched and there is no ELSE (guards tried: %s)", strings.Join(tried, "; "))
		}
		var heads []string
		for i, a := range c.Arms {
			svc := firstService(a.Body)
			if svc == nil {
				continue
			}
			heads = append(heads, svc.Name)
			if n.hasProvider(svc.Name, svc.Expect()) {
				return i, nil
			}
		}
		why := "a live provider"
		if n.timetableRouting() {
			why = "a live provider powered long enough"
		}
		return 0, fmt.Errorf("%w: none has %s for its first service (%s) after waiting %s", errNoArmProvider, why, strings.Join(heads, ", "), n.cfg.NoPeerWait)
	}
}

// firstService is the first service that would run in w (nil if none).
func firstService(w *grammar.Workflow) *grammar.Service {
	if w == nil || len(w.Steps) == 0 {
		return nil
	}
	switch s := w.Steps[0].(type) {
	case *grammar.Service:
		return s
	case *grammar.Fork:
		return firstService(s.Branches[0])
	case *grammar.First:
		return firstService(s.Branches[0])
	case *grammar.Failover:
		return firstService(s.Branches[0])
	case *grammar.Choice:
		return firstService(s.Arms[0].Body)
	}
	return nil
}

// finishBranch delivers the end of p's path: to the innermost join frame's
// holder, or to the origin when there is none. It retries until the
// recipient acknowledges or the node stops.
func (n *Node) finishBranch(ctx context.Context, p *pack.Pack, ok bool, errMsg string) error {
	if len(p.Frames) == 0 {
		msg := api.OriginMsg{WorkflowID: p.WorkflowID, Done: true, OK: ok, Error: errMsg, Outputs: p.Outputs, Trace: p.Trace, Settle: p.Settle}
		return n.sendWithRetry(ctx, p.Origin, api.ProtoOrigin, msg, msg.Settle, func() error { return n.completeHere(msg) })
	}
	f := p.Frames[len(p.Frames)-1]
	d := api.Delivery{
		WorkflowID: p.WorkflowID, JoinID: f.JoinID, Branch: f.Branch, OK: ok, Error: errMsg,
		Outputs: p.Outputs, Trace: p.Trace, Attempt: p.Attempt, Settle: p.Settle,
	}
	return n.sendWithRetry(ctx, f.Holders, api.ProtoDeliver, d, d.Settle, func() error {
		if ack := n.deliverHere(d); !ack.OK {
			if ack.Refusal == join.RefuseSuperseded {
				return fmt.Errorf("%s: %w", ack.Error, errSuperseded)
			}
			if ack.Refusal == join.RefuseUnsettled {
				return fmt.Errorf("%s: %w", ack.Error, errUnsettled)
			}
			return fmt.Errorf("this peer no longer holds it: %s", ack.Error)
		}
		return nil
	})
}

// sendWithRetry sends msg to the first holder that acknowledges it, calling
// local instead when this peer is a holder (local returns why this peer
// did not take it: a join handed over before a power cut, a journal
// error). It backs off between rounds. settle is msg's settle list (shared
// with msg): a recipient that refuses it as unsettled is asked again, and
// after UnsettledGiveUp the items are marked Lenient.
func (n *Node) sendWithRetry(ctx context.Context, holders []pack.Peer, proto string, msg any, settle []pack.Settle, local func() error) error {
	wait := 100 * time.Millisecond
	var unsettled unsettledClock
	for {
		var lastErr error
		for _, h := range holders {
			if h.ID == n.selfID {
				if lastErr = local(); lastErr == nil || errors.Is(lastErr, errSuperseded) {
					return lastErr
				}
				if errors.Is(lastErr, errUnsettled) {
					unsettled.mark(n.clock.Now())
				}
				continue
			}
			id, err := peer.Decode(h.ID)
			if err != nil {
				lastErr = fmt.Errorf("bad holder id %q: %w", h.ID, err)
				continue
			}
			n.learnAddrs(id, h.Addrs)
			var ack api.Ack
			if err := n.calls.CallCBOR(ctx, id, proto, msg, &ack, n.cfg.StreamTimeout); err != nil {
				lastErr = err
				continue
			}
			if ack.OK {
				return nil
			}
			if ack.Code == api.CodeSuperseded {
				// This chain was re-routed away from: it ends here.
				return fmt.Errorf("%s refused: %s: %w", rpc.ShortID(id), ack.Error, errSuperseded)
			}
			if ack.Code == api.CodeUnsettled {
				unsettled.mark(n.clock.Now())
			}
			lastErr = fmt.Errorf("%s refused: %s", rpc.ShortID(id), ack.Error)
		}
		unsettled.maybeLenient(ctx, n, "", settle)
		n.log.Warn("delivery failed; will retry", "proto", proto, "err", lastErr, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.clock.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}
