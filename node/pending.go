package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
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
//   - the holder's beats no longer list the key (beatFrame, serveBeat):
//     it handed the work on, and its successor holds it;
//   - or, the holder gone silent, the successor says whether it took the
//     work (askTook): took it, the copy goes; never took it, the copy is
//     live again and re-routed.

// Beat frames. On api.ProtoBeatKeys a holder's beat frame lists the keys
// of the held work the guardian it beats to guards (beatKeysFrame); on
// api.ProtoBeat, spoken by peers from before G17, it is one byte. The
// first byte says which kind of frame it is.
const (
	// beatPlain is a beat that lists nothing (api.ProtoBeat).
	beatPlain = 1
	// beatKeys is followed by the CBOR list of guarded keys held.
	beatKeys = 2
	// maxBeatFrame bounds a beat frame: a key is well under 256 bytes.
	maxBeatFrame = 1 << 20
)

// beatFrame is the next frame on beat stream s to guardian id: the list of
// held keys where the guardian speaks api.ProtoBeatKeys, one byte where it
// speaks only api.ProtoBeat.
func (n *Node) beatFrame(s network.Stream, id string) []byte {
	if s.Protocol() == protocol.ID(api.ProtoBeatKeys) {
		return n.beatKeysFrame(id)
	}
	return []byte{beatPlain}
}

// beatKeysFrame is the beat frame for guardian id: the guard keys of the
// work this peer holds and beats for (held.Holder.Beats: from the moment
// the step may run until its guardians are released) that id guards.
func (n *Node) beatKeysFrame(id string) []byte {
	var keys []string
	for _, s := range n.helds.all() {
		m := s.view()
		if m.Beats() && slices.ContainsFunc(m.Guardians(), func(g pack.Peer) bool { return g.ID == id }) {
			keys = append(keys, m.Record().GuardKey)
		}
	}
	return append([]byte{beatKeys}, rpc.MustCBOR(keys)...)
}

// holderListed applies a beat frame from holder: a pending copy of its
// work whose key the frame does not list is dropped, the holder no longer
// has the work (G17). A frame that lists nothing (beatPlain) says nothing.
func (n *Node) holderListed(holder string, frame []byte) {
	if len(frame) == 0 || frame[0] != beatKeys {
		return
	}
	pending := n.guards.pendingOf(holder)
	if len(pending) == 0 {
		return
	}
	var listed []string
	if err := rpc.Dec.Unmarshal(frame[1:], &listed); err != nil {
		n.log.Debug("bad beat frame", "peer", rpc.ShortIDString(holder), "err", err)
		return
	}
	for _, key := range pending {
		if slices.Contains(listed, key) {
			continue
		}
		if _, err := n.stepGuard(key, guard.HolderLetGo{Holder: holder}); err != nil {
			n.log.Error("step guard", "event", "HolderLetGo", "key", key, "err", err)
		}
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
		case <-time.After(tookRetry):
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
	rd, err := n.stepGuard(key, guard.SuccessorTook{Successor: q.Successor.ID, Holder: q.Holder, Attempt: q.Attempt, Said: said, Why: why, At: time.Now().UTC()})
	if err != nil {
		n.log.Error("step guard", "event", "SuccessorTook", "key", key, "err", err)
		return
	}
	if rd.Dropped && said == guard.TookUnknown {
		n.log.Warn("a released guard copy's successor never answered; dropped as released", "key", key, "successor", rpc.ShortIDString(q.Successor.ID), "after", guard.SuccessorGrace)
	}
}
