package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"

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

// errUnsettled says that no peer named by some settle item answered, even
// on fresh connections: a peer that does not answer may be cut off rather
// than dead, and a guardian cut off from its holder re-routes, so no
// answer is not a release (I1). The receiver refuses
// the hand-over with api.CodeUnsettled and the sender keeps the work and
// tries again.
var errUnsettled = errors.New("no peer of a settle item answered")

// takenError says a guardian (G8) or a join copy (J6) answered that
// another successor, By, took this attempt first.
type takenError struct{ By string }

func (e takenError) Error() string {
	return "another peer (" + rpc.ShortIDString(e.By) + ") took this attempt first"
}

// Unwrap makes a takenError an errSuperseded for callers that only stop.
func (e takenError) Unwrap() error { return errSuperseded }

// settleCallTimeout bounds one settle call.
const settleCallTimeout = 2 * time.Second

// settleBudget bounds all rounds of one settle: it must end well inside
// the sender's stream timeout (api.Ack comes after it), or the sender
// would try another peer while this one takes the work.
const settleBudget = 5 * time.Second

// acceptSettleBudget bounds every settle of one hand-over together — the
// reach probe of several items, the release the backup's copy rides, and
// the plain settle after a ride nobody answered — so that a receiver whose
// guardians of the step before are stalled refuses the hand-over as
// unsettled while its sender still waits for the answer (its call ends
// after Config.StreamTimeout, 10 s by default; the withdrawals a refusal
// sends first take up to settleCallTimeout more). With only a
// settleBudget for each settle alone, a ride's two rounds plus the settle
// after it would take the receiver past its sender's call: the sender
// would see no answer instead of a refusal, and fail the workflow once no
// peer offering the step answered.
const acceptSettleBudget = 6 * time.Second

// minSettleCall is the shortest a settle call is given when the settle's
// deadline is nearer than settleCallTimeout.
const minSettleCall = 500 * time.Millisecond

type settleDeadlineKey struct{}

// withSettleDeadline bounds every settle round started under the returned
// context by t (an earlier bound already on ctx stays).
func withSettleDeadline(ctx context.Context, t time.Time) context.Context {
	if d, ok := ctx.Value(settleDeadlineKey{}).(time.Time); ok && d.Before(t) {
		return ctx
	}
	return context.WithValue(ctx, settleDeadlineKey{}, t)
}

// settleDeadline is when the rounds of a settle starting now must end:
// settleBudget from now, or ctx's settle bound when that is sooner.
func (n *Node) settleDeadline(ctx context.Context) time.Time {
	deadline := n.clock.Now().Add(settleBudget)
	if d, ok := ctx.Value(settleDeadlineKey{}).(time.Time); ok && d.Before(deadline) {
		deadline = d
	}
	return deadline
}

// settleCallWithin is how long one settle call may take given the
// settle's deadline: settleCallTimeout, less when the deadline is nearer,
// never under minSettleCall.
func (n *Node) settleCallWithin(deadline time.Time) time.Duration {
	return max(minSettleCall, min(settleCallTimeout, n.clock.Until(deadline)))
}

// settle carries out items for work of workflow wf held here at attempt,
// all at once, and waits for every answer. It returns errSuperseded when a
// guardian said it had re-routed the step being released, errUnsettled
// when an item got no answer from any of its peers (after a second round
// on fresh connections) unless the item is Lenient, and ctx's error when
// ctx ended (a caller that gave up has settled nothing). A peer that does
// not answer while another peer of the same item does is taken as gone;
// this peer's own answer counts only for an item that names no other. A
// guardian that answers Pending (another guardian of the step asked it
// before re-routing the step, node/guard G13) recorded nothing and counts
// as not answering, even for a Lenient item: the step's primary must
// answer (superseded, if it claimed the re-route), or the hand-over is
// unsettled and tried again.
//
// A receiver of a hand-off settles as its successor (by: its peer ID): a
// guardian released by one successor answers a release of the same
// attempt by another Superseded (node/guard G8), so a sender whose ack
// was lost and that handed the step to a second peer starts one chain,
// not two. Joins and origins settle with by empty.
func (n *Node) settle(ctx context.Context, attempt int, items []pack.Settle, by successor) error {
	_, err := n.settleMissing(ctx, attempt, items, by, nil)
	return err
}

// settleAnswers are the calls of a settle by a successor: those answered
// without a refusal (got) and those that failed while another peer of the
// same item answered (missed).
type settleAnswers struct {
	got, missed []tookAnswer
}

// settleMissing is settle that also returns, for a successor (by set),
// the calls answered and the peers of items settled by others whose own
// call failed (a copy of the join that did not learn of the new branch
// holder or continuation receiver). The caller that takes
// the work sends them the same message later (completeSettle): a join
// copy that missed a branch start and then took the join over would start
// the branch a second time (J6).
//
// With ride set, the release sent to ride.to carries ride.store, the copy
// of the work being taken for that peer to keep as its backup guardian,
// written there in the release's commit (settleRiding).
func (n *Node) settleMissing(ctx context.Context, attempt int, items []pack.Settle, by successor, ride *rideStore) (settleAnswers, error) {
	if len(items) == 0 {
		return settleAnswers{}, nil
	}
	if by.id != "" && len(items) > 1 {
		// Every item must be answerable before any is released: a
		// receiver that released one item as successor and then refused
		// the hand-over as unsettled would leave that guardian naming it,
		// and the sender's next receiver would be refused (G8).
		reach := make([]pack.Settle, len(items))
		copy(reach, items)
		if err := n.settleRounds(ctx, reach, func(it pack.Settle, _ pack.Peer) api.GuardRequest {
			if it.Kind == pack.SettleGuard {
				return api.GuardRelease{Key: it.Key, Attempt: it.Attempt, Probe: true, By: by.id}
			}
			return api.GuardStatus{Key: it.Key}
		}, true, nil, nil); err != nil {
			return settleAnswers{}, err
		}
	}
	self := n.self()
	var took *tookSet
	if by.id != "" {
		took = &tookSet{}
	}
	var err error
	if ride != nil {
		err = n.settleRiding(ctx, attempt, items, by, ride, took)
	} else {
		err = n.settleRounds(ctx, items, func(it pack.Settle, _ pack.Peer) api.GuardRequest { return settleMsg(it, attempt, self, by) }, false, took, nil)
	}
	var taken takenError
	if errors.As(err, &taken) && taken.By != by.id {
		n.yield(items, attempt, by.id, taken.By, took)
	}
	if took == nil {
		return settleAnswers{}, err
	}
	took.mu.Lock()
	defer took.mu.Unlock()
	return settleAnswers{got: slices.Clone(took.got), missed: slices.Clone(took.missed)}, err
}

// releasedGuardians are the peers of the guard items (pack.SettleGuard)
// among answered: the guardians a receiver's settle released.
func releasedGuardians(items []pack.Settle, answered []tookAnswer) []string {
	var out []string
	for _, a := range answered {
		if items[a.item].Kind == pack.SettleGuard {
			out = append(out, a.to.ID)
		}
	}
	return out
}

// completeSettle tells the join copies that missed it (settleMissing)
// what the others recorded — which peer holds a branch start, which took
// a continuation — asking each until it answers (callUntilAnswered).
// Called once the work is taken here, never for a refused hand-over (a
// copy must not record a holder that refused).
func (n *Node) completeSettle(items []pack.Settle, attempt int, by successor, missed []tookAnswer) {
	self := n.self()
	for _, m := range missed {
		it := items[m.item]
		if it.Kind != pack.SettleBranchStarted && it.Kind != pack.SettleJoinForwarded {
			continue // a guardian that missed its release reconciles with the holder
		}
		to, msg := m.to, settleMsg(it, attempt, self, by)
		n.spawn(func(ctx context.Context) {
			if _, tries, err := n.callUntilAnswered(ctx, to, msg, settleCallTimeout); err != nil {
				n.log.Warn("a join copy that missed a settle does not answer; giving up", "op", msg.Protocol(), "key", it.Key, "peer", rpc.ShortIDString(to.ID), "tries", tries, "err", err)
			} else {
				n.log.Info("a join copy that missed a settle has it now", "op", msg.Protocol(), "key", it.Key, "peer", rpc.ShortIDString(to.ID), "tries", tries)
			}
		})
	}
}

// untilAnsweredGiveUp bounds how long callUntilAnswered asks: well past
// the partitions the mesh is expected to ride out, after which a peer
// still silent is taken for gone (its peers take its work over).
const untilAnsweredGiveUp = 2 * time.Minute

// callUntilAnswered sends m to peer to, each try within d, until it
// answers (whatever it answers) or untilAnsweredGiveUp passes, on a fresh
// connection after each failure (a connection a cut left mute, the dial
// backoff of the cut) and backing off from 250 ms to 5 s. It returns the
// answer and the tries it took, or the last failure. For state another
// peer must not miss: join branch ends (pushResult) and join settles a
// copy missed (completeSettle).
func (n *Node) callUntilAnswered(ctx context.Context, to pack.Peer, m api.GuardRequest, d time.Duration) (api.GuardReply, int, error) {
	deadline := n.clock.Now().Add(untilAnsweredGiveUp)
	wait := 250 * time.Millisecond
	for try := 1; ; try++ {
		rep, err := n.guardCallRedial(ctx, to, m, d)
		if err == nil || n.clock.Now().After(deadline) || ctx.Err() != nil {
			return rep, try, err
		}
		n.log.Debug("no answer; asking again on a fresh connection", "op", m.Protocol(), "peer", rpc.ShortIDString(to.ID), "try", try, "err", err)
		if id, derr := peer.Decode(to.ID); derr == nil {
			n.redial(id)
		}
		select {
		case <-ctx.Done():
			return rep, try, ctx.Err()
		case <-n.clock.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// tookSet collects the peers that recorded a settle without refusing it.
type tookSet struct {
	mu  sync.Mutex
	got []tookAnswer
	// missed: peers whose call failed while another peer of the same item
	// answered (the item is settled without them).
	missed []tookAnswer
}

type tookAnswer struct {
	item int
	to   pack.Peer
}

// add records that peer to answered item without refusing (nil-safe).
func (t *tookSet) add(item int, to pack.Peer) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.got = append(t.got, tookAnswer{item, to})
}

// yield gives way to first: a receiver refused because first took the
// attempt before (G8, J6, J8) tells every peer that recorded it as the
// successor meanwhile to record first instead, all at once and within
// settleCallTimeout, before it answers the sender. Otherwise those peers
// would name this receiver to the sender's next try at first, and first
// would be refused naming this one, which holds nothing (two receivers
// naming each other for ever).
func (n *Node) yield(items []pack.Settle, attempt int, self, first string, took *tookSet) {
	if took == nil {
		return
	}
	took.mu.Lock()
	got := slices.Clone(took.got)
	took.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range got {
		it := items[a.item]
		var m api.GuardRequest
		switch it.Kind {
		case pack.SettleGuard:
			m = api.GuardRelease{Key: it.Key, Attempt: it.Attempt, By: first, Yield: self}
		case pack.SettleJoinForwarded:
			m = api.JoinForwarded{Key: it.Key, Epoch: it.Epoch, Actor: it.Actor, By: first, Yield: self}
		case pack.SettleBranchStarted:
			m = api.JoinBranch{Key: it.Key, Branch: it.Branch, Attempt: attempt, Holder: pack.Peer{ID: first}, Epoch: it.Epoch, Actor: it.Actor, Yield: self}
		default:
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := n.guardCallErr(n.ctx, a.to, m, settleCallTimeout); err != nil {
				n.log.Info("could not give way to the first successor", "peer", rpc.ShortIDString(a.to.ID), "first", rpc.ShortIDString(first), "err", err)
			}
		}()
	}
	wg.Wait()
}

// probeSettle asks the guardians named by the release items whether a
// release would be answered superseded (node/guard G6), without releasing
// anything, and returns errSuperseded if one says so. A join or an origin
// asks before it records a branch end or a completion, so that a
// superseded chain's is refused (I1), and releases the guardians (settle)
// only once it has recorded it: released guardians must never be left
// with nothing recorded. The probe says so (Recording): a guardian that
// answers it holds its re-route off until the release (node/guard G18).
// An item none of whose guardians answers is errUnsettled, as for settle:
// the sender tries again.
func (n *Node) probeSettle(ctx context.Context, items []pack.Settle) error {
	var probe []pack.Settle
	for _, it := range items {
		if it.Kind == pack.SettleGuard {
			probe = append(probe, it)
		}
	}
	if len(probe) == 0 {
		return nil
	}
	return n.settleRounds(ctx, probe, func(it pack.Settle, _ pack.Peer) api.GuardRequest {
		return api.GuardRelease{Key: it.Key, Attempt: it.Attempt, Probe: true, Recording: true}
	}, true, nil, nil)
}

// settleRounds sends msg(item) to every peer of every item, all at once;
// items that got no answer at all are tried again on fresh connections
// while the budget lasts. When this peer is itself one of an item's peers
// (it guards the step before, or keeps a copy of the join), it asks
// itself only once every item is settled by the others: its own answer
// does not settle an item that names other peers (it cannot tell whether
// they recorded another successor meanwhile), and asked first it would
// record this peer as the successor even when the hand-over is then
// refused as unsettled — two receivers refused that way, each recorded
// by its own copy, would then name each other as the first, for ever
// (join J8).
//
// settled, when set, marks items a peer not listed settled already (the
// backup whose copy rode the release, settleRiding): their peers are
// asked, but one that does not answer is missed, not waited for.
func (n *Node) settleRounds(ctx context.Context, items []pack.Settle, msg func(pack.Settle, pack.Peer) api.GuardRequest, probe bool, took *tookSet, settled []bool) error {
	type call struct {
		item int
		to   pack.Peer
	}
	self := n.selfID
	var calls, own []call
	answered := make([]bool, len(items))
	for i, it := range items {
		others := false
		for _, to := range it.Peers {
			if to.ID == self {
				own = append(own, call{i, to})
				continue
			}
			others = true
			calls = append(calls, call{i, to})
		}
		answered[i] = !others || (settled != nil && settled[i]) // settled by this peer's own answer alone, or before
	}
	deadline := n.settleDeadline(ctx)
	var superseded atomic.Bool
	var takenBy atomic.Value // string
	// held: items a guardian answered Pending (G13): another guardian of
	// the step is deciding whether to re-route it, so they need another
	// peer's answer even when Lenient.
	held := make([]bool, len(items))
	var heldMu sync.Mutex
	run := func(calls []call) []bool {
		failed := make([]bool, len(calls))
		within := n.settleCallWithin(deadline)
		var wg sync.WaitGroup
		for ci, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := msg(items[c.item], c.to)
				rep, err := n.guardCallErr(ctx, c.to, m, within)
				if err != nil {
					failed[ci] = true
					n.log.Debug("settle call failed", "op", m.Protocol(), "key", items[c.item].Key, "probe", probe, "peer", rpc.ShortIDString(c.to.ID), "err", err)
					return
				}
				if rep.Pending {
					// Nothing recorded there: as good as no answer.
					failed[ci] = true
					heldMu.Lock()
					held[c.item] = true
					heldMu.Unlock()
					n.log.Info("settle answered pending: another guardian of the step is deciding whether to re-route it", "op", m.Protocol(), "key", items[c.item].Key, "probe", probe, "peer", rpc.ShortIDString(c.to.ID))
					return
				}
				if !rep.Superseded {
					took.add(c.item, c.to)
				}
				if rep.Superseded {
					n.log.Info("settle answered superseded", "op", m.Protocol(), "probe", probe, "peer", rpc.ShortIDString(c.to.ID), "attempt", rep.Attempt, "taken_by", rpc.ShortIDString(rep.Holder.ID), "why", rep.Error)
					if rep.Holder.ID != "" {
						takenBy.Store(rep.Holder.ID)
					} else {
						superseded.Store(true)
					}
				}
			}()
		}
		wg.Wait()
		return failed
	}
	verdict := func() error {
		if superseded.Load() {
			return errSuperseded
		}
		if by, _ := takenBy.Load().(string); by != "" {
			return takenError{By: by}
		}
		// A cancelled caller (its work superseded, the node stopping) got
		// no answers: nothing is settled, so nothing may be acknowledged.
		return ctx.Err()
	}
	for round := 0; len(calls) > 0; round++ {
		failed := run(calls)
		if err := verdict(); err != nil {
			return err
		}
		for ci, c := range calls {
			if !failed[ci] {
				answered[c.item] = true
			}
		}
		var retry []call
		var silent []string
		for ci, c := range calls {
			if failed[ci] && !answered[c.item] && (!items[c.item].Lenient || held[c.item]) {
				retry = append(retry, c)
				silent = append(silent, rpc.ShortIDString(c.to.ID))
			} else if failed[ci] && took != nil {
				n.log.Info("settle call unanswered; the item was settled by another peer", "op", msg(items[c.item], c.to).Protocol(), "key", items[c.item].Key, "peer", rpc.ShortIDString(c.to.ID))
				took.mu.Lock()
				took.missed = append(took.missed, tookAnswer{c.item, c.to})
				took.mu.Unlock()
			}
		}
		if len(retry) == 0 {
			break
		}
		if round > 0 || n.clock.Until(deadline) < settleCallTimeout {
			n.log.Warn("settle unanswered", "probe", probe, "peers", silent)
			return fmt.Errorf("%w (%s)", errUnsettled, strings.Join(silent, ", "))
		}
		// A peer that answered Pending is kept: it answers pings. All at
		// once: each may wait a ping's timeout.
		var fresh sync.WaitGroup
		for _, c := range retry {
			fresh.Go(func() { n.freshConn(ctx, c.to) })
		}
		fresh.Wait()
		calls = retry
	}
	if len(own) > 0 {
		run(own)
		return verdict()
	}
	return nil
}

// freshConn drops the connections to a peer that did not answer a
// settle call in time and does not answer a ping either, so that the
// next call dials anew instead of waiting on a connection a partition
// left dead (no reset comes through a cut), and clears libp2p's dial
// backoff for it: dials that failed during the cut would otherwise fail
// the next call at once, and the peer that knows best (the primary that
// re-routed the step) would get no say.
func (n *Node) freshConn(ctx context.Context, to pack.Peer) {
	id, err := peer.Decode(to.ID)
	if err != nil || id == n.host.ID() {
		return
	}
	if n.host.Network().Connectedness(id) == network.Connected {
		if n.pingable(ctx, id) {
			return // alive and reachable, only slow
		}
		n.log.Info("dropping a connection that does not answer", "peer", rpc.ShortID(id))
	}
	n.redial(id)
}

// settleUntil settles items, trying again while they are unsettled; after
// UnsettledGiveUp it marks them Lenient (their guardians count as gone).
// It returns settle's last error otherwise (nil, errSuperseded, ctx's).
func (n *Node) settleUntil(ctx context.Context, attempt int, items []pack.Settle) error {
	items = slices.Clone(items)
	var unsettled unsettledClock
	wait := 500 * time.Millisecond
	for {
		err := n.settle(ctx, attempt, items, successor{})
		if !errors.Is(err, errUnsettled) {
			return err
		}
		unsettled.mark(n.clock.Now())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.clock.After(wait):
		}
		wait = min(wait*2, 4*time.Second)
		unsettled.maybeLenient(ctx, n, "", items)
	}
}

// rideStore is a backup guardian's copy sent with the release that
// settles the step before (settleMissing, api.GuardStoreRelease).
type rideStore struct {
	to    string
	store api.GuardStore
}

// errRideUnanswered says the backup whose copy rode the release never
// answered (or answered pending): nothing was released, and the copy may
// or may not be stored there (settleRiding).
var errRideUnanswered = errors.New("the backup sent its copy with the release did not answer")

// rideItem is the key and the guardians (other than self) of the step
// the settle releases, when items settle one step before and nothing
// else: the receiver prefers one of those guardians as its backup, so
// that its copy rides that guardian's release (rideStore). Empty when
// items settle anything else (join items, or several steps).
func rideItem(items []pack.Settle, self string) (string, []pack.Peer) {
	if len(items) != 1 || items[0].Kind != pack.SettleGuard {
		return "", nil
	}
	var peers []pack.Peer
	for _, g := range items[0].Peers {
		if g.ID != self {
			peers = append(peers, g)
		}
	}
	if len(peers) == 0 {
		return "", nil
	}
	return items[0].Key, peers
}

// settleRiding settles items (rideItem's one step) with the backup's copy
// riding the release of ride.to: that guardian first, alone, the copy and
// the release in one commit there (api.GuardStoreRelease); the step's
// other guardians only once it answered, so that no guardian of the step
// before is released before the copy of the step taken here is stored —
// as when the copy was stored apart, before the settle (a receiver killed
// after the releases leaves a backup that re-routes, I3). The item is
// settled by that first answer; the others are asked as any settle asks
// a second guardian (one that does not answer is missed). A first that
// never answers, or answers pending, released nothing here:
// errRideUnanswered, and the caller recruits another backup and settles
// without a ride.
func (n *Node) settleRiding(ctx context.Context, attempt int, items []pack.Settle, by successor, ride *rideStore, took *tookSet) error {
	self := n.self()
	it := items[0]
	first, rest := it, it
	first.Peers, rest.Peers = nil, nil
	for _, g := range it.Peers {
		if g.ID == ride.to {
			first.Peers = append(first.Peers, g)
		} else {
			rest.Peers = append(rest.Peers, g)
		}
	}
	// One round: a ride nobody answered falls back to another backup and
	// a plain settle, which must fit in what is left of the hand-over's
	// acceptSettleBudget (a second round on a fresh connection would take
	// most of it).
	rideCtx := withSettleDeadline(ctx, n.clock.Now().Add(settleCallTimeout))
	err := n.settleRounds(rideCtx, []pack.Settle{first}, func(it pack.Settle, _ pack.Peer) api.GuardRequest {
		r, _ := settleMsg(it, attempt, self, by).(api.GuardRelease)
		return api.GuardStoreRelease{Store: ride.store, Release: r}
	}, false, took, nil)
	switch {
	case errors.Is(err, errUnsettled):
		return fmt.Errorf("%w: %w", errRideUnanswered, err)
	case err != nil, len(rest.Peers) == 0:
		return err
	}
	return n.settleRounds(ctx, []pack.Settle{rest}, func(it pack.Settle, _ pack.Peer) api.GuardRequest {
		return settleMsg(it, attempt, self, by)
	}, false, took, []bool{true})
}

// speaks reports whether the peer id announced proto (identify).
func (n *Node) speaks(id peer.ID, proto string) bool {
	ps, err := n.host.Peerstore().SupportsProtocols(id, protocol.ID(proto))
	return err == nil && len(ps) > 0
}

// successor is the receiver that settles a hand-off it is taking: its
// peer ID and the held key of the work it takes. Joins and origins settle
// as no successor (the zero value).
type successor struct{ id, key string }

// successorOf is this peer settling as the receiver of p.
func (n *Node) successorOf(p *pack.Pack) successor {
	return successor{id: n.selfID, key: heldKey(p)}
}

// settleMsg is the guard operation that settles it.
func settleMsg(it pack.Settle, attempt int, self pack.Peer, by successor) api.GuardRequest {
	switch it.Kind {
	case pack.SettleJoinForwarded:
		return api.JoinForwarded{Key: it.Key, Epoch: it.Epoch, Actor: it.Actor, By: by.id}
	case pack.SettleBranchStarted:
		return api.JoinBranch{Key: it.Key, Branch: it.Branch, Attempt: attempt, Holder: self, Epoch: it.Epoch, Actor: it.Actor}
	case pack.SettleRerouted:
		return api.GuardRelease{Key: it.Key, Attempt: it.Attempt, Rerouted: true, Rerouter: it.Actor}
	}
	return api.GuardRelease{Key: it.Key, Attempt: it.Attempt, By: by.id, ByKey: by.key}
}

// guardCall sends one guard message to a peer (or serves it here when the
// peer is this one) within d, and returns the reply (Error set on
// failure).
func (n *Node) guardCall(ctx context.Context, to pack.Peer, m api.GuardRequest, d time.Duration) api.GuardReply {
	rep, err := n.guardCallErr(ctx, to, m, d)
	if err != nil {
		return api.GuardReply{Error: err.Error()}
	}
	return rep
}

// guardCallAll sends msg(p) to every peer at once, each within d, and
// returns the replies and the failures to get one, index by index.
func (n *Node) guardCallAll(ctx context.Context, peers []pack.Peer, msg func(pack.Peer) api.GuardRequest, d time.Duration) ([]api.GuardReply, []error) {
	replies := make([]api.GuardReply, len(peers))
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], errs[i] = n.guardCallErr(ctx, p, msg(p), d)
		}()
	}
	wg.Wait()
	return replies, errs
}

// guardCallErr is guardCall with the failure to get an answer (a bad
// peer ID, no connection, a timeout) as an error, apart from an answer
// that reports an error.
func (n *Node) guardCallErr(ctx context.Context, to pack.Peer, m api.GuardRequest, d time.Duration) (api.GuardReply, error) {
	id, err := peer.Decode(to.ID)
	if err != nil {
		return api.GuardReply{}, fmt.Errorf("bad peer id %q: %w", to.ID, err)
	}
	if id == n.host.ID() {
		return n.guardOp(id, m), nil
	}
	n.learnAddrs(id, to.Addrs)
	var rep api.GuardReply
	if err := n.calls.CallCBOR(ctx, id, m.Protocol(), m, &rep, d); err != nil {
		return api.GuardReply{}, err
	}
	return rep, nil
}

// guardCallRedial is guardCallErr that does not take libp2p's dial backoff
// for an answer: a call failed at once because dials to the peer failed
// a moment ago (during a cut that has healed since, say) clears the
// backoff and asks once more, within what is left of d. For messages that
// carry state another peer must not miss (join updates).
func (n *Node) guardCallRedial(ctx context.Context, to pack.Peer, m api.GuardRequest, d time.Duration) (api.GuardReply, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	rep, err := n.guardCallErr(ctx, to, m, d)
	if err == nil || !errors.Is(err, swarm.ErrDialBackoff) {
		return rep, err
	}
	if id, derr := peer.Decode(to.ID); derr == nil {
		n.clearDialBackoff(id)
	}
	return n.guardCallErr(ctx, to, m, d)
}

// releaseGuard serves a release of the guard copy key at attempt. Of a
// release and a re-route of the same copy, whichever this peer decides
// first wins (node/guard G1): a release that comes after a re-route was
// claimed (or after a newer attempt was stored or released) is answered
// Superseded. The copy leaves the journal before the answer (I4).
func (n *Node) releaseGuard(m api.GuardRelease) api.GuardReply {
	rep := n.stepGuardReply(m.Key, guard.Release{Attempt: m.Attempt, At: n.clock.Now().UTC(), Rerouted: m.Rerouted, Rerouter: m.Rerouter, By: m.By, ByKey: m.ByKey, Yield: m.Yield})
	n.log.Debug("guard release", "key", m.Key, "attempt", m.Attempt, "by", rpc.ShortIDString(m.By), "yield", rpc.ShortIDString(m.Yield),
		"rerouted", m.Rerouted, "rerouter", rpc.ShortIDString(m.Rerouter), "superseded", rep.Superseded, "taken_by", rpc.ShortIDString(rep.Holder.ID), "err", rep.Error)
	return rep
}
