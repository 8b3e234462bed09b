package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/bulkhead"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/pack"
)

// Capacity, in one paragraph: a node runs at most Config.MaxConcurrent
// steps at once, a service declaring max_concurrent at most that many,
// and lets at most Config.QueueLength accepted steps wait for a slot
// beyond those (package node/bulkhead). accept refuses a hand-off beyond
// that with api.CodeBusy before journaling anything; the sender tries
// another peer and, while every refusal is busy, keeps trying (a busy peer
// is not a failed one: its circuit breaker is untouched). Presence announces the
// free slots and its room, and peer choice prefers peers with room.
// A submission is accepted durably or refused: beyond Config.MaxWorkflows
// running workflows this node is the origin of, it is refused as busy.

// capacityPokeEvery bounds how often a change of capacity (full, or free
// again) brings the next presence announcement forward.
const capacityPokeEvery = 250 * time.Millisecond

// newBulkhead makes the node's bulkhead from the configuration.
func (n *Node) newBulkhead() error {
	b, err := bulkhead.New(n.cfg.MaxConcurrent, n.cfg.QueueLength, func(filledOrFreed bool) {
		// Free slots and room are announced: every change is one.
		n.presenceMayChange()
		if filledOrFreed {
			n.capacityChanged()
		}
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.bulk = b
	return nil
}

// capacityChanged brings the next presence announcement forward when the
// node fills up or frees up, at most every capacityPokeEvery; a change
// within that time is announced at its end (the last state counts).
func (n *Node) capacityChanged() {
	now := n.clock.Now().UnixNano()
	last := n.capacityPoked.Load()
	if wait := last + int64(capacityPokeEvery) - now; wait > 0 {
		if n.capacityLater.CompareAndSwap(false, true) {
			n.clock.AfterFunc(time.Duration(wait), func() {
				n.capacityLater.Store(false)
				n.capacityChanged()
			})
		}
		return
	}
	if !n.capacityPoked.CompareAndSwap(last, now) {
		return
	}
	select {
	case n.announceNow <- struct{}{}:
	default:
	}
}

// admitStep reserves a place for p before accept journals it. It returns
// a refusal (busy) when the node is full, else the function that gives the
// place back if accept does not take p after all (a no-op when p already
// held one: the same step handed over again).
func (n *Node) admitStep(p *pack.Pack) (giveBack func(), refusal *api.Ack) {
	key := heldKey(p)
	added, ok := n.bulk.Admit(key)
	if !ok {
		s := n.bulk.Stats()
		return nil, &api.Ack{Code: api.CodeBusy, Error: fmt.Sprintf("peer %s is busy: %d steps running (limit %d) and %d waiting (queue %d beyond the limit); try another peer",
			rpc.ShortID(n.host.ID()), s.Running, s.Limit, s.Queued, s.Queue)}
	}
	if !added {
		return func() {}, nil
	}
	return func() { n.bulk.Leave(key) }, nil
}

// acquireSlot waits for an execution slot for one attempt of p's head
// (svc): its service's, then the node's. The error wraps errCancelled when
// ctx ended first.
func (n *Node) acquireSlot(ctx context.Context, p *pack.Pack, svc service.Service) (func(), error) {
	group, limit := service.Concurrency(svc)
	release, err := n.bulk.Acquire(ctx, heldKey(p), group, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCancelled, err)
	}
	return release, nil
}

// busyBackoff is how long a sender waits, after round rounds of busy
// refusals from every candidate, before trying them again: 50 ms doubling
// to 1 s, jittered (half to all of it) so refused senders do not return
// together.
func (n *Node) busyBackoff(round int) time.Duration {
	ceil := min(50*time.Millisecond<<min(round, 5), time.Second)
	return ceil/2 + n.rand.DurationN(ceil/2+1)
}

// errBusy marks a refusal because this node is at a limit (api.CodeBusy).
var errBusy = errors.New("busy")

// admitWorkflow reserves a place among the running workflows this node is
// the origin of, for a submission; done gives it back once the submission
// is recorded (it then counts as running) or failed.
func (n *Node) admitWorkflow() (done func(), err error) {
	n.submitMu.Lock()
	defer n.submitMu.Unlock()
	running := n.submitting
	for _, w := range n.origins.all() {
		if w.Role() == origin.RolePrimary && w.State() == origin.StateRunning {
			running++
		}
	}
	if running >= n.cfg.MaxWorkflows {
		return nil, fmt.Errorf("%w: peer %s is the origin of %d running workflows (limit %d, --max-workflows): submit again later or to another peer",
			errBusy, rpc.ShortID(n.host.ID()), running, n.cfg.MaxWorkflows)
	}
	n.submitting++
	return func() {
		n.submitMu.Lock()
		n.submitting--
		n.submitMu.Unlock()
	}, nil
}

// capacity is what presence announces of the bulkhead.
func (n *Node) capacity() (limit, free, room int) {
	s := n.bulk.Stats()
	return s.Limit, s.Free(), s.Room()
}
