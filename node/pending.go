package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// A successor's release is confirmed before a guardian lets go of its copy
// (node/guard G17). A receiver records its release at the guardians of
// the step before while it settles a hand-over, and may then refuse the
// hand-over (unsettled); a sender killed for good after that left nobody
// holding a copy to re-route. So a guardian keeps the released copy as
// pending, and its holder watched, until:
//
//   - the holder's beats say it let go of that attempt (heldFrame.LetGo,
//     on api.ProtoBeatHeld): it handed the work on, and its successor
//     holds it;
//   - or the holder, asked, says it no longer holds the work
//     (reconcileHolder; asked when its beats have neither listed nor let
//     go of the work for pendingUnlistedAsk);
//   - or, the holder gone silent, the successor says whether it took the
//     work (askTook): took it, the copy goes; never took it, the copy is
//     live again and re-routed.
//
// A beat that merely does not list the key is not such a word: the
// holder may have written it before it began beating for the work (while
// it was still taking the hand-over, or in the last frame of an earlier
// run on the same stream), and the guardian read it after the successor's
// release. Taken as "let go", it could confirm a release the successor
// then refused, and once the holder died nobody would hold the step
// (node/guard G21).

// Beat frames. On api.ProtoBeatHeld a holder's beat frame says what it
// holds and what it let go of for the guardian it beats to (heldFrame); on
// api.ProtoBeatKeys, spoken by peers that predate heldFrame, it lists
// the keys held; on api.ProtoBeat, spoken by peers from before G17, it
// is one byte. The first byte says which
// kind of frame it is.
const (
	// beatPlain is a beat that lists nothing (api.ProtoBeat).
	beatPlain = 1
	// beatKeys is followed by the CBOR list of guarded keys held.
	beatKeys = 2
	// beatHeld is followed by the CBOR heldFrame.
	beatHeld = 3
	// maxBeatFrame bounds a beat frame: a key is well under 256 bytes.
	maxBeatFrame = 1 << 20
)

// heldFrame is a beat frame's body on api.ProtoBeatHeld, for one guardian.
type heldFrame struct {
	// Held are the guard keys of the work the holder holds and beats for
	// that the guardian guards.
	Held []string `cbor:"1,keyasint,omitempty"`
	// LetGo is the work that guardian guarded which the holder handed on
	// in the last letGoKept.
	LetGo []letGoKey `cbor:"2,keyasint,omitempty"`
}

// letGoKey names one attempt of a step a holder let go of.
type letGoKey struct {
	Key     string `cbor:"1,keyasint"`
	Attempt int    `cbor:"2,keyasint"`
}

// beatFrame is the next frame on beat stream s to guardian id: what this
// peer holds and let go of where the guardian speaks api.ProtoBeatHeld,
// the list of held keys where it speaks api.ProtoBeatKeys, one byte
// where it speaks only api.ProtoBeat.
func (n *Node) beatFrame(s network.Stream, id string) []byte {
	switch s.Protocol() {
	case protocol.ID(api.ProtoBeatHeld):
		return n.beatHeldFrame(id, n.clock.Now())
	case protocol.ID(api.ProtoBeatKeys):
		return n.beatKeysFrame(id)
	}
	return []byte{beatPlain}
}

// guardedBy reports whether id is among m's guardians.
func guardedBy(m *held.Holder, id string) bool {
	return slices.ContainsFunc(m.Guardians(), func(g pack.Peer) bool { return g.ID == id })
}

// beatKeysFrame is the beat frame for guardian id on api.ProtoBeatKeys:
// the guard keys of the work this peer holds and beats for
// (held.Holder.Beats: from the moment the step may run until its
// guardians are released) that id guards.
func (n *Node) beatKeysFrame(id string) []byte {
	var keys []string
	for _, s := range n.helds.all() {
		if m := s.view(); m.Beats() && guardedBy(m, id) {
			keys = append(keys, m.Record().GuardKey)
		}
	}
	return append([]byte{beatKeys}, rpc.MustCBOR(keys)...)
}

// beatHeldFrame is the beat frame for guardian id on api.ProtoBeatHeld:
// what beatKeysFrame lists, and the work id guarded that this peer handed
// on (ended, or ending, held.PhaseDone) in the last letGoKept.
func (n *Node) beatHeldFrame(id string, now time.Time) []byte {
	var f heldFrame
	for _, s := range n.helds.all() {
		m := s.view()
		if !guardedBy(m, id) {
			continue
		}
		switch rec := m.Record(); {
		case m.Beats():
			f.Held = append(f.Held, rec.GuardKey)
		case m.Phase() == held.PhaseDone:
			f.LetGo = append(f.LetGo, letGoKey{Key: rec.GuardKey, Attempt: rec.Attempt()})
		}
	}
	for _, k := range n.letGo.forGuardian(id, now, n.letGoKept()) {
		if !slices.Contains(f.LetGo, k) {
			f.LetGo = append(f.LetGo, k)
		}
	}
	return append([]byte{beatHeld}, rpc.MustCBOR(f)...)
}

// letGoKept is how long a holder's beats say it let go of a step: three
// heartbeat intervals. The last frame to a guardian that is no longer a
// target carries it, and so do the next frames to one that still is for
// other work. A guardian that misses all of them asks the holder
// (pendingUnlistedAsk). Longer costs every frame of a busy holder: with
// 5 s, a 16-node 200-step sequence spends ~5 % more CPU building and
// reading the frames.
func (n *Node) letGoKept() time.Duration { return 3 * n.cfg.Heartbeat.Interval }

// letGoBook remembers the steps a holder handed on lately, with their
// guardians, for its beat frames (heldFrame.LetGo). Its own lock.
type letGoBook struct {
	mu      sync.Mutex
	entries []letGoEntry
}

type letGoEntry struct {
	key       letGoKey
	guardians []string
	at        time.Time
}

// add records that the step m holds was handed on at now; entries older
// than keep go.
func (b *letGoBook) add(m *held.Holder, now time.Time, keep time.Duration) {
	rec := m.Record()
	e := letGoEntry{key: letGoKey{Key: rec.GuardKey, Attempt: rec.Attempt()}, at: now}
	for _, g := range m.Guardians() {
		e.guardians = append(e.guardians, g.ID)
	}
	if len(e.guardians) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(now, keep)
	b.entries = append(b.entries, e)
}

// forGuardian returns the steps guardian id guarded that were handed on
// in the last keep.
func (b *letGoBook) forGuardian(id string, now time.Time, keep time.Duration) []letGoKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(now, keep)
	var out []letGoKey
	for _, e := range b.entries {
		if slices.Contains(e.guardians, id) {
			out = append(out, e.key)
		}
	}
	return out
}

// pruneLocked drops entries older than keep (they are in order).
func (b *letGoBook) pruneLocked(now time.Time, keep time.Duration) {
	i := 0
	for i < len(b.entries) && now.Sub(b.entries[i].at) > keep {
		i++
	}
	if i > 0 {
		b.entries = slices.Delete(b.entries, 0, i)
	}
}

// pendingUnlistedAsk is how long a guardian waits, while a pending copy's
// holder beats to it without listing the work or saying it let go of it,
// before it asks the holder (reconcileHolder): well past letGoKept (three
// heartbeat intervals), so a holder's word has had every chance to
// arrive first. Its beats may be from a peer that lists nothing
// (api.ProtoBeat, api.ProtoBeatKeys), or the frames that let go of the
// work were lost (a reset stream, or this peer restarted meanwhile).
const pendingUnlistedAsk = 10 * time.Second

// holderListed applies a beat frame from holder (hid: its ID as a
// string) to the pending copies of its work here (G17): an attempt the
// frame says the holder let go of is dropped; one the frame neither
// lists nor lets go of, for longer than pendingUnlistedAsk since its
// release, has the holder asked.
func (n *Node) holderListed(holder peer.ID, hid string, frame []byte) {
	pending := n.guards.pendingOf(hid)
	if len(pending) == 0 || len(frame) == 0 {
		return
	}
	var f heldFrame
	switch frame[0] {
	case beatHeld:
		if err := rpc.Dec.Unmarshal(frame[1:], &f); err != nil {
			n.log.Debug("bad beat frame", "peer", rpc.ShortID(holder), "err", err)
			return
		}
	case beatKeys:
		// A peer from before ProtoBeatHeld: what it lists is held, and
		// what it does not may still be (see above).
		if err := rpc.Dec.Unmarshal(frame[1:], &f.Held); err != nil {
			n.log.Debug("bad beat frame", "peer", rpc.ShortID(holder), "err", err)
			return
		}
	}
	now := n.clock.Now()
	ask := false
	for _, key := range pending {
		m := n.guards.view(key)
		p, mark := m.Pending(), m.Mark()
		if p == nil || p.Holder.ID != hid {
			continue
		}
		switch {
		case slices.Contains(f.LetGo, letGoKey{Key: key, Attempt: p.Attempt}):
			if _, err := n.stepGuard(key, guard.HolderLetGo{Holder: hid, Attempt: p.Attempt}); err != nil {
				n.log.Error("step guard", "event", "HolderLetGo", "key", key, "err", err)
			}
		case slices.Contains(f.Held, key):
		case mark != nil && now.Sub(mark.At) > pendingUnlistedAsk:
			ask = true
		}
	}
	if ask && n.reconcileDue(holder) {
		n.log.Debug("asking a holder about pending copies its beats neither list nor let go of", "peer", rpc.ShortID(holder))
		n.spawn(func(ctx context.Context) { n.reconcileHolder(ctx, holder) })
	}
}

// tookRetry is how long askTook waits before asking a successor again
// that did not say whether it took the work.
const tookRetry = 2 * time.Second

// askTook asks the successor named by a pending copy's release whether it
// took the work (api.HeldTook, answered by tookOp), and steps the answer
// (G17).
func (n *Node) askTook(ctx context.Context, key string, q guard.AskTook) {
	if q.Again {
		select {
		case <-ctx.Done():
			return
		case <-n.clock.After(tookRetry):
		}
	}
	said, why := guard.TookUnknown, ""
	switch n.askSuccessors(ctx, key, []pack.Peer{q.Successor}, map[string]string{q.Successor.ID: q.Key}) {
	case held.SuccessorTook:
		said = guard.TookKnown
	case held.SuccessorNeverTook:
		said = guard.TookNever
		why = fmt.Sprintf("holder %s silent, and successor %s never took the work (it refused the hand-over)", rpc.ShortIDString(q.Holder), rpc.ShortIDString(q.Successor.ID))
		n.log.Warn("a released guard copy's successor never took the work and its holder is silent; guarding it again", "key", key, "attempt", q.Attempt, "holder", rpc.ShortIDString(q.Holder), "successor", rpc.ShortIDString(q.Successor.ID))
	}
	if ctx.Err() != nil {
		return
	}
	rd, err := n.stepGuard(key, guard.SuccessorTook{Successor: q.Successor.ID, Holder: q.Holder, Attempt: q.Attempt, Said: said, Why: why, At: n.clock.Now().UTC()})
	if err != nil {
		n.log.Error("step guard", "event", "SuccessorTook", "key", key, "err", err)
		return
	}
	if rd.Dropped && said == guard.TookUnknown {
		n.log.Warn("a released guard copy's successor never answered; dropped as released", "key", key, "successor", rpc.ShortIDString(q.Successor.ID), "after", guard.SuccessorGrace)
	}
}
