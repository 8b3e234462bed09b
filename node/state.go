package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
	"github.com/libp2p/go-libp2p/core/peer"
)

// heldState is what the journal keeps for a pack this peer accepted: the
// pack as received and, once the step ran, its outcome. A restarted peer
// forwards an executed step's result instead of running it again.
type heldState struct {
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
	DispatchOnly bool   `cbor:"9,keyasint,omitempty"`
	Key          string `cbor:"10,keyasint,omitempty"`
	GuardKey     string `cbor:"11,keyasint,omitempty"`
	// packSaved is set once PackRaw is in the journal.
	packSaved bool
}

// journalPacks is the journal bucket of held work.
const journalPacks = journal.BucketPacks

// advanced is the pack after the head step: on success the step is consumed
// and its output recorded; on failure the workflow is left as it was.
func (st *heldState) advanced() *pack.Pack {
	next := st.Pack.Clone()
	if st.DispatchOnly {
		return next
	}
	next.Trace = append(next.Trace, st.Trace...)
	if !st.OK {
		return next
	}
	head, err := next.Head()
	if err != nil {
		return next // nothing ran: only a dispatch-only pack has no service head
	}
	if next.Outputs == nil {
		next.Outputs = map[string]json.RawMessage{}
	}
	next.Outputs[head.Label()] = st.Output
	next.Workflow = &grammar.Workflow{Steps: next.Workflow.Steps[1:]}
	return next
}

// saveHeld journals held work. The pack itself (which grows along a
// workflow) is written once, to BucketPackBytes, in the same transaction
// as the first state record; later saves rewrite only the small state
// record in BucketPacks.
func (n *Node) saveHeld(key string, st *heldState) error {
	small := *st
	small.PackRaw = nil
	state := rpc.MustCBOR(&small)
	if st.packSaved {
		return n.journal.Put(journal.BucketPacks, key, state)
	}
	if st.PackRaw == nil {
		raw, err := pack.Encode(st.Pack)
		if err != nil {
			return fmt.Errorf("encode pack: %w", err)
		}
		st.PackRaw = raw
	}
	err := n.journal.Update(func(tx *journal.Tx) error {
		if err := tx.Put(journal.BucketPackBytes, key, st.PackRaw); err != nil {
			return err
		}
		return tx.Put(journal.BucketPacks, key, state)
	})
	if err == nil {
		st.packSaved = true
	}
	return err
}

// journalFailed logs a journal write that failed where no caller can be
// told (background work); paths that answer a peer return the error
// instead (I4).
func (n *Node) journalFailed(what, key string, err error) {
	if err != nil {
		n.log.Error("journal: "+what, "key", key, "err", err)
	}
}

func (n *Node) dropHeld(key string) error {
	return n.journal.Update(func(tx *journal.Tx) error {
		if err := tx.Delete(journal.BucketPackBytes, key); err != nil {
			return err
		}
		return tx.Delete(journal.BucketPacks, key)
	})
}

// toBody stores a residual workflow that may start with any step (the
// pack codec insists on a leading service): canonical text plus the service
// paths in source order.
func toBody(w *grammar.Workflow) *join.Body {
	if w == nil || len(w.Steps) == 0 {
		return nil
	}
	var paths []string
	walkServices(w, func(s *grammar.Service) { paths = append(paths, s.Path) })
	return &join.Body{Text: w.String(), Paths: paths}
}

// fromBody parses what toBody stored, with its service paths.
func fromBody(b *join.Body) (*grammar.Workflow, error) {
	if b == nil {
		return nil, nil
	}
	w, err := grammar.Parse("<residual>", []byte(b.Text))
	if err != nil {
		return nil, fmt.Errorf("stored workflow: %w", err)
	}
	i := 0
	var bad bool
	walkServices(w, func(s *grammar.Service) {
		if i < len(b.Paths) {
			s.Path = b.Paths[i]
		} else {
			bad = true
		}
		i++
	})
	if bad || i != len(b.Paths) {
		return nil, fmt.Errorf("stored workflow: %d service paths for %d services", len(b.Paths), i)
	}
	return w, nil
}

// walkServices calls fn for every service in w in source order.
func walkServices(w *grammar.Workflow, fn func(*grammar.Service)) {
	if w == nil {
		return
	}
	for _, s := range w.Steps {
		switch s := s.(type) {
		case *grammar.Service:
			fn(s)
		case *grammar.Fork:
			for _, b := range s.Branches {
				walkServices(b, fn)
			}
		case *grammar.First:
			for _, b := range s.Branches {
				walkServices(b, fn)
			}
		case *grammar.Failover:
			for _, b := range s.Branches {
				walkServices(b, fn)
			}
		case *grammar.Choice:
			for _, a := range s.Arms {
				walkServices(a.Body, fn)
			}
		}
	}
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func copyOutputs(m map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	maps.Copy(out, m)
	return out
}

// resume reloads what the journal says this peer still owns: workflow
// records it is origin of, join records it holds, and packs it accepted but
// had not moved on.
func (n *Node) resume(ctx context.Context) error {
	var errs []error
	err := n.journal.ForEach(journal.BucketWorkflows, func(key string, value []byte) error {
		var rec origin.Record
		if err := rpc.Dec.Unmarshal(value, &rec); err != nil {
			errs = append(errs, fmt.Errorf("workflow %s: %w", key, err))
			return nil
		}
		if rec.Status.ID == "" {
			rec.Status.ID = key
		}
		n.origins.put(origin.Load(rec))
		return nil
	})
	if err != nil {
		return err
	}
	err = n.journal.ForEach(journal.BucketJoins, func(key string, value []byte) error {
		var rec join.Record
		if err := rpc.Dec.Unmarshal(value, &rec); err != nil {
			errs = append(errs, fmt.Errorf("join %s: %w", key, err))
			return nil
		}
		n.joins.add(key, newJoinCopy(join.Load(rec)))
		return nil
	})
	if err != nil {
		return err
	}
	type held struct {
		key string
		st  *heldState
	}
	var packs []held
	raws := map[string][]byte{}
	err = n.journal.ForEach(journal.BucketPackBytes, func(key string, value []byte) error {
		raws[key] = value
		return nil
	})
	if err != nil {
		return err
	}
	err = n.journal.ForEach(journal.BucketPacks, func(key string, value []byte) error {
		var st heldState
		if err := rpc.Dec.Unmarshal(value, &st); err != nil {
			errs = append(errs, fmt.Errorf("held pack %s: %w", key, err))
			return nil
		}
		if st.PackRaw == nil {
			st.PackRaw = raws[key]
		}
		st.packSaved = true
		p, err := pack.Decode(st.PackRaw, n.limits)
		if err != nil {
			errs = append(errs, fmt.Errorf("held pack %s: %w", key, err))
			return nil
		}
		st.Pack = p
		packs = append(packs, held{key, &st})
		return nil
	})
	if err != nil {
		return err
	}
	marks := map[string]*guard.Mark{}
	err = n.journal.ForEach(journal.BucketReleased, func(key string, value []byte) error {
		var mark guard.Mark
		if err := rpc.Dec.Unmarshal(value, &mark); err != nil {
			errs = append(errs, fmt.Errorf("release tombstone %s: %w", key, err))
			return nil
		}
		marks[key] = &mark
		return nil
	})
	if err != nil {
		return err
	}
	copies := map[string]*guard.Record{}
	err = n.journal.ForEach(journal.BucketOutbox, func(key string, value []byte) error {
		var rec guard.Record
		if err := rpc.Dec.Unmarshal(value, &rec); err != nil {
			errs = append(errs, fmt.Errorf("guard %s: %w", key, err))
			return nil
		}
		copies[key] = &rec
		return nil
	})
	if err != nil {
		return err
	}
	for key, mark := range marks {
		n.guards.put(guard.Restore(key, copies[key], mark))
	}
	for key, rec := range copies {
		if marks[key] == nil {
			n.guards.put(guard.Restore(key, rec, nil))
		}
	}
	for _, e := range errs {
		n.log.Error("journal entry skipped", "err", e)
	}
	// Holders and join primaries get RestartGrace to come back before this
	// peer suspects them (after a blackout everyone reboots at once).
	watch := map[string]bool{}
	for _, g := range n.guards.all() {
		if c := g.Copy(); c != nil {
			watch[c.Holder.ID] = true
		}
	}
	for _, c := range n.joins.all() {
		c.view(func(m *join.Join) {
			if a, ok := m.Watching(); ok {
				watch[a.ID] = true
			}
		})
	}
	if len(watch) > 0 {
		n.spawn(func(ctx context.Context) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(n.cfg.RestartGrace):
			}
			for id := range watch {
				if pid, err := peer.Decode(id); err == nil && pid != n.host.ID() {
					n.watchHolder(pid)
				}
			}
		})
	}
	for _, h := range packs {
		n.log.Info("resuming held pack", "key", h.key, "executed", h.st.Executed, "forwarded", h.st.Forwarded)
		n.spawn(func(ctx context.Context) {
			if n.stillOwned(ctx, h.st) {
				n.process(ctx, h.key, h.st)
			}
		})
	}
	// Join copies resume as their machine says: a restarted primary asks
	// its replicas (refusing branch ends meanwhile), an acting copy of a
	// decided join forwards it again. Passive copies were added to watch.
	for _, c := range n.joins.all() {
		var rd join.Ready
		c.view(func(m *join.Join) { rd = m.Resume() })
		switch {
		case rd.AskReplicas:
			n.spawn(func(ctx context.Context) { n.askReplicas(ctx, c) })
		case rd.Forward:
			n.log.Info("resuming decided join", "join", c.cur.Load().ID())
			n.spawn(func(ctx context.Context) { n.forwardJoin(ctx, c) })
		}
	}
	n.kickBeats()
	// Workflow records resume as their machine says: a running primary
	// asks its replicas whether it ended meanwhile, a replica hands back a
	// completion the primary had not acknowledged (node/origin O3).
	n.resumeOrigins()
	return nil
}

// stillOwned asks a restarted holder's guardians whether its held work was
// re-routed meanwhile (fencing by attempt number), all of them at once: a
// guardian that restarted too may still hold the copy it had, while the
// one that re-routed knows better, so any guardian that says superseded
// (or released, for work not yet forwarded) wins, and so does an origin
// that says the workflow has ended. It keeps asking for up to RestartGrace
// while every guardian is down; with no answer it proceeds.
func (n *Node) stillOwned(ctx context.Context, st *heldState) bool {
	if len(st.Guardians) == 0 {
		return true
	}
	drop := func(why string, attempt int) bool {
		n.log.Warn("held work was taken over while this peer was down; dropping it",
			"key", st.Key, "attempt", st.Pack.Attempt, "why", why, "guardian_attempt", attempt)
		n.ev.Emit(events.Event{Type: events.Superseded, Workflow: st.Pack.WorkflowID, Step: headPath(st.Pack), Attempt: st.Pack.Attempt, Reason: why})
		n.journalFailed("drop held pack", st.Key, n.dropHeld(st.Key))
		return false
	}
	deadline := time.Now().Add(n.cfg.RestartGrace)
	for {
		replies := make([]api.GuardReply, len(st.Guardians))
		var wg sync.WaitGroup
		for i, g := range st.Guardians {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i] = n.guardCall(ctx, g, api.GuardMsg{Op: api.GuardOwner, Key: st.GuardKey, Attempt: st.Pack.Attempt}, settleCallTimeout)
			}()
		}
		wg.Wait()
		answered := false
		for _, rep := range replies {
			if !rep.OK {
				continue
			}
			answered = true
			if rep.Superseded {
				return drop("a guardian re-routed it", rep.Attempt)
			}
			if rep.Released && !st.Forwarded {
				return drop("a guardian was released by a later holder", rep.Attempt)
			}
		}
		if !st.Forwarded && n.workflowEnded(ctx, st.Pack) {
			return drop("the workflow has ended", 0)
		}
		if answered {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}
