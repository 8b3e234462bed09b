package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/heartbeat"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Guarding, in one paragraph: when a peer hands a pack to a successor it
// keeps a copy (it becomes the pack's primary guardian) and asks a backup
// guardian, in another zone where possible, to keep one too. The holder
// beats to its guardians while it holds the pack; the peer that receives
// the work after it releases them (settle.go). A guardian whose holder
// falls silent re-routes the pack to another peer with attempt+1 and never
// back to the silent one; a backup does so only when the primary is gone
// too. The rules live in package node/guard (a machine with no I/O and no
// lock); this file carries out what it says. Each step key has its own
// slot and lock, held while an event is stepped and its record persisted;
// watching, answering and the re-route itself come after, outside it.

// guardSlot holds the guard machine of one step key.
type guardSlot struct {
	// mu serialises stepping and the persisting of the stepped machine.
	mu sync.Mutex
	// cur is the committed machine. It is never changed once stored
	// (stepGuard steps a clone), so readers load it without a lock.
	cur atomic.Pointer[guard.Guard]
	// dead is set (under mu) when the slot left the table empty; a
	// stepper that finds it set takes a new slot.
	dead bool
}

// guardTable is every step key this peer guards or remembers released.
type guardTable struct {
	t table[*guardSlot]
	// pending indexes the pending copies (node/guard G17) by holder, so
	// that a beat's list of held keys is checked against them without
	// reading every guard.
	pmu     sync.Mutex
	pending map[string]map[string]struct{}
}

func newGuardTable() *guardTable {
	return &guardTable{t: newTable[*guardSlot](), pending: map[string]map[string]struct{}{}}
}

// indexPending updates the pending index for key, whose machine goes from
// before to after.
func (t *guardTable) indexPending(key string, before, after *guard.Guard) {
	b, a := before.Pending(), after.Pending()
	if b == a {
		return
	}
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if b != nil {
		if keys := t.pending[b.Holder.ID]; keys != nil {
			delete(keys, key)
			if len(keys) == 0 {
				delete(t.pending, b.Holder.ID)
			}
		}
	}
	if a != nil {
		keys := t.pending[a.Holder.ID]
		if keys == nil {
			keys = map[string]struct{}{}
			t.pending[a.Holder.ID] = keys
		}
		keys[key] = struct{}{}
	}
}

// pendingOf returns the keys of the pending copies of holder's work.
func (t *guardTable) pendingOf(holder string) []string {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	keys := t.pending[holder]
	if len(keys) == 0 {
		return nil
	}
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	return out
}

// slot returns key's slot, creating an empty one.
func (t *guardTable) slot(key string) *guardSlot {
	s, _ := t.t.getOrAdd(key, func() *guardSlot {
		s := &guardSlot{}
		s.cur.Store(guard.New(key))
		return s
	})
	return s
}

// locked returns key's live slot with its lock held (a slot that left
// the table empty meanwhile is not used: a new one is taken).
func (t *guardTable) locked(key string) *guardSlot {
	for {
		s := t.slot(key)
		s.mu.Lock()
		if !s.dead {
			return s
		}
		s.mu.Unlock()
	}
}

// commit makes m, written to the journal, key's machine; a machine left
// empty leaves the table. s's lock is held.
func (t *guardTable) commit(key string, s *guardSlot, m *guard.Guard) {
	t.indexPending(key, s.cur.Load(), m)
	s.cur.Store(m)
	if m.Empty() {
		s.dead = true
		t.remove(key, s)
	}
}

// put installs a restored machine (at start, before anything steps).
func (t *guardTable) put(g *guard.Guard) {
	s := &guardSlot{}
	s.cur.Store(g)
	t.t.set(g.Key(), s)
}

// remove drops s from the table if it is still key's slot.
func (t *guardTable) remove(key string, s *guardSlot) { t.t.removeIf(key, s) }

// all returns the committed machine of every key (a snapshot).
func (t *guardTable) all() []*guard.Guard {
	slots := t.t.values()
	out := make([]*guard.Guard, 0, len(slots))
	for _, s := range slots {
		out = append(out, s.cur.Load())
	}
	return out
}

// view returns key's committed machine (an empty one when unknown).
func (t *guardTable) view(key string) *guard.Guard {
	s, ok := t.t.get(key)
	if !ok {
		return guard.New(key)
	}
	return s.cur.Load()
}

// holding returns the keys of the copies of work held by holder.
func (t *guardTable) holding(holder string) []*guard.Guard {
	var out []*guard.Guard
	for _, g := range t.all() {
		if g.Holds(holder) {
			out = append(out, g)
		}
	}
	return out
}

// stepGuard steps key's machine with ev: it persists what the machine
// says (outside every shared lock; a failed write refuses the event and
// changes nothing, I4), commits it, then watches and unwatches holders and
// starts the asynchronous work. The caller answers from the Ready.
func (n *Node) stepGuard(key string, ev guard.Event) (guard.Ready, error) {
	s := n.guards.locked(key)
	m := s.cur.Load().Clone()
	rd := m.Step(ev)
	if err := n.persistGuard(m, rd.Persist); err != nil {
		s.mu.Unlock()
		return guard.Ready{}, fmt.Errorf("journal guard copy %s: %w", key, err)
	}
	n.pendingGoneLater(m, rd)
	n.guards.commit(key, s, m)
	s.mu.Unlock()
	n.logPendingGone(m, rd, ev)
	n.applyGuard(key, rd)
	return rd, nil
}

// logPendingGone logs the end of a pending copy (G17) and the event that
// ended it: which word confirmed a release, or that none did.
func (n *Node) logPendingGone(m *guard.Guard, rd guard.Ready, ev guard.Event) {
	gone := rd.PendingGone
	if gone == nil || !n.log.Enabled(n.ctx, slog.LevelDebug) {
		return
	}
	confirmed := m.Mark() != nil && !m.Mark().Unconfirmed
	n.log.Debug("pending guard copy gone", "key", m.Key(), "attempt", gone.Attempt, "holder", rpc.ShortIDString(gone.Holder.ID),
		"event", strings.TrimPrefix(fmt.Sprintf("%T", ev), "guard."), "confirmed", confirmed, "live", m.Copy() != nil)
}

// stepGuardsTogether steps the machines of two different keys, a with
// ea and b with eb, and persists what both say in one journal commit
// (a backup's store and the release of the step before, sent in one
// request). The slots are locked in key order, so two such calls
// never wait for each other in a circle. A failed write refuses both
// events and changes nothing (I4).
func (n *Node) stepGuardsTogether(a string, ea guard.Event, b string, eb guard.Event) (guard.Ready, guard.Ready, error) {
	if a == b {
		// One slot cannot be locked twice.
		return guard.Ready{}, guard.Ready{}, fmt.Errorf("two guard events for one copy, %s, must be stepped one after the other", a)
	}
	first, second := a, b
	if second < first {
		first, second = second, first
	}
	s1 := n.guards.locked(first)
	s2 := n.guards.locked(second)
	sa, sb := s1, s2
	if first != a {
		sa, sb = s2, s1
	}
	ma, mb := sa.cur.Load().Clone(), sb.cur.Load().Clone()
	rda, rdb := ma.Step(ea), mb.Step(eb)
	wa, wb := guardWrite(ma, rda.Persist), guardWrite(mb, rdb.Persist)
	var err error
	if wa != nil || wb != nil {
		err = n.journal.Update(func(tx *journal.Tx) error {
			for _, w := range []func(*journal.Tx) error{wa, wb} {
				if w == nil {
					continue
				}
				if err := w(tx); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err == nil {
		n.pendingGoneLater(ma, rda)
		n.pendingGoneLater(mb, rdb)
		n.guards.commit(a, sa, ma)
		n.guards.commit(b, sb, mb)
	}
	s2.mu.Unlock()
	s1.mu.Unlock()
	if err != nil {
		return guard.Ready{}, guard.Ready{}, fmt.Errorf("journal guard copies %s and %s: %w", a, b, err)
	}
	n.logPendingGone(ma, rda, ea)
	n.logPendingGone(mb, rdb, eb)
	n.applyGuard(a, rda)
	n.applyGuard(b, rdb)
	return rda, rdb, nil
}

// persistGuard writes what p says of m.
func (n *Node) persistGuard(m *guard.Guard, p guard.Persist) error {
	if write := guardWrite(m, p); write != nil {
		return n.journal.Update(write)
	}
	return nil
}

// guardWrite is what persistGuard writes, as a function of a journal
// transaction (nil: nothing to write).
//
// A pending copy (G17) stays where the live copy was, in BucketOutbox,
// beside a tombstone that says so (guard.Mark.Pending): the release
// writes no pack bytes, and the copy's end, deferred to a later write
// (pendingGoneLater), deletes the entry the release deleted before
// pending copies were journaled.
func guardWrite(m *guard.Guard, p guard.Persist) func(*journal.Tx) error {
	key := m.Key()
	switch p {
	case guard.PersistSave:
		value := rpc.MustCBOR(m.Copy())
		return func(tx *journal.Tx) error { return tx.Put(journal.BucketOutbox, key, value) }
	case guard.PersistSaveMark:
		value, mark := rpc.MustCBOR(m.Copy()), rpc.MustCBOR(m.Mark())
		return func(tx *journal.Tx) error {
			if err := tx.Put(journal.BucketOutbox, key, value); err != nil {
				return err
			}
			return tx.Put(journal.BucketReleased, key, mark)
		}
	case guard.PersistForget, guard.PersistForgetPending:
		// One transaction: a guardian that restarts still knows the step
		// moved on (a release is answered only once this is durable).
		// The outbox entry is the pending copy while there is one.
		mark, keep := rpc.MustCBOR(m.Mark()), m.Pending() != nil
		return func(tx *journal.Tx) error {
			if !keep {
				if err := tx.Delete(journal.BucketOutbox, key); err != nil {
					return err
				}
			}
			return tx.Put(journal.BucketReleased, key, mark)
		}
	case guard.PersistDropMark:
		live := m.Copy() != nil
		return func(tx *journal.Tx) error {
			if !live {
				if err := tx.Delete(journal.BucketOutbox, key); err != nil { // a pending copy's
					return err
				}
			}
			return tx.Delete(journal.BucketReleased, key)
		}
	case guard.PersistDelete:
		return func(tx *journal.Tx) error { return tx.Delete(journal.BucketOutbox, key) }
	case guard.PersistRestore:
		// One transaction: the copy is live again and nothing moved on
		// (G17: the successor never took the work).
		value := rpc.MustCBOR(m.Copy())
		return func(tx *journal.Tx) error {
			if err := tx.Put(journal.BucketOutbox, key, value); err != nil {
				return err
			}
			return tx.Delete(journal.BucketReleased, key)
		}
	}
	return nil
}

// pendingGoneLater journals the end of a pending copy (rd.PendingGone,
// G17) with the next write rather than a commit of its own: its outbox
// entry goes, unless a live copy is there now. Called with the key's
// slot locked, after the step's own write, so that it follows that
// write. Lost to a crash, the copy is restored as pending and asked about
// again, or is stale and dropped (resume).
func (n *Node) pendingGoneLater(m *guard.Guard, rd guard.Ready) {
	gone := rd.PendingGone
	if gone == nil || m.Copy() != nil {
		return
	}
	key, attempt := m.Key(), gone.Attempt
	n.journal.Later(func(tx *journal.Tx) error { return dropPendingCopy(tx, key, attempt) })
}

// dropPendingCopy deletes key's outbox entry if it is the copy of attempt
// (a live copy stored since is of a later one), read in place without
// copying or decoding its pack (guard.Record's key 4).
func dropPendingCopy(tx *journal.Tx, key string, attempt int) error {
	var c struct {
		Attempt int `cbor:"4,keyasint"`
	}
	decoded := false
	ok, err := tx.Peek(journal.BucketOutbox, key, func(raw []byte) error {
		decoded = rpc.Dec.Unmarshal(raw, &c) == nil
		return nil
	})
	if err != nil || !ok || !decoded || c.Attempt != attempt {
		return err
	}
	return tx.Delete(journal.BucketOutbox, key)
}

// applyGuard carries out the part of rd that follows the write.
func (n *Node) applyGuard(key string, rd guard.Ready) {
	for _, h := range rd.Watch {
		if id, err := peer.Decode(h.ID); err == nil && id != n.host.ID() {
			n.learnAddrs(id, h.Addrs)
			n.watchHolder(id)
		}
	}
	for _, h := range rd.Unwatch {
		if h != "" {
			n.unwatchIfIdle(h)
		}
	}
	if o := rd.Reroute; o != nil {
		n.spawn(func(ctx context.Context) { n.reroute(ctx, key, *o) })
	}
	if a := rd.AskPrimary; a != nil {
		n.spawn(func(ctx context.Context) { n.askPrimary(ctx, key, *a) })
	}
	if t := rd.TellSuperseded; t != nil {
		n.spawn(func(ctx context.Context) {
			n.guardCall(ctx, t.Peer, api.HeldSuperseded{Key: key, Attempt: t.Attempt}, settleCallTimeout)
		})
	}
	if r := rd.ReleaseOld; r != nil {
		for _, b := range r.Peers {
			if b.ID == n.selfID {
				continue // this peer's copy moved on with the re-route
			}
			n.spawn(func(ctx context.Context) {
				n.guardCall(ctx, b, api.GuardRelease{Key: key, Attempt: r.Attempt, Rerouted: true, Rerouter: n.selfID}, settleCallTimeout)
			})
		}
	}
	if w := rd.AddWatcher; w != nil {
		n.spawn(func(ctx context.Context) {
			n.guardCall(ctx, w.Peer, api.HeldAddWatcher{Key: key, Attempt: w.Attempt, Watcher: n.self()}, n.cfg.StreamTimeout)
		})
	}
	if rd.RecruitBackup {
		n.spawn(func(ctx context.Context) { n.recruitBackup(ctx, key) })
	}
	if q := rd.AskSuccessor; q != nil {
		n.spawn(func(ctx context.Context) { n.askTook(ctx, key, *q) })
	}
}

// guardReply is the wire form of a machine's answer.
func guardReply(r *guard.Reply) api.GuardReply {
	if r == nil {
		return api.GuardReply{OK: true}
	}
	return api.GuardReply{OK: r.OK, Known: r.Known, Released: r.Released, Superseded: r.Superseded,
		Pending: r.Pending, Handing: r.Handing, Recording: r.Recording, Rerouting: r.Rerouting, Attempt: r.Attempt,
		Holder: r.Holder, TookKey: r.TookKey, Error: r.Error}
}

// machineReply is a guardian's answer as the guard machine reads it (the
// inverse of guardReply).
func machineReply(r api.GuardReply) guard.Reply {
	return guard.Reply{OK: r.OK, Known: r.Known, Released: r.Released, Superseded: r.Superseded,
		Pending: r.Pending, Handing: r.Handing, Recording: r.Recording, Rerouting: r.Rerouting, Attempt: r.Attempt,
		Holder: r.Holder, TookKey: r.TookKey, Error: r.Error}
}

// guardKey names a step in flight: workflow and step path (attempts share it).
func guardKey(p *pack.Pack) string {
	return journal.StepKey(p.WorkflowID, headPath(p))
}

// guardHandedOff records that this peer now guards p, held by h.to, with
// the backup guardians the holder recruited (h.backups); when it recruited
// none, this peer recruits one in the background.
func (n *Node) guardHandedOff(p *pack.Pack, h handedOff, tried []string) {
	store, ok := n.guardStoreFor(p, h, tried)
	if !ok {
		return
	}
	if _, err := n.stepGuard(guardKey(p), store); err != nil {
		// The successor has the pack and its backup guards it.
		n.log.Error("keep guard copy", "err", err)
	}
}

// guardStoreFor is the event that makes this peer the primary guardian of
// p as handed off in h; false for a local hand-off (the backup guards it)
// or a pack that cannot be encoded.
func (n *Node) guardStoreFor(p *pack.Pack, h handedOff, tried []string) (guard.Store, bool) {
	if h.to == n.host.ID() {
		return guard.Store{}, false
	}
	raw := h.raw
	if raw == nil {
		var err error
		if raw, err = pack.Encode(p); err != nil {
			n.log.Error("encode guarded pack", "err", err)
			return guard.Store{}, false
		}
	}
	return guard.Store{
		Pack: raw, Holder: n.peerRef(h.to), Attempt: p.Attempt, Role: guard.RolePrimary,
		Tried: tried, Backups: h.backups, Recruit: true, At: n.clock.Now().UTC(),
	}, true
}

// recruitBackup asks a peer in another zone to guard key's copy too, and
// tells the holder to beat to it.
func (n *Node) recruitBackup(ctx context.Context, key string) {
	c := n.guards.view(key).Copy()
	if c == nil {
		return
	}
	holder, err := peer.Decode(c.Holder.ID)
	if err != nil {
		return
	}
	b, ok := n.pickGuardian(map[peer.ID]bool{holder: true, n.host.ID(): true}, c.Holder.Zone)
	if !ok {
		return
	}
	ref := n.peerRef(b)
	rep := n.guardCall(ctx, ref, api.GuardStore{Key: key, Attempt: c.Attempt, Pack: c.Pack, Holder: c.Holder, Primary: n.self()}, n.cfg.StreamTimeout)
	if !rep.OK {
		n.log.Debug("backup guardian refused", "peer", rpc.ShortID(b), "err", rep.Error)
		return
	}
	if _, err := n.stepGuard(key, guard.BackupAdded{Peer: ref, Attempt: c.Attempt}); err != nil {
		n.log.Error("record backup guardian", "err", err)
	}
	rep = n.guardCall(ctx, c.Holder, api.HeldAddWatcher{Key: key, Attempt: c.Attempt, Watcher: ref}, n.cfg.StreamTimeout)
	if rep.OK && rep.Released {
		// The holder already moved on: the backup has nothing to watch.
		n.guardCall(ctx, ref, api.GuardRelease{Key: key, Attempt: c.Attempt}, n.cfg.StreamTimeout)
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
	return n.pickGuardianPreferring(exclude, avoidZones, nil)
}

// pickGuardianPreferring is pickGuardianAvoiding that takes the peers in
// prefer (nil: none) over the others of their rank:
// above an open connection and chance, below every zone and timetable
// criterion.
func (n *Node) pickGuardianPreferring(exclude map[peer.ID]bool, avoidZones map[string]bool, prefer map[peer.ID]bool) (peer.ID, bool) {
	var best peer.ID
	bestScore := -1.0
	tt := n.timetableRouting()
	horizon := n.tt.view.Config().DefaultExpected
	for _, lp := range n.pres.live() {
		id, a := lp.id, lp.ann
		if exclude[id] || a.Draining || n.tt.view.Suspected(a.ID) || !n.breakers.Allowed(a.ID) {
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
			switch vd := n.tt.view.CanRun(a.ID, horizon); {
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
		score += n.rand.Float64() * 0.4
		if prefer[id] {
			score += 1
		}
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
	n.firstBeat[key] = n.clock.Now()
	n.mu.Unlock()
	n.clock.AfterFunc(n.cfg.FirstBeatTimeout, func() {
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

// unwatchIfIdle stops watching holder when nothing guarded is held by it
// and no join copy waits on it. The check and the unwatch happen under
// n.mu, and watchHolder (which takes n.mu) runs only after a copy is
// committed, so a copy added meanwhile never loses its watch.
func (n *Node) unwatchIfIdle(holder string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.watchNeededLocked(holder) {
		return
	}
	delete(n.firstBeat, holder)
	n.watcher.Unwatch(holder)
}

// onSuspect is the failure detector's verdict on a silent holder: every
// copy of work it held is stepped Silent (the primary re-routes it, a
// backup asks the primary), and every join whose actor it was is taken
// over.
func (n *Node) onSuspect(s heartbeat.Suspicion) {
	copies := n.guards.holding(s.Key)
	joins := n.joinsWatching(s.Key)
	n.log.Warn("peer suspected", "peer", s.Key, "silence_ms", s.Silence.Milliseconds(),
		"guarded", len(copies), "joins", len(joins), "at", s.At.UTC().Format(time.RFC3339Nano))
	n.ev.Emit(events.Event{Type: events.Suspect, Peer: s.Key, At: s.At.UTC()})
	n.pres.forgetID(s.Key)
	n.tt.view.Suspect(s.Key)
	n.breakers.Failure(s.Key)
	why := "silent for " + s.Silence.Round(time.Millisecond).String()
	for _, g := range copies {
		n.spawn(func(context.Context) {
			if _, err := n.stepGuard(g.Key(), guard.Silent{Holder: s.Key, Why: why}); err != nil {
				n.log.Error("step guard", "err", err)
			}
		})
	}
	for _, c := range joins {
		n.spawn(func(ctx context.Context) {
			if !n.mayTakeOver(ctx, s.Key) {
				return
			}
			n.stepJoin(c, join.ActorSilent{Why: "actor " + rpc.ShortIDString(s.Key) + " went silent"})
		})
	}
}

// mayTakeOver decides whether a join copy may act on its silent actor:
// not while this peer is itself cut off from the mesh (Lifeguard's
// self-awareness: a replica on a flapping link saw a live actor as silent
// and forwarded a second continuation), and not when the actor answers a
// ping now (answersFresh). An actor that does not answer is taken over
// only if the mesh still answers this peer after that: a cut that began
// between the two checks (a flapping link) made a cut-off copy take over
// a live actor and the workflow stalled.
func (n *Node) mayTakeOver(ctx context.Context, actor string) bool {
	id, err := peer.Decode(actor)
	if err != nil {
		return false
	}
	waited := false
	for {
		for n.cutOff(ctx, actor) {
			if !waited {
				n.log.Warn("not taking over joins yet: this peer seems cut off", "actor", rpc.ShortIDString(actor))
			}
			waited = true
			select {
			case <-ctx.Done():
				return false
			case <-n.clock.After(time.Second):
			}
		}
		// The suspicion may date from a cut this peer has just come out
		// of (a flapping link): an actor that answers now is not taken
		// over. Now: by a check that began after the one above (a
		// shared check begun during the cut answers for then), while
		// the mesh is asked alongside.
		asked := n.clock.Now()
		stop := n.watchCutOff(ctx, actor)
		answers := n.answersFreshSince(ctx, id, asked)
		stop()
		if answers {
			n.log.Info("not taking over joins: the actor answers again", "actor", rpc.ShortIDString(actor))
			return false
		}
		// A cut that began after the check above makes a live actor look
		// gone: take over only while the mesh still answers this peer,
		// and only if it answered all along — a cut shorter than the
		// actor's check (up to 4 s; a flapping link's are 1–1.5 s) that
		// began and ended within it would make a replica take a live
		// actor over in the gap between two cuts (flapping-link; join
		// J7).
		if ctx.Err() != nil {
			return false
		}
		if !n.cutOff(ctx, actor) && !n.cutOffSince(asked) {
			return ctx.Err() == nil
		}
	}
}

// watchCutOff asks cutOff about the mesh every 250 ms until the returned
// stop is called (stop waits for the round in flight): any round that
// finds this peer cut off is recorded (cutOffAt, read by cutOffSince).
func (n *Node) watchCutOff(ctx context.Context, silent string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			n.cutOff(ctx, silent)
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-n.clock.After(250 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// cutOffSince reports whether cutOff found this peer cut off at t or later.
func (n *Node) cutOffSince(t time.Time) bool {
	at := n.cutOffAt.Load()
	return at != 0 && at >= t.UnixNano()
}

// recentlyCutOff reports whether cutOff found this peer cut off within d.
func (n *Node) recentlyCutOff(d time.Duration) bool {
	at := n.cutOffAt.Load()
	return at != 0 && n.clock.Since(time.Unix(0, at)) < d
}

// askPrimary lets the primary guardian act first, then asks it about key
// and steps its answer (or that it could not be reached).
//
// It pings the primary at once too: a primary that answers no ping now
// (on a fresh connection) and no question after BackupDelay has been
// silent all that time, which mayReroute's co-guardian wait counts
// (silentPrimaries) instead of waiting coGuardianWait more after the
// delay for the same silence.
func (n *Node) askPrimary(ctx context.Context, key string, a guard.Ask) {
	began := n.clock.Now()
	var silentSince time.Time
	if id, err := peer.Decode(a.Primary.ID); err == nil && id != n.host.ID() {
		n.learnAddrs(id, a.Primary.Addrs)
		if !n.pingable(ctx, id) {
			silentSince = began
			n.redial(id)
		}
	}
	select {
	case <-ctx.Done():
		return
	case <-n.clock.After(n.cfg.BackupDelay - n.clock.Since(began)):
	}
	ans := guard.PrimaryAnswer{Silent: a.Silent, Attempt: a.Attempt, Why: a.Why}
	if a.Primary.ID != "" {
		rep := n.guardCall(ctx, a.Primary, api.GuardStatus{Key: key, Holder: a.Silent, Attempt: a.Attempt}, settleCallTimeout)
		ans.Reached = rep.Error == ""
		ans.Reply = machineReply(rep)
	}
	if ans.Reached && ans.Reply.Handing {
		n.log.Info("not re-routing: the primary guardian is still handing the step on", "key", key, "primary", rpc.ShortIDString(a.Primary.ID), "silent", rpc.ShortIDString(a.Silent))
	}
	if !ans.Reached {
		n.log.Warn("primary guardian gone too; re-routing as backup", "key", key)
		if !silentSince.IsZero() {
			n.silentPrimaries.note(key, a.Attempt, a.Primary.ID, silentSince)
		}
	}
	ans.At = n.clock.Now().UTC()
	if _, err := n.stepGuard(key, ans); err != nil {
		n.log.Error("step guard", "err", err)
	}
}

// reroute carries out a re-route order: unless the workflow has ended, it
// claims the re-route, re-sends the guarded pack to another peer with
// attempt+1 (never to a peer in o.Tried) and steps the outcome; an
// at-most-once step fails its workflow instead. o.Why says what happened
// to the holder ("silent for 1.3s", "handed the step back before a power
// cut") for the trace.
func (n *Node) reroute(ctx context.Context, key string, o guard.Order) {
	p, err := pack.Decode(o.Pack, n.limits)
	if err != nil {
		n.log.Error("guarded pack unreadable", "key", key, "err", err)
		return
	}
	head, err := p.Head()
	if err != nil {
		n.redispatch(ctx, key, p, o) // the origin's first pack, starting with a FORK or CHOICE
		return
	}
	for {
		if o.Handback {
			if n.workflowEnded(ctx, p) {
				n.stepGuardLogged(key, guard.MovedOn{Holder: o.Holder.ID, Attempt: o.Attempt, At: n.clock.Now().UTC()})
				return
			}
		} else if !n.mayReroute(ctx, key, o, p) {
			return
		}
		rd, err := n.stepGuard(key, guard.Claim{Holder: o.Holder.ID, Attempt: o.Attempt, At: n.clock.Now().UTC()})
		if err != nil {
			return
		}
		if rd.Claimed {
			break
		}
		if rd.RecordingUntil.IsZero() {
			return // re-routed already, being re-routed, or released
		}
		// G18: a join or an origin is recording the holder's next hop;
		// its release drops this copy. Ask again once the hold is over.
		n.log.Info("not re-routing yet: a join or an origin is recording the step's next hop", "key", key, "workflow", p.WorkflowID, "attempt", o.Attempt, "silent", rpc.ShortIDString(o.Holder.ID))
		select {
		case <-ctx.Done():
			return
		case <-n.clock.After(n.clock.Until(rd.RecordingUntil)):
		}
	}
	silent := o.Holder
	note := fmt.Sprintf("holder %s (zone %s) %s; re-routed by %s as attempt %d",
		rpc.ShortIDString(silent.ID), silent.Zone, o.Why, rpc.ShortID(n.host.ID()), p.Attempt+1)
	p.Trace = append(p.Trace, pack.TraceEntry{
		Path: head.Path, Service: head.Name, Peer: silent.ID, Zone: silent.Zone,
		Start: o.Since, End: n.clock.Now().UTC(), Attempt: p.Attempt, Outcome: pack.OutcomeSuperseded, Note: note,
	})
	n.reportEvent(p, p.Trace[len(p.Trace)-1])
	if head.Once() {
		msg := fmt.Sprintf("step %s (path %s) is at-most-once (once=true) and its holder %s vanished: outcome unknown, not re-running",
			head.Name, head.Path, rpc.ShortIDString(silent.ID))
		// The refusal ends this chain as a re-route would (G4).
		n.stepGuardLogged(key, guard.GiveUp{Supersede: true, At: n.clock.Now().UTC()})
		if err := n.finishBranch(ctx, p, false, msg); err != nil {
			n.log.Error("report at-most-once failure", "err", err)
		}
		return
	}
	p.Attempt++
	// The holder that took the attempt settled the step before it (its
	// guardians name it as their successor, G8): the new attempt has
	// nothing of that to settle again. What it settles is the re-route
	// itself, at the attempt's other guardians (G20): one that re-routed
	// the attempt too (cut off from this one) refuses it if it was first,
	// so that one chain goes on. Lenient: they may have died with the
	// holder.
	p.Settle = nil
	if c := n.guards.view(key).Copy(); c != nil {
		if others := c.OtherGuardians(); len(others) > 0 {
			p.Settle = []pack.Settle{{Kind: pack.SettleRerouted, Key: key, Attempt: o.Attempt, Peers: others, Actor: n.selfID, Lenient: true}}
		}
	}
	exclude := map[peer.ID]bool{}
	for _, t := range o.Tried {
		if id, err := peer.Decode(t); err == nil {
			exclude[id] = true
		}
	}
	n.log.Warn("re-routing", "key", key, "step", head.Name, "attempt", p.Attempt, "silent", rpc.ShortIDString(silent.ID))
	n.ev.Emit(events.Event{Type: events.Reroute, Workflow: p.WorkflowID, Step: head.Path, Attempt: p.Attempt, Peer: silent.ID, Reason: o.Why})
	n.stallAfterClaim.stall(head.Name, n.cfg.DataDir, n.log)
	if !n.guards.view(key).Reroutes(o.Holder.ID, o.Attempt) {
		// G20: since the claim this backup gave way to its primary's
		// re-route (its receiver's settle got here), or guards that
		// re-route's new attempt: that chain goes on. Handing this pack on
		// now would start a second one wherever the primary's answer
		// cannot fence it (a receiver cut from the primary, this peer
		// itself).
		n.log.Warn("re-route given up: the primary guardian re-routed the step first", "key", key, "workflow", p.WorkflowID, "attempt", p.Attempt)
		return
	}
	h, err := n.handoffExcluding(ctx, p, nil, exclude)
	if err != nil {
		if errors.Is(err, errChainSuperseded) {
			// G20: another guardian re-routed this attempt first; its
			// chain goes on. G21: or the attempt moved on there, its
			// release confirmed (this guardian missed it).
			n.log.Warn("re-route refused: another guardian of the step re-routed it first, or saw it move on", "key", key, "workflow", p.WorkflowID, "attempt", p.Attempt)
			n.stepGuardLogged(key, guard.RerouteRefused{Attempt: o.Attempt, At: n.clock.Now().UTC()})
			return
		}
		if errors.Is(err, errCancelled) || ctx.Err() != nil {
			n.stepGuardLogged(key, guard.Aborted{})
			return
		}
		n.stepGuardLogged(key, guard.GiveUp{At: n.clock.Now().UTC()})
		if ferr := n.finishBranch(ctx, p, false, fmt.Sprintf("step %s (path %s): re-route failed: %v", head.Name, head.Path, err)); ferr != nil {
			n.log.Error("report failure", "err", ferr)
		}
		return
	}
	raw := h.raw
	if raw == nil {
		if raw, err = pack.Encode(p); err != nil {
			n.log.Error("encode re-routed pack", "err", err)
		}
	}
	// A failed write leaves the re-route claimed: releases of the old
	// attempt stay superseded and nothing re-routes it again.
	n.stepGuardLogged(key, guard.Rerouted{
		Target: n.peerRef(h.to), Local: h.to == n.host.ID(), Pack: raw,
		Attempt: p.Attempt, Backups: h.backups, At: n.clock.Now().UTC(),
	})
}

// coGuardianWait bounds how long a guardian about to re-route waits for
// an answer from the step's other guardians while it can reach the mesh:
// long enough to redial after a healed cut (a release it missed is then
// found), short enough that a holder killed with its backup is re-routed
// soon (I3).
const coGuardianWait = 5 * time.Second

// mayReroute asks, before a re-route of o, whether the step may have moved
// on without this guardian hearing of it (its release lost to a
// partition). It asks the workflow's origins and the
// step's other guardians: an origin that says the workflow ended, or a
// co-guardian that was released, means the step moved on — the copy is
// dropped and nothing is re-routed (I1). It goes ahead once a co-guardian
// answers that it still guards the step, or, when none answers, after
// coGuardianWait on fresh connections (the co-guardians were killed with
// the holder). While no other peer answers a ping at all this peer is the
// one cut off (Lifeguard's self-awareness): it waits however long that
// lasts. From the second round on, and always right before it goes ahead,
// a silent holder that answers a ping again (on a fresh connection if
// need be) is not re-routed: the copies are reconciled with it instead;
// one that does not answer is re-routed only if the mesh still answers
// this peer then, and the origins and co-guardians, asked once more, still
// say the step has not moved on.
func (n *Node) mayReroute(ctx context.Context, key string, o guard.Order, p *pack.Pack) bool {
	wait := 500 * time.Millisecond
	// The co-guardian wait counts from now, or from when every co-guardian
	// this guardian asks was first found silent (a stood-in backup's
	// primary, askPrimary).
	var began time.Time
	defer n.silentPrimaries.forget(key, o.Attempt)
	var unsureSince time.Time // first round a named successor did not answer
	for round := 0; ; round++ {
		waitingForCoGuardian := false
		c := n.guards.view(key).Copy()
		if c == nil || c.Holder.ID != o.Holder.ID || c.Attempt != o.Attempt {
			return false // moved on, or re-routed, meanwhile
		}
		if round == 0 {
			began = n.silentPrimaries.since(key, o.Attempt, coGuardiansOf(c, n.selfID), n.clock.Now())
		}
		if round > 0 && n.holderBack(ctx, key, o.Holder.ID) {
			return false
		}
		a := n.stepMovedOn(ctx, key, o, c, p)
		if a.movedOn || ctx.Err() != nil {
			return false
		}
		goAhead := a.peersReached
		switch {
		case a.successorUnsure:
			// A co-guardian was released by a successor that has not
			// said whether it took the work: wait for its word (node/guard
			// G17), up to SuccessorGrace, as for a pending copy's own
			// successor (askTook).
			if unsureSince.IsZero() {
				unsureSince = n.clock.Now()
			}
			if n.clock.Since(unsureSince) >= guard.SuccessorGrace {
				n.log.Warn("not re-routing: a successor a co-guardian named never said whether it took the work; taken as moved on", "key", key, "workflow", p.WorkflowID, "attempt", o.Attempt, "after", guard.SuccessorGrace)
				n.stepGuardLogged(key, guard.MovedOn{Holder: o.Holder.ID, Attempt: o.Attempt, At: n.clock.Now().UTC()})
				return false
			}
			n.log.Info("not re-routing yet: waiting for the successor a co-guardian named to say whether it took the work", "key", key, "silent", rpc.ShortIDString(o.Holder.ID))
			goAhead = false
		case a.recording:
			// The co-guardian holds its own re-route off until the record's
			// release, or RecordingHold (G18); so does this one.
			n.log.Info("not re-routing yet: a co-guardian says a join or an origin is recording the step's next hop", "key", key, "silent", rpc.ShortIDString(o.Holder.ID))
			goAhead = false
		case a.rerouting:
			// A co-guardian claimed the re-route first (G19): its notice
			// (G7) drops this copy; if it gives up instead, the next round
			// finds it no longer re-routing.
			n.log.Info("not re-routing yet: another guardian of the step is re-routing it", "key", key, "silent", rpc.ShortIDString(o.Holder.ID))
			goAhead = false
		case goAhead:
		case !a.originReached && n.cutOff(ctx, o.Holder.ID):
			n.log.Warn("not re-routing yet: no other peer answers; this peer may be cut off", "key", key, "silent", rpc.ShortIDString(o.Holder.ID))
		case a.asked == 0 || n.clock.Since(began) >= coGuardianWait:
			goAhead = true
		default:
			n.log.Info("not re-routing yet: waiting for another guardian of the step to answer", "key", key, "silent", rpc.ShortIDString(o.Holder.ID))
			waitingForCoGuardian = true
		}
		if goAhead {
			// The last word is the holder's: the answers above may come
			// from a heal that reached the holder too, after it moved on
			// with guardians this one never heard from (re-routed then,
			// an at-most-once step would run again after a cut healed).
			if n.holderBack(ctx, key, o.Holder.ID) {
				return false
			}
			// A cut that began since the answers above makes a live
			// holder look gone (a flapping link).
			if !n.cutOff(ctx, o.Holder.ID) {
				// Those checks take seconds: the answers above are stale
				// now (on a flapping link, the workflow may have ended
				// meanwhile, and a step of it would be re-routed). Ask
				// again.
				a := n.stepMovedOn(ctx, key, o, c, p)
				if a.movedOn || ctx.Err() != nil {
					return false
				}
				// Nobody answered that last question: a cut may have begun
				// since the pings (a flapping link: acting on silence would
				// re-route a step whose release this peer had missed, while
				// its co-guardian knew it was released). Ping again before
				// acting on silence.
				switch {
				case a.holdOff.any():
					// Asked again next round (above).
				case a.originReached || a.peersReached || !n.cutOff(ctx, o.Holder.ID):
					return true
				default:
					n.log.Warn("not re-routing yet: this peer seems cut off now", "key", key, "silent", rpc.ShortIDString(o.Holder.ID))
				}
			} else {
				n.log.Warn("not re-routing yet: this peer seems cut off now", "key", key, "silent", rpc.ShortIDString(o.Holder.ID))
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-n.clock.After(nextRound(wait, waitingForCoGuardian, coGuardianWait-n.clock.Since(began))):
		}
		wait = min(wait*2, 4*time.Second)
	}
}

// nextRound is how long mayReroute sleeps before its next round: the
// backoff wait, cut short to end when coGuardianWait does (left) while
// that wait is all that holds the re-route off. Without the cut the
// doubling backoff would ask again only at 7.5 s, and a holder killed
// with its other guardian would stay un-re-routed 2.5 s past the bound
// (the chaos `consecutive` scenario).
func nextRound(wait time.Duration, waitingForCoGuardian bool, left time.Duration) time.Duration {
	if waitingForCoGuardian && left > 0 && left < wait {
		return left
	}
	return wait
}

// coGuardiansOf lists the guardians of c's step other than self (and its
// holder) that askCoGuardians asks: c.Primary too, though a backup
// re-routes only once its primary did not answer (askPrimary): after a
// cut the primary may answer now, released.
func coGuardiansOf(c *guard.Record, self string) []pack.Peer {
	var peers []pack.Peer
	for _, b := range append([]pack.Peer{c.Primary}, c.Backups...) {
		if b.ID != "" && b.ID != self && b.ID != c.Holder.ID {
			peers = append(peers, b)
		}
	}
	return peers
}

// silenceBook remembers, per step key and attempt, which co-guardian
// askPrimary found silent (a stood-in backup's primary) and since when,
// for mayReroute; mayReroute forgets a key's entry when it returns, and
// the retention (prune) one never read after silenceKept.
type silenceBook struct{ set *timedSet[string] }

func newSilenceBook() silenceBook { return silenceBook{set: newTimedSet[string]()} }

func silenceKey(key string, attempt int) string { return key + "|" + strconv.Itoa(attempt) }

// silenceKept bounds how long a silence noted for a key whose re-route
// never reached mayReroute (the origin's first pack, redispatched) is
// kept.
const silenceKept = 10 * time.Minute

// note records that peer has been silent since t for key's attempt.
func (b silenceBook) note(key string, attempt int, peerID string, t time.Time) {
	b.set.put(silenceKey(key, attempt), t, peerID)
}

// since is when the co-guardian wait for key's attempt starts: when the
// one co-guardian asked was found silent, or now if it was not (or more
// than one is asked: only a primary is noted).
func (b silenceBook) since(key string, attempt int, peers []pack.Peer, now time.Time) time.Time {
	e, ok := b.set.get(silenceKey(key, attempt))
	if !ok || len(peers) != 1 || peers[0].ID != e.v {
		return now
	}
	return e.at
}

// forget drops what was noted for key's attempt.
func (b silenceBook) forget(key string, attempt int) { b.set.remove(silenceKey(key, attempt)) }

// movedOnAnswer is what one round of stepMovedOn found.
type movedOnAnswer struct {
	movedOn       bool // nothing to re-route: the step moved on (the copy was dropped), or the primary acts (G19)
	originReached bool // an origin of the workflow answered
	peersReached  bool // a co-guardian answered
	asked         int  // co-guardians asked
	// holdOff: why the step must not be re-routed on this round's answers,
	// nothing else saying it moved on.
	holdOff
}

// holdOff is what co-guardians said that holds a re-route off for a round.
type holdOff struct {
	// successorUnsure: a co-guardian was released by a named successor
	// that did not say whether it took the work (no answer in time, or
	// still taking it) (node/guard G17).
	successorUnsure bool
	// recording: a co-guardian says a join or an origin is recording the
	// attempt's next hop (G18).
	recording bool
	// rerouting: a co-guardian claimed the re-route already; its notice
	// (G7) is waited for (G19).
	rerouting bool
}

// any reports whether something holds the re-route off.
func (h holdOff) any() bool { return h.successorUnsure || h.recording || h.rerouting }

// stepMovedOn asks the workflow's origins and the step's other guardians,
// all at once, whether the step moved on (the workflow ended, or a
// co-guardian was released at c's attempt or later); when it did, the copy
// is dropped (MovedOn). It also says whether an origin and a co-guardian
// answered, how many co-guardians it asked, and whether a successor a
// co-guardian named left the answer open.
func (n *Node) stepMovedOn(ctx context.Context, key string, o guard.Order, c *guard.Record, p *pack.Pack) movedOnAnswer {
	var ended, stale bool
	var co coGuardianAnswer
	var a movedOnAnswer
	var wg sync.WaitGroup
	var branchEnded bool
	wg.Add(4)
	go func() { defer wg.Done(); ended, a.originReached = n.workflowEndedReached(ctx, p) }()
	go func() { defer wg.Done(); co = n.askCoGuardians(ctx, key, c) }()
	go func() { defer wg.Done(); stale = n.chainSuperseded(ctx, c, p) }()
	go func() { defer wg.Done(); branchEnded = n.branchEnded(ctx, p) }()
	wg.Wait()
	released := co.movedOn
	a.peersReached, a.asked = co.reached, co.asked
	if ctx.Err() != nil {
		return a
	}
	if stale && !ended && !released {
		// Dropped first, then said: a reader of the log finds it dropped.
		n.stepGuardLogged(key, guard.ChainSuperseded{Holder: o.Holder.ID, Attempt: o.Attempt})
		n.log.Info("not re-routing: a guardian of the step before re-routed it past this chain", "key", key, "workflow", p.WorkflowID, "attempt", o.Attempt, "holder", rpc.ShortIDString(o.Holder.ID))
		n.ev.Emit(events.Event{Type: events.Superseded, Workflow: p.WorkflowID, Step: headPath(p), Attempt: o.Attempt, Peer: o.Holder.ID, Reason: "guard copy of a superseded chain dropped"})
		a.movedOn = true
		return a
	}
	if !(ended || released || branchEnded) {
		if co.primaryGuards {
			// G19: the primary this copy stood in for answers now, with a
			// live copy of the same attempt: it acts, and this copy is a
			// backup again.
			n.stepGuardLogged(key, guard.PrimaryGuards{Holder: o.Holder.ID, Attempt: o.Attempt})
			n.log.Info("not re-routing: the primary guardian this backup stood in for answers and guards the step", "key", key, "workflow", p.WorkflowID, "attempt", o.Attempt, "primary", rpc.ShortIDString(c.Primary.ID))
			a.movedOn = true
			return a
		}
		a.holdOff = co.holdOff
		return a
	}
	why := "the workflow has ended"
	switch {
	case released:
		why = "another guardian of the step was released, or re-routed it past this attempt"
	case branchEnded && !ended:
		why = "the join recorded the end of this step's branch"
	}
	n.log.Info("not re-routing: the step moved on", "key", key, "workflow", p.WorkflowID, "attempt", o.Attempt, "why", why)
	n.stepGuardLogged(key, guard.MovedOn{Holder: o.Holder.ID, Attempt: o.Attempt, At: n.clock.Now().UTC()})
	a.movedOn = true
	return a
}

// chainSuperseded probes the release of the step before c's step, as c's
// holder made it when it took the hand-over (the SettleGuard items of the
// kept pack p, By the holder; node/guard G6), at every guardian of that
// step at once, and reports whether one answered superseded: then c is a
// copy of a chain a guardian re-routed away from (or that another
// successor took first), which the holder refused or its next hop
// refuses, and re-routing it would run its step a second time
// (node/guard G12). No answer, or a pack with nothing to settle (a
// re-route's, the origin's, a join's), says no.
//
// It is probeSettle's question (G6) with the holder as By, asked in one
// round like the other questions of a mayReroute round (whose next round
// asks again), not through settleRounds' retries on fresh connections:
// those would add up to a settle budget to every round whose step-before
// guardian died with the holder, and so to the re-route of a killed
// holder's work (I3).
func (n *Node) chainSuperseded(ctx context.Context, c *guard.Record, p *pack.Pack) bool {
	type probe struct {
		to  pack.Peer
		msg api.GuardRelease
	}
	var probes []probe
	for _, it := range p.Settle {
		if it.Kind != pack.SettleGuard {
			continue
		}
		for _, g := range it.Peers {
			probes = append(probes, probe{g, api.GuardRelease{Key: it.Key, Attempt: it.Attempt, Probe: true, By: c.Holder.ID}})
		}
	}
	return anyAtOnce(probes, func(pr probe) bool {
		rep, err := n.guardCallErr(ctx, pr.to, pr.msg, settleCallTimeout)
		return err == nil && rep.Superseded
	})
}

// anyAtOnce calls f on every item, all at once, and reports whether any
// call said yes (after all have returned).
func anyAtOnce[T any](items []T, f func(T) bool) bool {
	var yes atomic.Bool
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f(it) {
				yes.Store(true)
			}
		}()
	}
	wg.Wait()
	return yes.Load()
}

// holderBack reports whether the silent holder of key answers a ping now
// (answersFresh); when it does, the copies it is guarded for are
// reconciled with it (one it moved on from is dropped) and it is watched
// again.
func (n *Node) holderBack(ctx context.Context, key, holder string) bool {
	id, err := peer.Decode(holder)
	if err != nil || id == n.host.ID() || !n.answersFresh(ctx, id) {
		return false
	}
	n.log.Info("not re-routing: the silent holder answers again", "key", key, "peer", rpc.ShortID(id))
	n.reconcileHolder(ctx, id)
	n.watchHolder(id)
	return true
}

// answersFresh reports whether id answers a ping, asking once more on a
// fresh connection when the one it has does not answer: a connection a
// cut left behind can stay mute for seconds after the heal (TCP's
// retransmission backoff, libp2p's dial backoff) while a new dial gets
// through at once.
//
// Concurrent checks of one peer share one answer (n.freshChecks): each
// check's redial closes all of the peer's connections, the one another
// check has just dialled included. Without the sharing, two re-route
// checks of one step running at once on a flapping link could disagree:
// one finds the holder answering, the other reads it as gone two
// milliseconds later and re-routes a step that had moved on, and an
// at-most-once step runs twice.
// The shared check runs on the node's context, so one caller giving up
// does not answer "gone" to the others.
func (n *Node) answersFresh(ctx context.Context, id peer.ID) bool {
	return n.answersFreshSince(ctx, id, time.Time{})
}

// freshAnswer is the answer of one shared answersFresh check and when it
// began.
type freshAnswer struct {
	ok    bool
	began time.Time
}

// answersFreshSince is answersFresh by a check that began at since or
// later: a shared check that began before and found id silent (it may
// have run while this peer was cut off) is waited for, and id asked again.
func (n *Node) answersFreshSince(ctx context.Context, id peer.ID, since time.Time) bool {
	for {
		ch := n.freshChecks.DoChan(string(id), func() (any, error) {
			began := n.clock.Now()
			return freshAnswer{ok: n.answersFreshOnce(n.ctx, id), began: began}, nil
		})
		select {
		case <-ctx.Done():
			return false
		case r := <-ch:
			a := r.Val.(freshAnswer)
			if a.ok || !a.began.Before(since) {
				return a.ok
			}
		}
	}
}

func (n *Node) answersFreshOnce(ctx context.Context, id peer.ID) bool {
	if n.pingable(ctx, id) {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	n.redial(id)
	// A dial and its handshakes besides the round trip: more time.
	pctx, cancel := context.WithTimeout(ctx, freshPingTimeout)
	defer cancel()
	_, err := rpc.Ping(pctx, n.host, id)
	return err == nil
}

// freshPingTimeout bounds answersFresh's ping on a new connection (dial,
// security and muxer handshakes, then the round trip) on a loaded board.
const freshPingTimeout = 3 * time.Second

// coGuardianAnswer is what askCoGuardians found.
type coGuardianAnswer struct {
	movedOn bool // a co-guardian was released at c's attempt or later
	reached bool // a co-guardian answered
	asked   int  // co-guardians asked
	holdOff
	// primaryGuards: c stood in for its primary (G3), and the primary
	// answered with a live copy of the same holder's attempt (G19).
	primaryGuards bool
}

// askCoGuardians asks the other guardians named in c (its backups, or
// the primary of a backup copy) what they know of key: moved on when one
// was released at c's attempt or later (by a successor named with its
// work, only once that successor says it took it, or does not say it
// never did: node/guard G17); reached when one answered; how many it
// asked. One that does not answer gets a fresh connection for the next
// round.
//
// A named successor that does not answer leaves the question open
// (successorUnsure), not moved on: otherwise a slow successor (under the
// race detector, say) would make a primary drop its copy of a step that
// successor had refused, and the backup would then follow the primary's
// "released" (G17). The caller asks again next round.
func (n *Node) askCoGuardians(ctx context.Context, key string, c *guard.Record) coGuardianAnswer {
	peers := coGuardiansOf(c, n.selfID)
	// Rerouting: a copy there answers the holder's releases of this
	// attempt Pending for a while (G13), so that a release between this
	// question and the re-route's notice (G7) cannot start a second chain.
	q := api.GuardStatus{Key: key, Rerouting: true, Holder: c.Holder.ID, Attempt: c.Attempt}
	replies, errs := n.guardCallAll(ctx, peers, func(pack.Peer) api.GuardRequest { return q }, settleCallTimeout)
	a := coGuardianAnswer{asked: len(peers)}
	// Released by a named successor at this very attempt: moved on only if
	// that successor does not say it never took the work (node/guard G17).
	var successors []pack.Peer
	took := map[string]string{}
	for i, rep := range replies {
		if errs[i] != nil {
			n.freshConn(ctx, peers[i])
			continue
		}
		a.reached = true
		a.recording = a.recording || rep.Recording
		a.rerouting = a.rerouting || rep.Rerouting
		switch {
		case rep.Known && !rep.Released && rep.Attempt > c.Attempt:
			// A live copy of a later attempt: the step was re-routed past
			// c's (its notice, G7, did not reach this copy).
			a.movedOn = true
		case c.StoodIn && peers[i].ID == c.Primary.ID && rep.Known && !rep.Released &&
			rep.Attempt == c.Attempt && rep.Holder.ID == c.Holder.ID:
			a.primaryGuards = true
		case !rep.Known || !rep.Released || rep.Attempt < c.Attempt:
		case rep.Attempt == c.Attempt && rep.Holder.ID != "" && rep.TookKey != "":
			if _, ok := took[rep.Holder.ID]; !ok {
				successors = append(successors, rep.Holder)
				took[rep.Holder.ID] = rep.TookKey
			}
		default:
			a.movedOn = true
		}
	}
	if !a.movedOn && len(successors) > 0 {
		switch n.askSuccessors(ctx, key, successors, took) {
		case held.SuccessorNeverTook:
			n.log.Info("co-guardians were released by successors that never took the work", "key", key, "successors", len(successors))
		case held.SuccessorTook:
			a.movedOn = true
		default:
			a.successorUnsure = true
		}
	}
	return a
}

// cutOff reports whether this peer seems cut off from the mesh: it knows
// of other nodes (besides the silent one) and none of up to five it pings
// at once, live ones in presence first, answers. A peer that knows of
// nobody cannot tell and says no.
func (n *Node) cutOff(ctx context.Context, silent string) bool {
	seen := map[peer.ID]bool{n.host.ID(): true}
	if id, err := peer.Decode(silent); err == nil {
		seen[id] = true
	}
	var live, known []peer.ID
	for _, lp := range n.pres.live() {
		if !seen[lp.id] {
			seen[lp.id] = true
			live = append(live, lp.id)
		}
	}
	for _, id := range n.host.Peerstore().PeersWithAddrs() {
		if seen[id] {
			continue
		}
		seen[id] = true
		// Mesh nodes only: a client (a laptop, the testnet harness) that
		// still reaches this peer says nothing about the mesh.
		if n.speaks(id, api.ProtoHandoff) {
			known = append(known, id)
		}
	}
	shuffle := func(ids []peer.ID) { n.rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] }) }
	shuffle(live)
	shuffle(known)
	try := append(live, known...)
	if len(try) == 0 {
		return false
	}
	try = try[:min(len(try), 5)]
	if anyAtOnce(try, func(id peer.ID) bool { return n.pingable(ctx, id) }) {
		return false
	}
	n.cutOffAt.Store(n.clock.Now().UnixNano())
	return true
}

// pingable reports whether id answers a libp2p ping within a second.
func (n *Node) pingable(ctx context.Context, id peer.ID) bool {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := rpc.Ping(pctx, n.host, id)
	return err == nil
}

// anyPingable reports whether any of peers (this one aside) answers a
// ping, all asked at once.
func (n *Node) anyPingable(ctx context.Context, peers []pack.Peer) bool {
	var others []pack.Peer
	for _, p := range peers {
		if id, err := peer.Decode(p.ID); err == nil && id != n.host.ID() {
			others = append(others, p)
		}
	}
	return anyAtOnce(others, func(p pack.Peer) bool {
		id, _ := peer.Decode(p.ID)
		n.learnAddrs(id, p.Addrs)
		return n.pingable(ctx, id)
	})
}

// stepGuardLogged steps a guard where no caller can be told of a failure.
func (n *Node) stepGuardLogged(key string, ev guard.Event) {
	if _, err := n.stepGuard(key, ev); err != nil {
		n.log.Error("step guard", "event", fmt.Sprintf("%T", ev), "err", err)
	}
}

// workflowEnded asks p's origins whether the workflow has ended: a guardian
// never re-runs work of a finished workflow (I1). No answer means no.
func (n *Node) workflowEnded(ctx context.Context, p *pack.Pack) bool {
	ended, _ := n.workflowEndedReached(ctx, p)
	return ended
}

// workflowEndedReached is workflowEnded, and whether any origin other
// than this peer answered.
func (n *Node) workflowEndedReached(ctx context.Context, p *pack.Pack) (ended, reached bool) {
	replies, errs := n.guardCallAll(ctx, p.Origin, func(pack.Peer) api.GuardRequest { return api.OriginStatus{Key: p.WorkflowID} }, settleCallTimeout)
	self := n.selfID
	for i := range replies {
		if errs[i] == nil && p.Origin[i].ID != self {
			reached = true // this peer's own answer says nothing of a cut
		}
	}
	for _, rep := range replies {
		if rep.OK && rep.Known {
			return rep.Released, reached
		}
	}
	return false, reached
}

// branchEnded asks the copies of the join p's branch ends at (its
// innermost frame) whether nothing of that branch is left to run: its end
// was recorded, or the pattern decided without it (join.BranchEnded). A
// join records a branch end before it releases the guardians of the
// branch's last step; a holder killed in between, with the join's release
// lost or late past guard.RecordingHold (G18), would leave that step to
// be run again. No answer, or a pack outside
// any pattern, says no.
func (n *Node) branchEnded(ctx context.Context, p *pack.Pack) bool {
	if len(p.Frames) == 0 {
		return false
	}
	f := p.Frames[len(p.Frames)-1]
	return anyAtOnce(f.Holders, func(h pack.Peer) bool {
		rep, err := n.guardCallErr(ctx, h, api.JoinStatus{Key: f.JoinID, Branch: f.Branch, AskBranch: true}, settleCallTimeout)
		return err == nil && rep.Known && rep.Released
	})
}

// redispatch re-routes a guarded pack whose head is not a service: only
// the origin's first pack, held before its first hand-off, can start with
// a FORK, FIRST, FAILOVER or CHOICE. There is no step to hand to another
// peer, so this guardian (the origin's replica) claims the copy and
// dispatches the pack itself with attempt+1, as the silent origin would
// have; the claim tells the old holder it was superseded.
func (n *Node) redispatch(ctx context.Context, key string, p *pack.Pack, o guard.Order) {
	rd, err := n.stepGuard(key, guard.ClaimDispatch{Holder: o.Holder.ID, Attempt: o.Attempt, At: n.clock.Now().UTC()})
	if err != nil || !rd.Claimed {
		return // re-routed, released or claimed already
	}
	p.Attempt = o.Attempt + 1
	n.log.Warn("re-routing", "key", key, "step", "(dispatch)", "attempt", p.Attempt, "silent", rpc.ShortIDString(o.Holder.ID))
	n.ev.Emit(events.Event{Type: events.Reroute, Workflow: p.WorkflowID, Attempt: p.Attempt, Peer: o.Holder.ID, Reason: "origin silent before its first hand-off"})
	_ = n.dispatch(ctx, p) // a superseded re-dispatch ends here
}

// guardDecoders decodes the request of each reliability protocol (one
// typed request per protocol ID, package node/api).
var guardDecoders = map[string]func([]byte) (api.GuardRequest, error){
	api.ProtoGuardStore:        decodeGuard[api.GuardStore],
	api.ProtoGuardRelease:      decodeGuard[api.GuardRelease],
	api.ProtoGuardStoreRelease: decodeGuard[api.GuardStoreRelease],
	api.ProtoGuardStatus:       decodeGuard[api.GuardStatus],
	api.ProtoGuardOwner:        decodeGuard[api.GuardOwner],
	api.ProtoGuardHandback:     decodeGuard[api.GuardHandback],
	api.ProtoGuardWithdraw:     decodeGuard[api.GuardWithdraw],
	api.ProtoHeldSuperseded:    decodeGuard[api.HeldSuperseded],
	api.ProtoHeldAddWatcher:    decodeGuard[api.HeldAddWatcher],
	api.ProtoHeldTook:          decodeGuard[api.HeldTook],
	api.ProtoJoinReplica:       decodeGuard[api.JoinReplica],
	api.ProtoJoinUpdate:        decodeGuard[api.JoinUpdate],
	api.ProtoJoinForwarded:     decodeGuard[api.JoinForwarded],
	api.ProtoJoinStatus:        decodeGuard[api.JoinStatus],
	api.ProtoJoinHandover:      decodeGuard[api.JoinHandover],
	api.ProtoJoinActor:         decodeGuard[api.JoinActor],
	api.ProtoJoinBranch:        decodeGuard[api.JoinBranch],
	api.ProtoOriginReplica:     decodeGuard[api.OriginReplica],
	api.ProtoOriginDone:        decodeGuard[api.OriginDone],
	api.ProtoOriginStatus:      decodeGuard[api.OriginStatus],
	api.ProtoOriginStash:       decodeGuard[api.OriginStash],
}

func decodeGuard[T api.GuardRequest](raw []byte) (api.GuardRequest, error) {
	var m T
	err := rpc.Dec.Unmarshal(raw, &m)
	return m, err
}

// serveGuard registers one handler per reliability protocol.
func (n *Node) serveGuard() {
	for proto, decode := range guardDecoders {
		n.calls.Serve(proto, api.MaxControlFrame, n.cfg.StreamTimeout, func(_ context.Context, from peer.ID, req []byte) []byte {
			m, err := decode(req)
			if err != nil {
				return rpc.MustCBOR(api.GuardReply{Error: fmt.Sprintf("bad %s request: %v", proto, err)})
			}
			return rpc.MustCBOR(n.guardOp(from, m))
		})
	}
}

// stepGuardReply steps key's guard for a request and returns the answer.
func (n *Node) stepGuardReply(key string, ev guard.Event) api.GuardReply {
	rd, err := n.stepGuard(key, ev)
	if err != nil {
		return api.GuardReply{Error: err.Error()}
	}
	return guardReply(rd.Reply)
}

// storeEvent is the guard event of a store request.
func (n *Node) storeEvent(m api.GuardStore) (guard.Store, error) {
	// The holder decoded and validated these bytes when it took them; a
	// copy is read in full only if it is re-sent (reroute), so the
	// structural check is enough here (a full decode was most of a
	// backup's CPU per hop, docs/benchmarks.md).
	if err := pack.Check(m.Pack, n.limits); err != nil {
		return guard.Store{}, fmt.Errorf("bad pack: %w", err)
	}
	role := guard.RoleBackup
	if m.Primary.ID == "" || m.Primary.ID == n.selfID {
		role = guard.RolePrimary
	}
	return guard.Store{Pack: m.Pack, Holder: m.Holder, Attempt: m.Attempt, Role: role, Primary: m.Primary, At: n.clock.Now().UTC()}, nil
}

// storeAndRelease serves a store and a release sent together
// (api.GuardStoreRelease): both machines step and are written in one
// commit. The copy is kept whatever the release is answered, as if its
// store had come first on its own; the answer is the release's.
func (n *Node) storeAndRelease(from peer.ID, m api.GuardStoreRelease) api.GuardReply {
	if m.Release.Probe {
		return api.GuardReply{Error: "a release sent with a store cannot be a probe"}
	}
	store, err := n.storeEvent(m.Store)
	if err != nil {
		return api.GuardReply{Error: err.Error()}
	}
	r := m.Release
	_, rd, err := n.stepGuardsTogether(m.Store.Key, store, r.Key, guard.Release{Attempt: r.Attempt, At: store.At, Rerouted: r.Rerouted, Rerouter: r.Rerouter, By: r.By, ByKey: r.ByKey, Yield: r.Yield})
	if err != nil {
		return api.GuardReply{Error: err.Error()}
	}
	rep := guardReply(rd.Reply)
	n.log.Debug("guard store and release", "store", m.Store.Key, "key", r.Key, "attempt", r.Attempt, "by", rpc.ShortIDString(r.By),
		"from", rpc.ShortID(from), "superseded", rep.Superseded, "pending", rep.Pending, "taken_by", rpc.ShortIDString(rep.Holder.ID))
	return rep
}

// guardOp serves one reliability request (from a peer, or from this one
// when it is its own guardian, join copy or origin).
func (n *Node) guardOp(from peer.ID, req api.GuardRequest) api.GuardReply {
	switch m := req.(type) {
	case api.GuardStore:
		ev, err := n.storeEvent(m)
		if err != nil {
			return api.GuardReply{Error: err.Error()}
		}
		return n.stepGuardReply(m.Key, ev)
	case api.GuardStoreRelease:
		return n.storeAndRelease(from, m)
	case api.GuardRelease:
		if m.Probe {
			return n.stepGuardReply(m.Key, guard.Release{Attempt: m.Attempt, Probe: true, By: m.By, Recording: m.Recording, At: n.clock.Now().UTC()})
		}
		return n.releaseGuard(m)
	case api.GuardWithdraw:
		// The caller withdraws its own copy only (the holder is who asks).
		rep := n.stepGuardReply(m.Key, guard.Withdraw{Holder: from.String(), Attempt: m.Attempt})
		n.log.Debug("guard copy withdrawn", "key", m.Key, "attempt", m.Attempt, "by", rpc.ShortID(from), "err", rep.Error)
		return rep
	case api.GuardStatus:
		if m.Rerouting {
			return n.stepGuardReply(m.Key, guard.Rerouting{From: from.String(), Holder: m.Holder, Attempt: m.Attempt, At: n.clock.Now().UTC()})
		}
		r := n.guards.view(m.Key).Status()
		if m.Holder != "" {
			r = n.guards.view(m.Key).AskedByBackup(m.Holder, m.Attempt, n.clock.Now().UTC())
		}
		rep := guardReply(&r)
		// No copy yet because this peer is handing the step on: the
		// asking backup waits (G15).
		rep.Handing = !r.Known && n.handing.has(m.Key, m.Attempt)
		return rep
	case api.GuardOwner:
		r := n.guards.view(m.Key).Owner(from.String(), m.Attempt)
		return guardReply(&r)
	case api.HeldSuperseded:
		n.supersedeHeld(m.Key, m.Attempt)
		return api.GuardReply{OK: true}
	case api.HeldAddWatcher:
		return n.offerWatcher(m.Key, m.Attempt, m.Watcher)
	case api.HeldTook:
		return n.tookOp(m.Key)
	case api.GuardHandback:
		return n.handbackOp(from, m)
	case api.JoinReplica, api.JoinUpdate, api.JoinForwarded, api.JoinStatus, api.JoinHandover, api.JoinActor, api.JoinBranch:
		return n.joinReplicaOp(from, m)
	case api.OriginReplica, api.OriginDone, api.OriginStatus, api.OriginStash:
		return n.originReplicaOp(from, m)
	}
	return api.GuardReply{Error: fmt.Sprintf("unknown reliability request %T", req)}
}
