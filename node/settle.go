package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Settling, in one paragraph: responsibility for a workflow moves from
// one peer to the next at every hand-off, branch start, branch end,
// continuation and completion. The receiver, not the sender, finishes the
// move: after it has journaled what it received (and recruited a backup
// guardian, so two copies exist besides the dead sender's), it settles the
// items the sender listed (pack.Settle): it releases the guardians of the
// step the sender ran, tells a join's copies that a branch started at it or
// that the join's continuation moved on, and only then acknowledges. So a
// sender killed right after the acknowledgement leaves no guardian that
// would re-run finished work (I1). A guardian decides a release and a
// re-route of the same step atomically: a release that comes second is
// answered "superseded", and the receiver refuses the pack, which stops the
// superseded chain at its next hop.

// errSuperseded says settling found that a guardian had re-routed the step
// before: the work belongs to a superseded chain.
var errSuperseded = errors.New("a guardian re-routed an earlier step of this chain")

// settleCallTimeout bounds one settle call. A peer that does not answer in
// time is taken as gone; its copy is gone with it.
const settleCallTimeout = 2 * time.Second

// settle carries out items for work of workflow wf held here at attempt,
// all at once, and waits for every answer. It returns errSuperseded when a
// guardian said it had re-routed the step being released, and ctx's error
// when ctx ended (a peer that does not answer in time counts as gone, but
// a caller that gave up has settled nothing).
func (n *Node) settle(ctx context.Context, attempt int, items []pack.Settle) error {
	if len(items) == 0 {
		return nil
	}
	self := n.self()
	var superseded atomic.Bool
	var wg sync.WaitGroup
	for _, it := range items {
		msg := settleMsg(it, attempt, self)
		for _, to := range it.Peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if rep := n.guardCall(ctx, to, msg, settleCallTimeout); rep.Superseded {
					n.log.Info("settle answered superseded", "op", msg.Protocol(), "peer", rpc.ShortIDString(to.ID), "attempt", rep.Attempt, "why", rep.Error)
					superseded.Store(true)
				}
			}()
		}
	}
	wg.Wait()
	if superseded.Load() {
		return errSuperseded
	}
	// A cancelled caller (its work superseded, the node stopping) got no
	// answers: nothing is settled, so nothing may be acknowledged.
	return ctx.Err()
}

// probeSettle asks the guardians named by the release items whether a
// release would be answered superseded (node/guard G6), without releasing
// anything, and returns errSuperseded if one says so. A join or an origin
// asks before it records a branch end or a completion, so that a
// superseded chain's is refused (I1), and releases the guardians (settle)
// only once it has recorded it: released guardians must never be left
// with nothing recorded. A peer that does not answer counts as not
// superseded (the settle after the record asks again).
func (n *Node) probeSettle(ctx context.Context, items []pack.Settle) error {
	var superseded atomic.Bool
	var wg sync.WaitGroup
	for _, it := range items {
		if it.Kind != pack.SettleGuard {
			continue
		}
		msg := api.GuardRelease{Key: it.Key, Attempt: it.Attempt, Probe: true}
		for _, to := range it.Peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if rep := n.guardCall(ctx, to, msg, settleCallTimeout); rep.Superseded {
					superseded.Store(true)
				}
			}()
		}
	}
	wg.Wait()
	if superseded.Load() {
		return errSuperseded
	}
	return nil
}

// settleMsg is the guard operation that settles it.
func settleMsg(it pack.Settle, attempt int, self pack.Peer) api.GuardRequest {
	switch it.Kind {
	case pack.SettleJoinForwarded:
		return api.JoinForwarded{Key: it.Key, Epoch: it.Epoch, Actor: it.Actor}
	case pack.SettleBranchStarted:
		return api.JoinBranch{Key: it.Key, Branch: it.Branch, Attempt: attempt, Holder: self, Epoch: it.Epoch, Actor: it.Actor}
	}
	return api.GuardRelease{Key: it.Key, Attempt: it.Attempt}
}

// guardCall sends one guard message to a peer (or serves it here when the
// peer is this one) within d, and returns the reply (Error set on
// failure).
func (n *Node) guardCall(ctx context.Context, to pack.Peer, m api.GuardRequest, d time.Duration) api.GuardReply {
	id, err := peer.Decode(to.ID)
	if err != nil {
		return api.GuardReply{Error: "bad peer id " + to.ID}
	}
	if id == n.host.ID() {
		return n.guardOp(id, m)
	}
	n.learnAddrs(id, to.Addrs)
	var rep api.GuardReply
	if err := rpc.CallCBOR(ctx, n.host, id, m.Protocol(), m, &rep, d); err != nil {
		return api.GuardReply{Error: err.Error()}
	}
	return rep
}

// releaseGuard serves a release of the guard copy key at attempt. Of a
// release and a re-route of the same copy, whichever this peer decides
// first wins (node/guard G1): a release that comes after a re-route was
// claimed (or after a newer attempt was stored or released) is answered
// Superseded. The copy leaves the journal before the answer (I4).
func (n *Node) releaseGuard(key string, attempt int) api.GuardReply {
	return n.stepGuardReply(key, guard.Release{Attempt: attempt, At: time.Now().UTC()})
}
