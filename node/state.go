package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
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
	head := next.Workflow.Steps[0].(*grammar.Service)
	if next.Outputs == nil {
		next.Outputs = map[string]json.RawMessage{}
	}
	next.Outputs[head.Label()] = st.Output
	next.Workflow = &grammar.Workflow{Steps: next.Workflow.Steps[1:]}
	return next
}

// saveHeld journals held work. The pack itself (which grows along a
// workflow) is written once, under KEY#pack, in the same transaction as the
// first state record; later saves rewrite only the small state record.
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
		if err := tx.Put(journal.BucketPacks, key+packSuffix, st.PackRaw); err != nil {
			return err
		}
		return tx.Put(journal.BucketPacks, key, state)
	})
	if err == nil {
		st.packSaved = true
	}
	return err
}

// packSuffix marks the journal key holding a held pack's bytes.
const packSuffix = "#pack"

func (n *Node) dropHeld(key string) error {
	return n.journal.Update(func(tx *journal.Tx) error {
		if err := tx.Delete(journal.BucketPacks, key+packSuffix); err != nil {
			return err
		}
		return tx.Delete(journal.BucketPacks, key)
	})
}

// wireWorkflow stores a residual workflow that may start with any step (the
// pack codec insists on a leading service): canonical text plus the service
// paths in source order.
type wireWorkflow struct {
	Text  string   `cbor:"1,keyasint"`
	Paths []string `cbor:"2,keyasint"`
}

func toWire(w *grammar.Workflow) *wireWorkflow {
	if w == nil || len(w.Steps) == 0 {
		return nil
	}
	var paths []string
	walkServices(w, func(s *grammar.Service) { paths = append(paths, s.Path) })
	return &wireWorkflow{Text: w.String(), Paths: paths}
}

func (ww *wireWorkflow) workflow() (*grammar.Workflow, error) {
	if ww == nil {
		return nil, nil
	}
	w, err := grammar.Parse("<residual>", []byte(ww.Text))
	if err != nil {
		return nil, fmt.Errorf("stored workflow: %w", err)
	}
	i := 0
	var bad bool
	walkServices(w, func(s *grammar.Service) {
		if i < len(ww.Paths) {
			s.Path = ww.Paths[i]
		} else {
			bad = true
		}
		i++
	})
	if bad || i != len(ww.Paths) {
		return nil, fmt.Errorf("stored workflow: %d service paths for %d services", len(ww.Paths), i)
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
		var rec workflowRecord
		if err := rpc.Dec.Unmarshal(value, &rec); err != nil {
			errs = append(errs, fmt.Errorf("workflow %s: %w", key, err))
			return nil
		}
		n.workflows[key] = &rec
		return nil
	})
	if err != nil {
		return err
	}
	err = n.journal.ForEach(journal.BucketJoins, func(key string, value []byte) error {
		var j joinRecord
		if err := rpc.Dec.Unmarshal(value, &j); err != nil {
			errs = append(errs, fmt.Errorf("join %s: %w", key, err))
			return nil
		}
		if j.Results == nil {
			j.Results = map[int]*branchResult{} // an empty map is not stored
		}
		n.joins[key] = &j
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
	err = n.journal.ForEach(journal.BucketPacks, func(key string, value []byte) error {
		if strings.HasSuffix(key, packSuffix) {
			raws[strings.TrimSuffix(key, packSuffix)] = value
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = n.journal.ForEach(journal.BucketPacks, func(key string, value []byte) error {
		if strings.HasSuffix(key, packSuffix) {
			return nil
		}
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
	err = n.journal.ForEach(journal.BucketOutbox, func(key string, value []byte) error {
		var e guardEntry
		if err := rpc.Dec.Unmarshal(value, &e); err != nil {
			errs = append(errs, fmt.Errorf("guard %s: %w", key, err))
			return nil
		}
		n.guards[key] = &e
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range errs {
		n.log.Error("journal entry skipped", "err", e)
	}
	// Holders and join primaries get RestartGrace to come back before this
	// peer suspects them (after a blackout everyone reboots at once).
	watch := map[string]bool{}
	for _, e := range n.guards {
		watch[e.Holder.ID] = true
	}
	for _, j := range n.joins {
		if j.Replica && !j.Active && !j.Forwarded {
			watch[j.Primary.ID] = true
		}
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
	for _, j := range n.joins {
		if j.Replica || j.Forwarded {
			continue
		}
		if len(j.Replicas) > 0 {
			// Until the replicas say whether one took over, branch ends
			// are refused here (they go on to the replica, or come back).
			n.mu.Lock()
			j.checking = true
			n.mu.Unlock()
		}
		n.spawn(func(ctx context.Context) {
			defer func() {
				n.mu.Lock()
				j.checking = false
				n.mu.Unlock()
			}()
			for _, r := range j.Replicas {
				if rep := n.callGuard(ctx, r, api.GuardMsg{Op: api.GuardJoinStatus, Key: j.ID}); rep.Active {
					n.log.Info("a replica took over this join while we were down", "join", j.ID, "replica", rpc.ShortIDString(r.ID))
					n.mu.Lock()
					// Like a hand-over: this copy never acts again, and
					// branch ends reaching it go on to the replica.
					j.Moved, j.Replica, j.Active, j.Primary = true, true, false, r
					_ = n.saveJoin(j)
					n.mu.Unlock()
					return
				}
			}
			n.kickBeats()
			if j.Done {
				n.log.Info("resuming finished join", "join", j.ID)
				n.forwardJoin(ctx, j)
			}
		})
	}
	n.spawn(func(ctx context.Context) {
		// Replicas may be rebooting too: ask now and once more later.
		n.syncOrigins(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.cfg.RestartGrace):
		}
		n.syncOrigins(ctx)
	})
	return nil
}

// stillOwned asks a restarted holder's guardians whether its held work was
// re-routed meanwhile (fencing by attempt number). It keeps asking for up
// to RestartGrace while guardians are down; with no answer it proceeds.
func (n *Node) stillOwned(ctx context.Context, st *heldState) bool {
	if len(st.Guardians) == 0 {
		return true
	}
	deadline := time.Now().Add(n.cfg.RestartGrace)
	for {
		for _, g := range st.Guardians {
			rep := n.callGuard(ctx, g, api.GuardMsg{Op: api.GuardOwner, Key: st.GuardKey, Attempt: st.Pack.Attempt})
			if !rep.OK {
				continue
			}
			if rep.Superseded || (rep.Released && !st.Forwarded) {
				n.log.Warn("held work was taken over while this peer was down; dropping it",
					"key", st.Key, "attempt", st.Pack.Attempt, "guardian_attempt", rep.Attempt)
				_ = n.dropHeld(st.Key)
				return false
			}
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
