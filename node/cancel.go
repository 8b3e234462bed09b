package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/bedwe/bedwe/pack"
)

// cancelMsg asks every peer to stop work of a workflow: all of it, or only
// the listed branches of one join (the losers of a FIRST, the siblings of a
// failed FORK branch).
type cancelMsg struct {
	WorkflowID string `json:"workflow_id"`
	JoinID     string `json:"join_id,omitempty"`
	Branches   []int  `json:"branches,omitempty"`
}

// cancelMemory is how long a peer remembers a cancellation, refusing packs
// of cancelled work that were still in flight.
const cancelMemory = 30 * time.Minute

// activeStep is a step running here, with the means to stop it.
type activeStep struct {
	p      *pack.Pack
	cancel context.CancelFunc
}

func (n *Node) startCancelTopic(ctx context.Context) error {
	t, err := n.ps.Join("/bedwe/" + n.cfg.Network + "/cancel/1")
	if err != nil {
		return fmt.Errorf("node: join cancel topic: %w", err)
	}
	n.cancels = t
	sub, err := t.Subscribe()
	if err != nil {
		return fmt.Errorf("node: subscribe to cancel topic: %w", err)
	}
	go func() {
		for {
			msg, err := sub.Next(ctx)
			if err != nil {
				return
			}
			var c cancelMsg
			if len(msg.Data) > 64<<10 || json.Unmarshal(msg.Data, &c) != nil || c.WorkflowID == "" {
				continue
			}
			n.applyCancel(c)
		}
	}()
	return nil
}

// publishCancel applies c here and tells every other peer.
func (n *Node) publishCancel(c cancelMsg) {
	n.applyCancel(c)
	data, _ := json.Marshal(c)
	if err := n.cancels.Publish(n.ctx, data); err != nil && n.ctx.Err() == nil {
		n.log.Warn("publish cancellation", "workflow", c.WorkflowID, "err", err)
	}
}

func cancelKeys(c cancelMsg) []string {
	if c.JoinID == "" {
		return []string{c.WorkflowID}
	}
	var keys []string
	for _, b := range c.Branches {
		keys = append(keys, c.WorkflowID+"|"+c.JoinID+"|"+strconv.Itoa(b))
	}
	return keys
}

// applyCancel remembers the cancellation and stops matching running steps
// (their processes are killed through the context).
func (n *Node) applyCancel(c cancelMsg) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock.Now()
	for k, at := range n.cancelled {
		if now.Sub(at) > cancelMemory {
			delete(n.cancelled, k)
		}
	}
	for _, k := range cancelKeys(c) {
		n.cancelled[k] = now
	}
	for _, a := range n.active {
		if n.cancelledLocked(a.p) {
			a.cancel()
		}
	}
}

func (n *Node) isCancelled(p *pack.Pack) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cancelledLocked(p)
}

func (n *Node) cancelledLocked(p *pack.Pack) bool {
	if _, ok := n.cancelled[p.WorkflowID]; ok {
		return true
	}
	for _, f := range p.Frames {
		if _, ok := n.cancelled[p.WorkflowID+"|"+f.JoinID+"|"+strconv.Itoa(f.Branch)]; ok {
			return true
		}
	}
	return false
}

// track registers a running step so cancellations can stop it.
func (n *Node) track(ctx context.Context, p *pack.Pack) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	key := newID("a")
	n.mu.Lock()
	n.active[key] = &activeStep{p: p, cancel: cancel}
	already := n.cancelledLocked(p)
	n.mu.Unlock()
	if already {
		cancel()
	}
	return ctx, func() {
		n.mu.Lock()
		delete(n.active, key)
		n.mu.Unlock()
		cancel()
	}
}

// learnAddrs adds addresses carried in a pack for a peer we may not have
// heard from on pubsub.
func (n *Node) learnAddrs(id peer.ID, addrs []string) {
	var ms []ma.Multiaddr
	for _, a := range addrs {
		if m, err := ma.NewMultiaddr(a); err == nil && !slices.ContainsFunc(ms, m.Equal) {
			ms = append(ms, m)
		}
	}
	if len(ms) > 0 {
		n.host.Peerstore().AddAddrs(id, ms, 6*time.Hour)
	}
}
