package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/heartbeat"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Guarding, in one paragraph: when a peer hands a pack to a successor it
// keeps a copy (it becomes the pack's primary guardian) and asks a backup
// guardian, in another zone where possible, to keep one too. The holder
// beats to its guardians while it holds the pack, and releases them once it
// has moved the pack on (handed the residual to the next peer, or delivered
// the branch's end). A guardian whose holder falls silent re-routes the pack
// to another peer with attempt+1 and never back to the silent one; a backup
// does so only when the primary is gone too. Attempt numbers fence the
// re-route: a holder that comes back learns it was superseded and drops its
// stale copy, and joins and origins keep one result per branch.

// guardRole says which guardian acts first.
type guardRole uint8

const (
	rolePrimary guardRole = iota + 1
	roleBackup
)

// guardEntry is a guardian's copy of a pack held elsewhere.
type guardEntry struct {
	Key     string    `cbor:"1,keyasint"`
	PackRaw []byte    `cbor:"2,keyasint"`
	Holder  pack.Peer `cbor:"3,keyasint"`
	Attempt int       `cbor:"4,keyasint"`
	Role    guardRole `cbor:"5,keyasint"`
	Primary pack.Peer `cbor:"6,keyasint,omitempty"`
	// Tried lists holders that went silent on this step: never again.
	Tried []string  `cbor:"7,keyasint,omitempty"`
	Since time.Time `cbor:"8,keyasint"`
	// Backups are the other guardians this (primary) entry told about.
	Backups []pack.Peer `cbor:"9,keyasint,omitempty"`
	// rerouting is set while a re-route of this entry is under way, so a
	// suspicion and a hand-back cannot both re-route one attempt.
	rerouting bool
}

// releaseMark remembers that a key was released (moved on) at an attempt,
// so a late guard copy of that attempt is not kept.
type releaseMark struct {
	At      time.Time `cbor:"1,keyasint"`
	Attempt int       `cbor:"2,keyasint"`
}

// markReleasedLocked records that key moved on at attempt (n.mu held) and
// returns the mark to persist with forgetGuard.
func (n *Node) markReleasedLocked(key string, attempt int) releaseMark {
	mark, ok := n.released[key]
	if !ok || mark.Attempt < attempt {
		mark = releaseMark{At: time.Now().UTC(), Attempt: attempt}
		n.released[key] = mark
	}
	return mark
}

// forgetGuard removes the guard copy key from the journal and writes its
// tombstone, in one transaction: a guardian that restarts still knows the
// step moved on (I4: a release is answered only once this is durable).
func (n *Node) forgetGuard(key string, mark releaseMark) error {
	return n.journal.Update(func(tx *journal.Tx) error {
		if err := tx.Delete(journal.BucketOutbox, key); err != nil {
			return err
		}
		return tx.Put(journal.BucketReleased, key, rpc.MustCBOR(&mark))
	})
}

// guardKey names a step in flight: workflow and step path (attempts share it).
func guardKey(p *pack.Pack) string {
	return journal.StepKey(p.WorkflowID, headPath(p))
}

func (n *Node) saveGuard(e *guardEntry) error {
	return n.journal.Put(journal.BucketOutbox, e.Key, rpc.MustCBOR(e))
}

// guardHandedOff records that this peer now guards p, held by holder, with
// the backup guardians the holder recruited (backups); when it recruited
// none, this peer recruits one in the background.
func (n *Node) guardHandedOff(p *pack.Pack, holder peer.ID, tried []string, backups []pack.Peer) {
	if holder == n.host.ID() {
		return // local hand-off: the backup guards it
	}
	raw, err := pack.Encode(p)
	if err != nil {
		n.log.Error("encode guarded pack", "err", err)
		return
	}
	e := &guardEntry{
		Key: guardKey(p), PackRaw: raw, Holder: n.peerRef(holder), Attempt: p.Attempt,
		Role: rolePrimary, Tried: tried, Since: time.Now().UTC(), Backups: backups,
	}
	n.mu.Lock()
	if mark, ok := n.released[e.Key]; ok && mark.Attempt >= e.Attempt {
		// The holder finished and released us before we got here.
		n.mu.Unlock()
		return
	}
	n.guards[e.Key] = e
	n.mu.Unlock()
	if err := n.saveGuard(e); err != nil {
		n.log.Error("journal guard", "key", e.Key, "err", err)
	}
	n.mu.Lock()
	_, still := n.guards[e.Key]
	n.mu.Unlock()
	if !still {
		n.journalFailed("drop guard copy", e.Key, n.journal.Delete(journal.BucketOutbox, e.Key))
		return
	}
	n.watchHolder(holder)
	if len(backups) == 0 {
		n.spawn(func(ctx context.Context) { n.recruitBackup(ctx, e) })
	}
}

// recruitBackup asks a peer in another zone to guard e too, and tells the
// holder to beat to it.
func (n *Node) recruitBackup(ctx context.Context, e *guardEntry) {
	holder, err := peer.Decode(e.Holder.ID)
	if err != nil {
		return
	}
	n.mu.Lock()
	raw, att := e.PackRaw, e.Attempt
	n.mu.Unlock()
	b, ok := n.pickGuardian(map[peer.ID]bool{holder: true, n.host.ID(): true}, e.Holder.Zone)
	if !ok {
		return
	}
	msg := api.GuardMsg{Op: api.GuardStore, Key: e.Key, Attempt: att, Pack: raw, Holder: e.Holder, Primary: n.self()}
	var rep api.GuardReply
	if err := rpc.CallCBOR(ctx, n.host, b, api.ProtoGuard, msg, &rep, n.cfg.StreamTimeout); err != nil || !rep.OK {
		n.log.Debug("backup guardian refused", "peer", rpc.ShortID(b), "err", err)
		return
	}
	n.mu.Lock()
	e.Backups = append(e.Backups, n.peerRef(b))
	n.journalFailed("save guard copy", e.Key, n.saveGuard(e))
	n.mu.Unlock()
	add := api.GuardMsg{Op: api.GuardAddWatcher, Key: e.Key, Attempt: att, Watcher: n.peerRef(b)}
	if err := rpc.CallCBOR(ctx, n.host, holder, api.ProtoGuard, add, &rep, n.cfg.StreamTimeout); err == nil && rep.Released {
		// The holder already moved on: the backup has nothing to watch.
		_ = rpc.CallCBOR(ctx, n.host, b, api.ProtoGuard, api.GuardMsg{Op: api.GuardRelease, Key: e.Key, Attempt: att}, &rep, n.cfg.StreamTimeout)
	}
}

// pickGuardian chooses a live peer outside exclude, preferring a zone other
// than avoidZone and this peer's.
//
// With timetable routing a guardian must outlast the work it covers: a peer
// the timetable says stays powered for a default step ranks first, and one
// whose zone goes dark within that time only when there is nobody else.
func (n *Node) pickGuardian(exclude map[peer.ID]bool, avoidZone string) (peer.ID, bool) {
	return n.pickGuardianAvoiding(exclude, map[string]bool{avoidZone: true})
}

// pickGuardianAvoiding is pickGuardian preferring a zone outside
// avoidZones and other than this peer's.
func (n *Node) pickGuardianAvoiding(exclude map[peer.ID]bool, avoidZones map[string]bool) (peer.ID, bool) {
	var best peer.ID
	bestScore := -1.0
	tt := n.timetableRouting()
	horizon := n.tt.view.Config().DefaultExpected
	for id, a := range n.pres.live() {
		if exclude[id] || a.Draining || n.tt.view.Suspected(id.String()) || !n.breakers.Allowed(id.String()) {
			continue
		}
		score := 1.0
		if !avoidZones[a.Zone] {
			score += 4
		}
		if a.Zone != n.cfg.Zone {
			score += 2
		}
		if tt {
			switch vd := n.tt.view.CanRun(id.String(), horizon); {
			case vd.Known:
				score += 8
			case !vd.OK:
				score = 0
			}
		}
		// An open connection saves a dial; among equals, chance spreads
		// the guarding (a fixed tie-break made every node of a zone pile
		// its copies and replicas on the same peer).
		if n.host.Network().Connectedness(id) == network.Connected {
			score += 0.5
		}
		score += rand.Float64() * 0.4
		if score > bestScore {
			best, bestScore = id, score
		}
	}
	return best, bestScore >= 0
}

func (n *Node) peerRef(id peer.ID) pack.Peer {
	if id == n.host.ID() {
		return n.self()
	}
	ref := pack.Peer{ID: id.String()}
	for _, a := range n.host.Peerstore().Addrs(id) {
		ref.Addrs = append(ref.Addrs, a.String())
	}
	if a, ok := n.pres.get(id); ok {
		ref.Zone = a.Zone
		if len(ref.Addrs) == 0 {
			ref.Addrs = a.Addrs
		}
	}
	return ref
}

// watchHolder makes the failure detector watch holder from its first beat:
// opening the beat stream can take longer than the detection threshold on a
// loaded board, so the clock starts at the first frame. A holder that never
// beats is watched anyway after FirstBeatTimeout (and then suspected).
func (n *Node) watchHolder(holder peer.ID) {
	key := holder.String()
	if _, watched := n.watcher.Phi(key); watched {
		return
	}
	n.mu.Lock()
	if _, pending := n.firstBeat[key]; pending {
		n.mu.Unlock()
		return
	}
	n.firstBeat[key] = time.Now()
	n.mu.Unlock()
	time.AfterFunc(n.cfg.FirstBeatTimeout, func() {
		if n.takeFirstBeat(key) {
			n.startWatch(key)
		}
	})
}

// takeFirstBeat reports (once) whether key awaited its first beat.
func (n *Node) takeFirstBeat(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.firstBeat[key]
	delete(n.firstBeat, key)
	return ok
}

func (n *Node) startWatch(key string) {
	if err := n.watcher.Watch(key); err != nil && n.ctx.Err() == nil {
		n.log.Warn("watch holder", "peer", rpc.ShortIDString(key), "err", err)
	}
}

// unwatchIfIdle stops watching holder when nothing guarded is held by it.
func (n *Node) unwatchIfIdle(holder string) {
	n.mu.Lock()
	for _, e := range n.guards {
		if e.Holder.ID == holder {
			n.mu.Unlock()
			return
		}
	}
	if len(n.joinsWatching(holder)) > 0 {
		n.mu.Unlock()
		return
	}
	delete(n.firstBeat, holder)
	// Under n.mu: a guard copy added meanwhile must not lose its watch.
	n.watcher.Unwatch(holder)
	n.mu.Unlock()
}

// onSuspect is the failure detector's verdict on a silent holder: every
// entry it held is re-routed (primary) or checked with the primary (backup),
// and every join whose primary it was is taken over.
func (n *Node) onSuspect(s heartbeat.Suspicion) {
	n.mu.Lock()
	var entries []*guardEntry
	for _, e := range n.guards {
		if e.Holder.ID == s.Key {
			entries = append(entries, e)
		}
	}
	n.mu.Unlock()
	joins := n.joinsWatching(s.Key)
	n.log.Warn("peer suspected", "peer", s.Key, "silence_ms", s.Silence.Milliseconds(),
		"guarded", len(entries), "joins", len(joins), "at", s.At.UTC().Format(time.RFC3339Nano))
	n.ev.Emit(events.Event{Type: events.Suspect, Peer: s.Key, At: s.At.UTC()})
	n.pres.forgetID(s.Key)
	n.tt.view.Suspect(s.Key)
	n.breakers.Failure(s.Key)
	for _, e := range entries {
		n.spawn(func(ctx context.Context) { n.holderLost(ctx, e, s) })
	}
	for _, c := range joins {
		n.spawn(func(ctx context.Context) {
			n.stepJoin(c, join.ActorSilent{Why: "actor " + rpc.ShortIDString(s.Key) + " went silent"})
		})
	}
}

// holderLost handles one guarded pack whose holder went silent.
func (n *Node) holderLost(ctx context.Context, e *guardEntry, s heartbeat.Suspicion) {
	n.mu.Lock()
	role, holder, attempt := e.Role, e.Holder.ID, e.Attempt
	primary := e.Primary
	n.mu.Unlock()
	if holder != s.Key {
		return // already re-routed
	}
	if role == roleBackup {
		// The primary acts first; wait for it, then ask.
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.cfg.BackupDelay):
		}
		if pid, err := peer.Decode(primary.ID); err == nil {
			n.learnAddrs(pid, primary.Addrs)
			var rep api.GuardReply
			err := rpc.CallCBOR(ctx, n.host, pid, api.ProtoGuard, api.GuardMsg{Op: api.GuardStatus, Key: e.Key}, &rep, 2*time.Second)
			if err == nil {
				n.followPrimary(e, rep, s.Key)
				return
			}
		}
		n.mu.Lock()
		if e.Holder.ID != s.Key || e.Attempt != attempt {
			n.mu.Unlock()
			return
		}
		e.Role = rolePrimary
		n.mu.Unlock()
		n.log.Warn("primary guardian gone too; re-routing as backup", "key", e.Key)
	}
	n.reroute(ctx, e, s.Key, "silent for "+s.Silence.Round(time.Millisecond).String())
}

// followPrimary applies what the primary guardian says of a key.
func (n *Node) followPrimary(e *guardEntry, rep api.GuardReply, silent string) {
	n.mu.Lock()
	switch {
	case rep.Released || !rep.Known:
		delete(n.guards, e.Key)
		n.journalFailed("drop guard copy", e.Key, n.journal.Delete(journal.BucketOutbox, e.Key))
		n.mu.Unlock()
		n.unwatchIfIdle(silent)
		return
	case rep.Holder.ID != silent || rep.Attempt > e.Attempt:
		e.Holder, e.Attempt = rep.Holder, rep.Attempt
		n.journalFailed("save guard copy", e.Key, n.saveGuard(e))
		n.mu.Unlock()
		if id, err := peer.Decode(rep.Holder.ID); err == nil {
			n.learnAddrs(id, rep.Holder.Addrs)
			n.watchHolder(id)
			n.spawn(func(ctx context.Context) {
				var r api.GuardReply
				_ = rpc.CallCBOR(ctx, n.host, id, api.ProtoGuard, api.GuardMsg{Op: api.GuardAddWatcher, Key: e.Key, Attempt: rep.Attempt, Watcher: n.self()}, &r, n.cfg.StreamTimeout)
			})
		}
		n.unwatchIfIdle(silent)
		return
	}
	n.mu.Unlock()
	// The primary still sees the holder: our suspicion was ours alone.
	if id, err := peer.Decode(silent); err == nil {
		n.watchHolder(id)
	}
}

// reroute re-sends a guarded pack held by holder, with attempt+1, to
// another peer; an at-most-once step fails its workflow instead. why says
// what happened to the holder ("silent for 1.3s", "handed the step back
// before a power cut") for the trace.
func (n *Node) reroute(ctx context.Context, e *guardEntry, holder, why string) {
	p, err := pack.Decode(e.PackRaw, n.limits)
	if err != nil {
		n.log.Error("guarded pack unreadable", "key", e.Key, "err", err)
		return
	}
	head, err := p.Head()
	if err != nil {
		n.redispatch(ctx, e, p, holder) // the origin's first pack, starting with a FORK or CHOICE
		return
	}
	if n.workflowEnded(ctx, p) {
		n.log.Info("not re-routing: the workflow has ended", "key", e.Key, "workflow", p.WorkflowID)
		n.dropGuardIf(e.Key, holder, e.Attempt)
		return
	}
	n.mu.Lock()
	if e.rerouting || e.Holder.ID != holder || n.guards[e.Key] != e {
		n.mu.Unlock()
		return // re-routed already, being re-routed, or released
	}
	e.rerouting = true
	silent := e.Holder
	tried := append(slices.Clone(e.Tried), silent.ID)
	since := e.Since
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		e.rerouting = false
		n.mu.Unlock()
	}()
	note := fmt.Sprintf("holder %s (zone %s) %s; re-routed by %s as attempt %d",
		rpc.ShortIDString(silent.ID), silent.Zone, why, rpc.ShortID(n.host.ID()), p.Attempt+1)
	p.Trace = append(p.Trace, pack.TraceEntry{
		Path: head.Path, Service: head.Name, Peer: silent.ID, Zone: silent.Zone,
		Start: since, End: time.Now().UTC(), Attempt: p.Attempt, Outcome: pack.OutcomeSuperseded, Note: note,
	})
	n.reportEvent(p, p.Trace[len(p.Trace)-1])
	if head.Once() {
		msg := fmt.Sprintf("step %s (path %s) is at-most-once (once=true) and its holder %s vanished: outcome unknown, not re-running",
			head.Name, head.Path, rpc.ShortIDString(silent.ID))
		// The refusal ends this chain as a re-route would: the copy is
		// marked released past its attempt, so a late release by whatever
		// the vanished holder handed on (a join settling its split, a
		// successor) is answered superseded and stops there (I1).
		n.dropGuardAt(e.Key, silent.ID, p.Attempt+1)
		if err := n.finishBranch(ctx, p, false, msg); err != nil {
			n.log.Error("report at-most-once failure", "err", err)
		}
		return
	}
	p.Attempt++
	exclude := map[peer.ID]bool{}
	for _, t := range tried {
		if id, err := peer.Decode(t); err == nil {
			exclude[id] = true
		}
	}
	n.log.Warn("re-routing", "key", e.Key, "step", head.Name, "attempt", p.Attempt, "silent", rpc.ShortIDString(silent.ID))
	n.ev.Emit(events.Event{Type: events.Reroute, Workflow: p.WorkflowID, Step: head.Path, Attempt: p.Attempt, Peer: silent.ID, Reason: why})
	prevAttempt := p.Attempt - 1
	target, newBackups, err := n.handoffExcluding(ctx, p, nil, exclude)
	if err != nil {
		if errors.Is(err, errCancelled) || ctx.Err() != nil {
			return
		}
		n.dropGuard(e.Key, silent.ID)
		if ferr := n.finishBranch(ctx, p, false, fmt.Sprintf("step %s (path %s): re-route failed: %v", head.Name, head.Path, err)); ferr != nil {
			n.log.Error("report failure", "err", ferr)
		}
		return
	}
	raw, _ := pack.Encode(p)
	n.mu.Lock()
	e.PackRaw, e.Holder, e.Attempt, e.Tried, e.Since, e.Role = raw, n.peerRef(target), p.Attempt, tried, time.Now().UTC(), rolePrimary
	backups := slices.Clone(e.Backups)
	e.Backups = newBackups
	if err := n.saveGuard(e); err != nil {
		n.log.Error("journal guard", "key", e.Key, "err", err)
	}
	n.mu.Unlock()
	n.unwatchIfIdle(silent.ID)
	if target != n.host.ID() {
		n.watchHolder(target)
	} else {
		n.dropGuard(e.Key, "")
	}
	// Tell the old holder (if it is only slow) and the co-guardians.
	if old, err := peer.Decode(silent.ID); err == nil {
		n.spawn(func(ctx context.Context) {
			var r api.GuardReply
			_ = rpc.CallCBOR(ctx, n.host, old, api.ProtoGuard, api.GuardMsg{Op: api.GuardSuperseded, Key: e.Key, Attempt: p.Attempt}, &r, 2*time.Second)
		})
	}
	// The old attempt's backups are not the new holder's guardians (it
	// recruited its own): they are released.
	for _, b := range backups {
		if bid, err := peer.Decode(b.ID); err == nil && bid != target && !slices.ContainsFunc(newBackups, func(x pack.Peer) bool { return x.ID == b.ID }) {
			n.spawn(func(ctx context.Context) {
				n.guardCall(ctx, b, api.GuardMsg{Op: api.GuardRelease, Key: e.Key, Attempt: prevAttempt}, settleCallTimeout)
			})
		}
	}
}

// workflowEnded asks p's origins whether the workflow has ended: a guardian
// never re-runs work of a finished workflow (I1). No answer means no.
func (n *Node) workflowEnded(ctx context.Context, p *pack.Pack) bool {
	for _, o := range p.Origin {
		rep := n.guardCall(ctx, o, api.GuardMsg{Op: api.GuardOriginStatus, Key: p.WorkflowID}, settleCallTimeout)
		if rep.OK && rep.Known {
			return rep.Released
		}
	}
	return false
}

// redispatch re-routes a guarded pack whose head is not a service: only
// the origin's first pack, held before its first hand-off, can start with
// a FORK, FIRST, FAILOVER or CHOICE. There is no step to hand to another
// peer, so this guardian (the origin's replica) claims the copy and
// dispatches the pack itself with attempt+1, as the silent origin would
// have, and tells the old holder it was superseded.
func (n *Node) redispatch(ctx context.Context, e *guardEntry, p *pack.Pack, holder string) {
	n.mu.Lock()
	if cur, ok := n.guards[e.Key]; !ok || cur != e || e.Holder.ID != holder {
		n.mu.Unlock()
		return // re-routed, released or claimed already
	}
	delete(n.guards, e.Key) // claimed: a second suspicion finds nothing
	silent, attempt := e.Holder, e.Attempt
	n.mu.Unlock()
	n.dropGuardAt(e.Key, silent.ID, attempt)
	p.Attempt = attempt + 1
	n.log.Warn("re-routing", "key", e.Key, "step", "(dispatch)", "attempt", p.Attempt, "silent", rpc.ShortIDString(silent.ID))
	n.ev.Emit(events.Event{Type: events.Reroute, Workflow: p.WorkflowID, Attempt: p.Attempt, Peer: silent.ID, Reason: "origin silent before its first hand-off"})
	if old, err := peer.Decode(silent.ID); err == nil {
		n.spawn(func(ctx context.Context) {
			var r api.GuardReply
			_ = rpc.CallCBOR(ctx, n.host, old, api.ProtoGuard, api.GuardMsg{Op: api.GuardSuperseded, Key: e.Key, Attempt: p.Attempt}, &r, 2*time.Second)
		})
	}
	n.dispatch(ctx, p)
}

func (n *Node) dropGuard(key, holder string) { n.dropGuardAt(key, holder, -1) }

// dropGuardAt forgets a guard copy, remembering the attempt it was released
// at (-1: whatever attempt the copy had).
func (n *Node) dropGuardAt(key, holder string, attempt int) {
	n.mu.Lock()
	if e, ok := n.guards[key]; ok && attempt < 0 {
		attempt = e.Attempt
	}
	mark := n.markReleasedLocked(key, attempt)
	delete(n.guards, key)
	n.mu.Unlock()
	n.journalFailed("drop guard copy", key, n.forgetGuard(key, mark))
	if holder != "" {
		n.unwatchIfIdle(holder)
	}
}

// handleGuard serves guardian bookkeeping.
func (n *Node) handleGuard(_ context.Context, from peer.ID, req []byte) []byte {
	var m api.GuardMsg
	if err := rpc.Dec.Unmarshal(req, &m); err != nil {
		return rpc.MustCBOR(api.GuardReply{Error: "bad guard message: " + err.Error()})
	}
	return rpc.MustCBOR(n.guardOp(from, m))
}

func (n *Node) guardOp(from peer.ID, m api.GuardMsg) api.GuardReply {
	switch m.Op {
	case api.GuardStore:
		if _, err := pack.Decode(m.Pack, n.limits); err != nil {
			return api.GuardReply{Error: "bad pack: " + err.Error()}
		}
		role := roleBackup
		if m.Primary.ID == "" || m.Primary.ID == n.host.ID().String() {
			role = rolePrimary
		}
		n.mu.Lock()
		e, ok := n.guards[m.Key]
		if ok && e.Attempt > m.Attempt {
			n.mu.Unlock()
			return api.GuardReply{OK: true}
		}
		if !ok {
			e = &guardEntry{Key: m.Key}
			n.guards[m.Key] = e
		}
		oldHolder := e.Holder.ID
		e.PackRaw, e.Holder, e.Attempt, e.Role, e.Primary, e.Since = m.Pack, m.Holder, m.Attempt, role, m.Primary, time.Now().UTC()
		err := n.saveGuard(e)
		n.mu.Unlock()
		if err != nil {
			return api.GuardReply{Error: "journal: " + err.Error()}
		}
		if id, err := peer.Decode(m.Holder.ID); err == nil {
			n.learnAddrs(id, m.Holder.Addrs)
			if id != n.host.ID() {
				n.watchHolder(id)
			}
		}
		if oldHolder != "" && oldHolder != m.Holder.ID {
			n.unwatchIfIdle(oldHolder)
		}
		return api.GuardReply{OK: true}
	case api.GuardRelease:
		return n.releaseGuard(m.Key, m.Attempt)
	case api.GuardStatus:
		n.mu.Lock()
		defer n.mu.Unlock()
		if e, ok := n.guards[m.Key]; ok {
			return api.GuardReply{OK: true, Known: true, Holder: e.Holder, Attempt: e.Attempt}
		}
		if _, ok := n.released[m.Key]; ok {
			return api.GuardReply{OK: true, Known: true, Released: true}
		}
		return api.GuardReply{OK: true}
	case api.GuardOwner:
		n.mu.Lock()
		defer n.mu.Unlock()
		if e, ok := n.guards[m.Key]; ok {
			return api.GuardReply{OK: true, Known: true, Attempt: e.Attempt, Holder: e.Holder,
				Superseded: e.Attempt > m.Attempt || (e.Attempt == m.Attempt && e.Holder.ID != from.String())}
		}
		if _, ok := n.released[m.Key]; ok {
			return api.GuardReply{OK: true, Known: true, Released: true}
		}
		return api.GuardReply{OK: true}
	case api.GuardSuperseded:
		n.supersedeHeld(m.Key, m.Attempt)
		return api.GuardReply{OK: true}
	case api.GuardAddWatcher:
		if !n.addWatcher(m.Key, m.Attempt, m.Watcher) {
			return api.GuardReply{OK: true, Released: true}
		}
		return api.GuardReply{OK: true}
	case api.GuardHandback:
		return n.handbackOp(from, m)
	case api.GuardJoin, api.GuardJoinUpdate, api.GuardJoinDone, api.GuardJoinStatus, api.GuardJoinHandover, api.GuardJoinActor, api.GuardJoinBranch:
		return n.joinReplicaOp(from, m)
	case api.GuardOrigin, api.GuardOriginDone, api.GuardOriginStatus:
		return n.originReplicaOp(m)
	}
	return api.GuardReply{Error: fmt.Sprintf("unknown guard operation %q", m.Op)}
}
