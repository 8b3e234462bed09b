package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
	"github.com/libp2p/go-libp2p/core/peer"
)

// journalFailed logs a journal write that failed where no caller can be
// told (background work); paths that answer a peer return the error
// instead (I4).
func (n *Node) journalFailed(what, key string, err error) {
	if err != nil {
		n.log.Error("journal: "+what, "key", key, "err", err)
	}
}

// toBody stores a residual workflow that may start with any step (the
// pack codec insists on a leading service): canonical text plus the service
// paths in source order.
func toBody(w *grammar.Workflow) *join.Body {
	if w == nil || len(w.Steps) == 0 {
		return nil
	}
	var paths []string
	grammar.WalkServices(w, func(s *grammar.Service) { paths = append(paths, s.Path) })
	return &join.Body{Text: w.String(), Paths: paths}
}

// fromBody parses what toBody stored, with its service paths.
func fromBody(b *join.Body) (*grammar.Workflow, error) {
	if b == nil {
		return nil, nil
	}
	w, err := grammar.ParseResidual("<residual>", []byte(b.Text))
	if err != nil {
		return nil, fmt.Errorf("stored workflow: %w", err)
	}
	i := 0
	var bad bool
	grammar.WalkServices(w, func(s *grammar.Service) {
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
	if err := n.loadHandedOn(); err != nil {
		return err
	}
	workflows := map[string]*origin.Record{}
	err := n.journal.ForEach(journal.BucketWorkflows, func(key string, value []byte) error {
		var rec origin.Record
		if err := rpc.Dec.Unmarshal(value, &rec); err != nil {
			errs = append(errs, fmt.Errorf("workflow %s: %w", key, err))
			return nil
		}
		if rec.Status.ID == "" {
			rec.Status.ID = key
		}
		workflows[key] = &rec
		return nil
	})
	if err != nil {
		return err
	}
	if err := n.moveStashOut(workflows); err != nil {
		return fmt.Errorf("journal: move stashed outputs out of workflow records: %w", err)
	}
	if err := n.loadStash(workflows); err != nil {
		errs = append(errs, err)
	}
	for _, rec := range workflows {
		n.origins.put(origin.Load(*rec))
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
	var packs []held.Record
	raws := map[string][]byte{}
	err = n.journal.ForEach(journal.BucketPackBytes, func(key string, value []byte) error {
		raws[key] = value
		return nil
	})
	if err != nil {
		return err
	}
	err = n.journal.ForEach(journal.BucketPacks, func(key string, value []byte) error {
		var rec held.Record
		if err := rpc.Dec.Unmarshal(value, &rec); err != nil {
			errs = append(errs, fmt.Errorf("held pack %s: %w", key, err))
			return nil
		}
		if rec.PackRaw == nil {
			rec.PackRaw = raws[key]
		}
		p, err := pack.Decode(rec.PackRaw, n.limits)
		if err != nil {
			errs = append(errs, fmt.Errorf("held pack %s: %w", key, err))
			return nil
		}
		rec.Pack, rec.PackRaw = p, nil
		if rec.Key == "" {
			rec.Key = key
		}
		packs = append(packs, rec)
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
	// A copy its tombstone says is pending (G17) is not live: restored as
	// pending beside that tombstone, or dropped if nothing backs it (its
	// end was not journaled before the restart).
	pendings := map[string]*guard.Record{}
	for key, mark := range marks {
		if c := copies[key]; c != nil && mark.Pending && c.Attempt == mark.Attempt {
			pendings[key] = c
			delete(copies, key)
		}
	}
	for key, mark := range marks {
		n.guards.put(guard.Restore(key, copies[key], mark, pendings[key]))
	}
	for key, rec := range copies {
		if marks[key] == nil {
			n.guards.put(guard.Restore(key, rec, nil, nil))
		}
	}
	for key, p := range pendings {
		if n.guards.view(key).Pending() == nil {
			attempt := p.Attempt
			n.journal.Later(func(tx *journal.Tx) error { return dropPendingCopy(tx, key, attempt) })
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
		if p := g.Pending(); p != nil {
			watch[p.Holder.ID] = true // G17: asked about once it is silent
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
			case <-n.clock.After(n.cfg.RestartGrace):
			}
			for id := range watch {
				if pid, err := peer.Decode(id); err == nil && pid != n.host.ID() {
					n.watchHolder(pid)
				}
			}
		})
	}
	for _, rec := range packs {
		// In the table before anything is answered about it (tookOp).
		s, fresh := n.helds.add(rec.Key, held.Restore(n.selfID, rec), n.clock.Now())
		if !fresh {
			continue
		}
		n.spawn(func(ctx context.Context) { n.resumeHeld(ctx, s, rec) })
	}
	n.resumed.Store(true)
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
