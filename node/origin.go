package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Origins, in one paragraph: the peer a workflow is submitted to is its
// origin (the result sink) and keeps k replicas of the record on other
// peers. The rules live in package node/origin (a machine with no I/O and
// no lock); this file carries them out. Each workflow record has its own
// slot and lock, held while an event is stepped and the record written, so
// a failed write refuses the event and changes nothing (I4): the sender
// retries. The committed machine is published through an atomic pointer
// for readers (status, list, activity, guardians asking whether the
// workflow ended), and no journal write happens under Node.mu. Settling a
// completion, telling the replicas and handing a completion back to the
// primary come after the write, outside the lock.

// submitStep stands for the origin's dispatch of the first pack in journal
// and guard keys (no step path is a word).
const submitStep = "submit"

// relayFor bounds how long a completion is re-sent to a replica (tell) or
// to the primary (hand-back) in one run; a hand-back not acknowledged by
// then is sent again after a restart (origin O3), and a primary that
// restarts asks its replicas itself.
const relayFor = 10 * time.Minute

// originSlot holds the machine of one workflow record.
type originSlot struct {
	// mu serialises stepping and the writing of the stepped record.
	mu sync.Mutex
	// cur is the committed machine. It is never changed once stored
	// (step steps a clone), so readers load it without a lock.
	cur atomic.Pointer[origin.Workflow]
	// dead is set (under mu) when the slot left the table with no record;
	// a stepper that finds it set takes a new slot.
	dead bool
}

// originTable is every workflow record this peer holds (as primary origin
// or replica), by workflow ID.
type originTable struct {
	t table[*originSlot]
	// persist writes id's record and its stash's entries to the journal
	// in one write (either may be nil), forget deletes both (seams for
	// tests).
	persist func(id string, rec *origin.Record, stash *origin.StashWrite) error
	forget  func(id string) error
}

func newOriginTable(persist func(id string, rec *origin.Record, stash *origin.StashWrite) error, forget func(id string) error) *originTable {
	return &originTable{t: newTable[*originSlot](), persist: persist, forget: forget}
}

// slot returns id's slot, creating one with no record.
func (t *originTable) slot(id string) *originSlot {
	s, _ := t.t.getOrAdd(id, func() *originSlot {
		s := &originSlot{}
		s.cur.Store(origin.New(id))
		return s
	})
	return s
}

// put installs a loaded machine (at start, before anything steps).
func (t *originTable) put(w *origin.Workflow) {
	s := &originSlot{}
	s.cur.Store(w)
	t.t.set(w.ID(), s)
}

// remove drops s from the table if it is still id's slot.
func (t *originTable) remove(id string, s *originSlot) { t.t.removeIf(id, s) }

// view returns id's committed machine, or nil when this peer holds no
// record of it.
func (t *originTable) view(id string) *origin.Workflow {
	s, ok := t.t.get(id)
	if !ok {
		return nil
	}
	if w := s.cur.Load(); w.Exists() {
		return w
	}
	return nil
}

// all returns the committed machine of every record (a snapshot).
func (t *originTable) all() []*origin.Workflow {
	slots := t.t.values()
	out := make([]*origin.Workflow, 0, len(slots))
	for _, s := range slots {
		if w := s.cur.Load(); w.Exists() {
			out = append(out, w)
		}
	}
	return out
}

// step steps id's machine with ev: a clone is stepped and its record
// written under the slot's lock (outside every shared lock), and kept only
// once written; a failed write refuses the event and changes nothing (I4).
func (t *originTable) step(id string, ev origin.Event) (origin.Ready, error) {
	for {
		s := t.slot(id)
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			continue
		}
		m := s.cur.Load().Clone()
		rd := m.Step(ev)
		if rd.Delete {
			if err := t.forget(id); err != nil {
				s.mu.Unlock()
				return origin.Ready{}, fmt.Errorf("journal: delete workflow %s: %w", id, err)
			}
		}
		if rd.Persist != nil || rd.Stash != nil {
			if err := t.persist(id, rd.Persist, rd.Stash); err != nil {
				if !s.cur.Load().Exists() {
					s.dead = true
					t.remove(id, s)
				}
				s.mu.Unlock()
				return origin.Ready{}, fmt.Errorf("journal workflow %s: %w", id, err)
			}
		}
		s.cur.Store(m)
		if !m.Exists() {
			s.dead = true
			t.remove(id, s)
		}
		s.mu.Unlock()
		return rd, nil
	}
}

// stepMany steps every record of ids with ev (an event that only
// persists, such as origin.Prune) and writes what they say in one journal
// transaction (write); each slot's lock is held from its step to the
// commit (slots are locked in ID order; every other stepper holds one at a
// time), and a failed write changes nothing. It returns how many records
// were written and how many deleted.
func (t *originTable) stepMany(ids []string, ev origin.Event, write func(puts []origin.Record, dels []string) error) (written, deleted int, err error) {
	sort.Strings(ids)
	type item struct {
		id string
		s  *originSlot
		m  *origin.Workflow
	}
	var items []item
	var puts []origin.Record
	var dels []string
	for _, id := range ids {
		s, ok := t.t.get(id)
		if !ok {
			continue
		}
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			continue
		}
		m := s.cur.Load().Clone()
		rd := m.Step(ev)
		switch {
		case rd.Delete:
			dels = append(dels, id)
		case rd.Persist != nil:
			puts = append(puts, *rd.Persist)
		default:
			s.mu.Unlock()
			continue
		}
		items = append(items, item{id, s, m})
	}
	if len(items) > 0 {
		err = write(puts, dels)
	}
	for _, it := range items {
		if err == nil {
			it.s.cur.Store(it.m)
			if !it.m.Exists() {
				it.s.dead = true
				t.remove(it.id, it.s)
			}
		}
		it.s.mu.Unlock()
	}
	if err != nil {
		return 0, 0, err
	}
	return len(puts), len(dels), nil
}

// writeWorkflows writes and deletes workflow records in one transaction
// (a deleted record's stash entries go with it).
func (n *Node) writeWorkflows(puts []origin.Record, dels []string) error {
	return n.journal.Update(func(tx *journal.Tx) error {
		for i := range puts {
			if err := tx.Put(journal.BucketWorkflows, puts[i].Status.ID, rpc.MustCBOR(&puts[i])); err != nil {
				return err
			}
		}
		for _, id := range dels {
			if err := tx.Delete(journal.BucketWorkflows, id); err != nil {
				return err
			}
			if err := dropStash(tx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// saveWorkflow writes a workflow record and what changed in its stash
// (either may be nil) in one transaction.
func (n *Node) saveWorkflow(id string, rec *origin.Record, stash *origin.StashWrite) error {
	return n.journal.Update(func(tx *journal.Tx) error {
		if rec != nil {
			if err := tx.Put(journal.BucketWorkflows, id, rpc.MustCBOR(rec)); err != nil {
				return err
			}
		}
		return writeStash(tx, id, stash)
	})
}

// deleteWorkflow deletes a workflow record and its stash entries.
func (n *Node) deleteWorkflow(id string) error {
	return n.journal.Update(func(tx *journal.Tx) error {
		if err := tx.Delete(journal.BucketWorkflows, id); err != nil {
			return err
		}
		return dropStash(tx, id)
	})
}

// The stash's journal entries (origin O6, journal.BucketStash): one per
// stashed output, ID/o/LABEL@DIGEST holding the output, and one per run of
// trace entries, ID/t/DIGEST holding the run (CBOR). A stash writes only
// what it adds; the workflow's record does not repeat them.
const (
	stashOutput = "/o/"
	stashRun    = "/t/"
)

// writeStash applies sw to id's stash entries in tx.
func writeStash(tx *journal.Tx, id string, sw *origin.StashWrite) error {
	if sw == nil {
		return nil
	}
	if sw.Drop {
		if err := dropStash(tx, id); err != nil {
			return err
		}
	}
	for _, o := range sw.Outputs {
		if err := tx.Put(journal.BucketStash, id+stashOutput+origin.StashKey(o.Label, o.Digest), o.Value); err != nil {
			return err
		}
	}
	for _, r := range sw.Runs {
		if err := tx.Put(journal.BucketStash, id+stashRun+r.Digest, rpc.MustCBOR(r.Entries)); err != nil {
			return err
		}
	}
	return nil
}

// dropStash deletes every stash entry of id in tx.
func dropStash(tx *journal.Tx, id string) error {
	var keys []string
	if err := tx.ForEachPrefix(journal.BucketStash, id+"/", func(key string, _ []byte) error {
		keys = append(keys, key)
		return nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(journal.BucketStash, k); err != nil {
			return err
		}
	}
	return nil
}

// moveStashOut rewrites records written before the stash had entries of
// its own (they held it inside): their stash goes to its entries and the
// record is written without it, in one transaction. A record is then
// written only with what changed, as origin.Ready.Persist never holds a
// stash; left inside, the stash would be lost at the record's next write.
func (n *Node) moveStashOut(recs map[string]*origin.Record) error {
	var ids []string
	for id, rec := range recs {
		if len(rec.Stash) > 0 || len(rec.StashTrace) > 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return n.journal.Update(func(tx *journal.Tx) error {
		for _, id := range ids {
			rec := *recs[id]
			if err := writeStash(tx, id, rec.StashEntries()); err != nil {
				return err
			}
			rec.Stash, rec.StashTrace = nil, nil
			if err := tx.Put(journal.BucketWorkflows, id, rpc.MustCBOR(&rec)); err != nil {
				return err
			}
		}
		return nil
	})
}

// loadStash puts the journal's stash entries back into the records they
// belong to (by workflow ID), before origin.Load.
func (n *Node) loadStash(recs map[string]*origin.Record) error {
	var bad []error
	err := n.journal.ForEach(journal.BucketStash, func(key string, value []byte) error {
		id, rest, ok := strings.Cut(key, "/")
		rec := recs[id]
		switch {
		case !ok || rec == nil:
			bad = append(bad, fmt.Errorf("stash entry %q: no workflow record", key))
		case strings.HasPrefix("/"+rest, stashOutput):
			if rec.Stash == nil {
				rec.Stash = map[string]json.RawMessage{}
			}
			rec.Stash[strings.TrimPrefix("/"+rest, stashOutput)] = value
		case strings.HasPrefix("/"+rest, stashRun):
			var run []pack.TraceEntry
			if err := rpc.Dec.Unmarshal(value, &run); err != nil {
				bad = append(bad, fmt.Errorf("stash entry %q: %w", key, err))
				return nil
			}
			if rec.StashTrace == nil {
				rec.StashTrace = map[string][]pack.TraceEntry{}
			}
			rec.StashTrace[strings.TrimPrefix("/"+rest, stashRun)] = run
		default:
			bad = append(bad, fmt.Errorf("stash entry %q: unknown kind", key))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(bad...)
}

// stepOrigin steps id's record with ev and starts what follows the write
// (telling replicas, handing back, events, cancellation). A refusal by the
// machine (no record here, wrong copy) is returned as an error too. The
// caller settles rd.Settle and answers.
func (n *Node) stepOrigin(id string, ev origin.Event) (origin.Ready, error) {
	rd, err := n.origins.step(id, ev)
	if err != nil {
		n.log.Error("step workflow record", "workflow", id, "event", fmt.Sprintf("%T", ev), "err", err)
		return rd, err
	}
	n.applyOrigin(id, rd)
	if rd.Reply != nil && rd.Reply.Error != "" {
		return rd, errors.New(rd.Reply.Error)
	}
	return rd, nil
}

// applyOrigin carries out the part of rd that follows the write.
func (n *Node) applyOrigin(id string, rd origin.Ready) {
	if e := rd.Emit; e != nil {
		n.ev.Emit(events.Event{Type: events.Completed, Workflow: id, After: e.After, Stale: e.Stale})
		if e.Ended {
			n.progress.drop(id)
			n.log.Info("workflow finished", "workflow", id, "state", e.State.String(), "error", e.Error)
		}
		if len(e.Missing) > 0 {
			n.log.Error("the result lacks stashed outputs this copy never stored", "workflow", id, "labels", e.Missing)
		}
	}
	if tl := rd.TellReplicas; tl != nil {
		for _, r := range tl.Peers {
			msg := api.OriginDone{Key: id, Completion: tl.Completion}
			n.spawn(func(ctx context.Context) { n.relayCompletion(ctx, r, msg) })
		}
	}
	if hb := rd.HandBack; hb != nil {
		msg := api.OriginDone{Key: id, Completion: hb.Completion}
		n.spawn(func(ctx context.Context) {
			if n.relayCompletion(ctx, hb.Primary, msg) {
				if _, err := n.stepOrigin(id, origin.HandBackAcked{}); err != nil {
					n.log.Warn("record the hand-back", "workflow", id, "err", err)
				}
			}
		})
	}
	if rd.BroadcastCancel {
		n.publishCancel(cancelMsg{WorkflowID: id})
	}
	if len(rd.AskReplicas) > 0 {
		n.spawn(func(ctx context.Context) { n.syncOrigin(ctx, id, rd.AskReplicas) })
	}
	if rd.Persist != nil {
		n.touchActivity()
	}
}

// relayCompletion sends a completion to another copy of the record until
// it acknowledges (true) or relayFor has passed or the node stops.
func (n *Node) relayCompletion(ctx context.Context, to pack.Peer, msg api.OriginDone) bool {
	ctx, cancel := context.WithTimeout(ctx, relayFor)
	defer cancel()
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		rep := n.callGuard(ctx, to, msg)
		if rep.OK {
			return true
		}
		n.log.Debug("completion not taken yet; will retry", "workflow", msg.Key, "peer", rpc.ShortIDString(to.ID), "err", rep.Error, "in", wait)
		select {
		case <-ctx.Done():
			return false
		case <-n.clock.After(wait):
		}
	}
}

// syncOrigin asks the replicas of a running workflow, in turn, whether it
// ended while this origin was down, and adopts the completion one knows.
func (n *Node) syncOrigin(ctx context.Context, id string, replicas []pack.Peer) {
	for _, r := range replicas {
		if w := n.origins.view(id); w == nil || !w.Running() || ctx.Err() != nil {
			return
		}
		rep := n.callGuard(ctx, r, api.OriginStatus{Key: id})
		if rep.OK && rep.Origin != nil {
			n.log.Info("workflow finished while this origin was down", "workflow", id, "replica", rpc.ShortIDString(r.ID))
			if _, err := n.stepOrigin(id, origin.SyncAnswer{From: r.ID, Msg: rep.Origin, At: n.clock.Now().UTC()}); err == nil {
				return
			}
		}
	}
}

func fullAddrs(p pack.Peer) []string {
	var out []string
	for _, a := range p.Addrs {
		out = append(out, a+"/p2p/"+p.ID)
	}
	return out
}

// Submit parses and checks source, records this peer as the workflow's
// origin, and starts it. The returned status carries the new workflow ID.
func (n *Node) Submit(fileName, source string, input json.RawMessage) (api.Status, error) {
	w, err := grammar.Parse(fileName, []byte(source))
	if err != nil {
		return api.Status{}, err
	}
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if !json.Valid(input) {
		return api.Status{}, fmt.Errorf("the workflow input is not valid JSON")
	}
	// Accepted durably or refused (capacity.go): beyond MaxWorkflows
	// running workflows the submission is refused, nothing recorded.
	admitted, err := n.admitWorkflow()
	if err != nil {
		return api.Status{}, err
	}
	defer admitted()
	grammar.AssignPaths(w)
	services, _, _ := grammar.Stats(w)
	id := newID("wf")
	self := n.self()
	sub := origin.Submitted{Source: source, StepsTotal: services, Origin: self.ID, At: n.clock.Now().UTC()}
	// k replicas of the record (each also a guardian of the first pack),
	// one zone each where possible: losing the origin and one replica
	// loses neither the workflow nor its result (I3). Only those that
	// stored the record are named in the pack and the record.
	picked := n.pickReplicas(n.cfg.JoinReplicas, map[peer.ID]bool{n.host.ID(): true})
	draft := origin.New(id)
	draft.Step(sub)
	replicaRec := rpc.MustCBOR(draft.ReplicaCopy(self))
	// All at once and within replicateTimeout, well inside the client's
	// stream timeout: a replica cut off from this peer must not make the
	// submission time out (a replica that stored the record but whose
	// answer was lost asks this peer later whether it ended: origin O3).
	replies, errs := n.guardCallAll(n.ctx, picked, func(pack.Peer) api.GuardRequest {
		return api.OriginReplica{Key: id, Record: replicaRec}
	}, replicateTimeout)
	var stored []pack.Peer
	for i, ref := range picked {
		if errs[i] != nil || !replies[i].OK {
			why := replies[i].Error
			if errs[i] != nil {
				why = errs[i].Error()
			}
			n.log.Warn("origin replica refused", "peer", rpc.ShortIDString(ref.ID), "err", why)
			continue
		}
		stored = append(stored, ref)
	}
	sub.Replicas = stored
	sub.Origins = fullAddrs(self)
	for _, ref := range stored {
		sub.Origins = append(sub.Origins, fullAddrs(ref)...)
	}
	p := &pack.Pack{
		WorkflowID: id,
		Origin:     append([]pack.Peer{self}, stored...),
		Workflow:   w,
		Input:      input,
		Outputs:    map[string]json.RawMessage{},
	}
	raw, err := pack.Encode(p)
	if err != nil {
		return api.Status{}, fmt.Errorf("encode the first pack: %w", err)
	}
	// The first replica is the first pack's primary guardian, the others
	// its backups. All at once and within replicateTimeout too: one after
	// the other, each within the stream timeout, a replica cut off after
	// it stored the record would hold the client's answer past its
	// deadline. A backup whose primary kept no
	// copy finds it knowing nothing and stands in (node/guard G3).
	st := &held.Record{Pack: p, DispatchOnly: true, Key: journal.PackKey(id, submitStep, 0), GuardKey: journal.StepKey(id, submitStep)}
	guarded, guardErrs := n.guardCallAll(n.ctx, stored, func(ref pack.Peer) api.GuardRequest {
		store := api.GuardStore{Key: st.GuardKey, Pack: raw, Holder: self}
		if ref.ID != stored[0].ID {
			store.Primary = stored[0]
		}
		return store
	}, replicateTimeout)
	for i, ref := range stored {
		switch {
		case guardErrs[i] == nil && guarded[i].OK:
			st.Guardians = append(st.Guardians, ref)
		case guardErrs[i] != nil:
			// No answer: it may keep a copy all the same, so it stays
			// named and the first receiver's release goes to it too
			// (as recruitHolderBackup does).
			st.Guardians = append(st.Guardians, ref)
			n.log.Warn("origin replica did not answer the first pack's guard copy; kept as its guardian", "peer", rpc.ShortIDString(ref.ID), "err", guardErrs[i])
		default:
			n.log.Warn("origin replica refused the first pack's guard copy", "peer", rpc.ShortIDString(ref.ID), "err", guarded[i].Error)
		}
	}
	rd, err := n.stepOrigin(id, sub)
	if err != nil {
		return api.Status{}, fmt.Errorf("record workflow: %w", err)
	}
	if err := n.hold(*st); err != nil {
		return api.Status{}, fmt.Errorf("journal workflow: %w", err)
	}
	n.log.Info("workflow submitted", "workflow", id, "services", services, "replicas", len(stored), "took", n.clock.Since(sub.At).Round(time.Millisecond))
	return *rd.Reply.Status, nil
}

func (n *Node) handleOrigin(_ context.Context, _ peer.ID, req []byte) []byte {
	var msg api.OriginMsg
	if err := rpc.Dec.Unmarshal(req, &msg); err != nil {
		return rpc.AckBytes(api.CodeBadPack, "bad origin message: "+err.Error())
	}
	if err := n.completeHere(msg); err != nil {
		code := api.CodeInternal
		if errors.Is(err, errSuperseded) {
			code = api.CodeSuperseded
		}
		if errors.Is(err, errUnsettled) {
			code = api.CodeUnsettled
		}
		return rpc.AckBytes(code, fmt.Sprintf("peer %s: %v", rpc.ShortID(n.host.ID()), err))
	}
	return rpc.AckBytes("", "")
}

// completeHere applies a progress event or a completion to this peer's
// record of the workflow (primary or replica). A completion is answered
// only once its record is written (origin O2) and the items its last
// holder listed are settled: the origin releases that holder's guardians,
// so they never re-run a finished workflow (I1).
//
// When the settle does not finish (the node is stopping: nothing was
// settled) the completion stays recorded — it is the result — but the
// error is returned, so the sender sends it again; the repeat is stale for
// the record (O1) and settles again, which is harmless: a guardian answers
// a second release of the same attempt OK, a join copy a second
// continuation of the same actor. A settle answered "superseded" (a
// guardian re-routed the last step: the completion came from a superseded
// chain) is not refused: the answer would not change on a retry. The
// record keeps the first completion all the same (O1), as joins keep a
// superseded chain's branch end, and the event is recorded.
func (n *Node) completeHere(msg api.OriginMsg) error {
	if !msg.Done {
		if msg.Event == nil {
			return nil
		}
		_, err := n.stepOrigin(msg.WorkflowID, origin.Progress{Entry: *msg.Event})
		if w := n.origins.view(msg.WorkflowID); err == nil && w != nil && w.Running() && w.Role() == origin.RolePrimary {
			n.progress.add(msg.WorkflowID, *msg.Event)
		}
		return err
	}
	// A completion of a chain a guardian re-routed away from is refused
	// before it is recorded (I1); the re-routed chain completes instead.
	if err := n.probeSettle(n.ctx, msg.Settle); errors.Is(err, errUnsettled) {
		return fmt.Errorf("workflow %s: completion not recorded: %w", msg.WorkflowID, err)
	} else if err != nil && !errors.Is(err, errSuperseded) {
		return fmt.Errorf("workflow %s: completion not recorded: %w", msg.WorkflowID, err)
	} else if err != nil {
		n.ev.Emit(events.Event{Type: events.Superseded, Workflow: msg.WorkflowID, Reason: "completion of a superseded chain refused"})
		return fmt.Errorf("workflow %s: the completion comes from a chain a guardian re-routed: %w", msg.WorkflowID, err)
	}
	n.stallAfterProbe.stall(lastOK(msg.Trace).Service, n.cfg.DataDir, n.log)
	rd, err := n.stepOrigin(msg.WorkflowID, origin.Completed{Msg: msg, At: n.clock.Now().UTC()})
	if err != nil {
		return err
	}
	switch err := n.settle(n.ctx, 0, rd.Settle, successor{}); {
	case errors.Is(err, errUnsettled):
		// Recorded: the release goes on in the background until the
		// guardians answer (or count as gone).
		n.spawn(func(ctx context.Context) { n.settleUntil(ctx, 0, rd.Settle) })
	case errors.Is(err, errSuperseded):
		n.ev.Emit(events.Event{Type: events.Superseded, Workflow: msg.WorkflowID, Reason: "completion of a superseded chain"})
	case err != nil:
		return fmt.Errorf("completion of %s recorded, but settling its last holder's guardians did not finish (send it again): %w", msg.WorkflowID, err)
	}
	return nil
}

// originReplicaOp serves the operations between copies of a workflow
// record: store a replica, a completion told by the primary or handed
// back by a replica, and whether the workflow ended (guardians and
// restarted primaries ask).
func (n *Node) originReplicaOp(from peer.ID, req api.GuardRequest) api.GuardReply {
	switch m := req.(type) {
	case api.OriginReplica:
		var rec origin.Record
		if err := rpc.Dec.Unmarshal(m.Record, &rec); err != nil {
			return api.GuardReply{Error: "bad workflow record: " + err.Error()}
		}
		if _, err := n.stepOrigin(rec.Status.ID, origin.ReplicaStored{Record: rec}); err != nil {
			return api.GuardReply{Error: err.Error()}
		}
		return api.GuardReply{OK: true}
	case api.OriginDone:
		w := n.origins.view(m.Key)
		if w == nil {
			return api.GuardReply{Error: "no replica of workflow " + m.Key}
		}
		var ev origin.Event = origin.CompletionFromPrimary{Msg: m.Completion, At: n.clock.Now().UTC()}
		if w.Role() == origin.RolePrimary {
			ev = origin.CompletionFromReplica{Msg: m.Completion, From: from.String(), At: n.clock.Now().UTC()}
		}
		if _, err := n.stepOrigin(m.Key, ev); err != nil {
			return api.GuardReply{Error: err.Error()}
		}
		return api.GuardReply{OK: true}
	case api.OriginStash:
		if _, err := n.stepOrigin(m.Key, origin.Stashed{Outputs: m.Outputs, Trace: m.Trace}); err != nil {
			return api.GuardReply{Error: err.Error()}
		}
		return api.GuardReply{OK: true}
	case api.OriginStatus:
		w := n.origins.view(m.Key)
		if w == nil {
			return api.GuardReply{OK: true}
		}
		ended, done := w.Ended()
		return api.GuardReply{OK: true, Known: true, Released: ended, Origin: done}
	}
	return api.GuardReply{Error: fmt.Sprintf("unknown origin request %T", req)}
}

func (n *Node) handleClient(_ context.Context, from peer.ID, req []byte) []byte {
	var r api.ClientRequest
	if err := rpc.Dec.Unmarshal(req, &r); err != nil {
		return rpc.MustCBOR(api.ClientResponse{Error: "bad request: " + err.Error()})
	}
	if err := n.authorizeClient(from, r.Op); errors.Is(err, errBusy) {
		return rpc.MustCBOR(api.ClientResponse{Error: err.Error(), Code: api.CodeBusy})
	} else if err != nil {
		return rpc.MustCBOR(api.ClientResponse{Error: err.Error()})
	}
	began := n.clock.Now()
	resp := n.client(r)
	if took := n.clock.Since(began); took > n.cfg.StreamTimeout/2 {
		// Past the stream timeout the client gets a reset stream instead.
		n.log.Warn("slow client request", "op", r.Op, "took", took.Round(time.Millisecond), "stream_timeout", n.cfg.StreamTimeout)
	}
	return rpc.MustCBOR(resp)
}

func (n *Node) client(r api.ClientRequest) api.ClientResponse {
	switch r.Op {
	case api.OpSubmit:
		st, err := n.Submit(r.FileName, r.Source, r.Input)
		if errors.Is(err, errBusy) {
			return api.ClientResponse{Error: err.Error(), Code: api.CodeBusy}
		}
		if err != nil {
			return api.ClientResponse{Error: err.Error()}
		}
		return api.ClientResponse{Status: &st}
	case api.OpStatus, api.OpResult:
		w := n.origins.view(r.ID)
		if w == nil {
			return api.ClientResponse{Error: fmt.Sprintf("peer %s is not the origin of workflow %q (ask the peer it was submitted to)", rpc.ShortID(n.host.ID()), r.ID)}
		}
		st := w.Status(r.Op == api.OpResult)
		return api.ClientResponse{Status: &st}
	case api.OpCancel:
		if n.origins.view(r.ID) == nil {
			return api.ClientResponse{Error: fmt.Sprintf("peer %s is not the origin of workflow %q", rpc.ShortID(n.host.ID()), r.ID)}
		}
		// The cancel is answered (and broadcast) only once written.
		rd, err := n.stepOrigin(r.ID, origin.Cancelled{At: n.clock.Now().UTC()})
		if err != nil {
			return api.ClientResponse{Error: fmt.Sprintf("cancel workflow %s: %v", r.ID, err)}
		}
		return api.ClientResponse{Status: rd.Reply.Status}
	case api.OpPeers:
		return api.ClientResponse{Peers: n.pres.infos(), Refused: n.gate.Refused()}
	case api.OpPublishSchedule, api.OpSchedule:
		return n.clientSchedule(r)
	case api.OpList:
		var out []api.Status
		for _, w := range n.origins.all() {
			out = append(out, w.Summary())
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Submitted.Before(out[j].Submitted) })
		return api.ClientResponse{Statuses: out}
	}
	return api.ClientResponse{Error: fmt.Sprintf("unknown operation %q", r.Op)}
}

// resumeOrigins starts what the loaded workflow records say (origin
// Resume): a running primary asks its replicas whether the workflow ended
// while it was down, a replica hands back a completion the primary had
// not acknowledged.
//
// The running primaries ask one after the other, now and once more after
// RestartGrace (the replicas may be rebooting too), in one background
// task: a board with many records does not dial every replica at once.
func (n *Node) resumeOrigins() {
	var ask []*origin.Workflow
	for _, w := range n.origins.all() {
		rd := w.Resume()
		if len(rd.AskReplicas) > 0 {
			ask = append(ask, w)
			rd.AskReplicas = nil
		}
		n.applyOrigin(w.ID(), rd)
	}
	if len(ask) == 0 {
		return
	}
	n.spawn(func(ctx context.Context) {
		for round := range 2 {
			if round > 0 {
				select {
				case <-ctx.Done():
					return
				case <-n.clock.After(n.cfg.RestartGrace):
				}
			}
			for _, w := range ask {
				n.syncOrigin(ctx, w.ID(), w.Replicas())
			}
		}
	})
}
