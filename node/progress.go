package node

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// Progress reports: every step attempt that ends is reported
// to its workflow's origin, for `bedwe status` and the progress of
// `bedwe submit --wait`. One stream per step to the origin was most of a
// stream a hop (0.8 per step on an 8-node testnet); so a node gathers the
// reports for one origin for up to progressFlush and sends them in one
// api.ProgressReport. Progress is advisory: the completion carries the
// whole trace and the origin recomputes the step count from it (origin
// package), so a report that is late, or lost with its sender, changes no
// result. A report to the origin on this very node is applied at once.

// progressFlush is how long reports for one origin are gathered before
// they are sent; progressBatchMax sends at once when that many wait.
const (
	progressFlush    = 250 * time.Millisecond
	progressBatchMax = 256
)

// progressOutbox gathers progress reports per origin list (the workflow's
// primary origin, then its replicas: the report goes to the first that
// takes it).
type progressOutbox struct {
	mu      sync.Mutex
	pending map[string]*progressBatch
}

type progressBatch struct {
	origins []pack.Peer
	events  []api.WorkflowEvent
	full    chan struct{} // closed when the batch reaches progressBatchMax
}

func newProgressOutbox() *progressOutbox {
	return &progressOutbox{pending: map[string]*progressBatch{}}
}

// add queues e for origins; it returns the batch when e opened it (the
// caller then schedules its flush).
func (o *progressOutbox) add(origins []pack.Peer, e api.WorkflowEvent) (key string, opened *progressBatch) {
	ids := make([]string, len(origins))
	for i, p := range origins {
		ids[i] = p.ID
	}
	key = strings.Join(ids, ",")
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.pending[key]
	if !ok {
		b = &progressBatch{origins: origins, full: make(chan struct{})}
		o.pending[key] = b
		opened = b
	}
	b.events = append(b.events, e)
	if len(b.events) == progressBatchMax {
		close(b.full)
	}
	return key, opened
}

// take removes and returns the batch of key.
func (o *progressOutbox) take(key string) *progressBatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.pending[key]
	delete(o.pending, key)
	return b
}

// reportEvent tells the origin that a step attempt ended (best effort):
// at once when this node is the origin, else in the next batch for it.
func (n *Node) reportEvent(p *pack.Pack, e pack.TraceEntry) {
	if len(p.Origin) == 0 {
		return
	}
	we := api.WorkflowEvent{WorkflowID: p.WorkflowID, Event: e}
	if p.Origin[0].ID == n.selfID && n.applyProgress(we) == nil {
		return
	}
	key, opened := n.outbox.add(p.Origin, we)
	if opened == nil {
		return // a flush is scheduled
	}
	n.spawn(func(ctx context.Context) {
		t := n.clock.NewTimer(progressFlush)
		defer t.Stop()
		select {
		case <-t.Chan():
		case <-opened.full:
		case <-ctx.Done():
			return
		}
		n.sendProgress(ctx, n.outbox.take(key))
	})
}

// sendProgress sends b to the first of its origins that takes it.
func (n *Node) sendProgress(ctx context.Context, b *progressBatch) {
	if b == nil {
		return
	}
	msg := api.ProgressReport{Events: b.events}
	for _, o := range b.origins {
		if o.ID == n.selfID {
			if n.applyProgressReport(msg) {
				return
			}
			continue
		}
		id, err := peer.Decode(o.ID)
		if err != nil {
			continue
		}
		n.learnAddrs(id, o.Addrs)
		var ack api.Ack
		if err := n.calls.CallCBOR(ctx, id, api.ProtoOriginProgress, msg, &ack, 2*time.Second); err == nil && ack.OK {
			return
		}
	}
}

// handleProgress serves api.ProtoOriginProgress: a batch of progress
// reports, each applied to this peer's record of its workflow. It is
// acknowledged when this peer knows every workflow named (primary or
// replica), else refused, so the sender tries the next origin.
func (n *Node) handleProgress(_ context.Context, _ peer.ID, req []byte) []byte {
	var msg api.ProgressReport
	if err := rpc.Dec.Unmarshal(req, &msg); err != nil {
		return rpc.AckBytes(api.CodeBadPack, "bad progress report: "+err.Error())
	}
	if !n.applyProgressReport(msg) {
		return rpc.AckBytes(api.CodeInternal, "peer "+rpc.ShortID(n.host.ID())+" does not know every workflow reported")
	}
	return rpc.AckBytes("", "")
}

// applyProgressReport applies every event of msg; false when one of them
// names a workflow this peer has no record of.
func (n *Node) applyProgressReport(msg api.ProgressReport) bool {
	all := true
	for _, e := range msg.Events {
		if n.applyProgress(e) != nil {
			all = false
		}
	}
	return all
}

// applyProgress applies one progress report to this peer's record of the
// workflow (primary or replica).
func (n *Node) applyProgress(e api.WorkflowEvent) error {
	return n.completeHere(api.OriginMsg{WorkflowID: e.WorkflowID, Event: &e.Event})
}
