package node

import (
	"context"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/pack"
)

// stashOutputs returns p without the outputs nobody ahead in it can name
// (pack.Droppable), once every copy of the workflow's record stored them
// (node/origin O6), when they weigh at least cfg.StashMin; otherwise p
// itself. A copy that does not store them (down, cut off, ended) leaves
// them in the pack: the next holder tries again. So a chain of steps that
// declare what they read hands on a pack that stops growing with every
// output (issue 14), at the price of one round trip and one write at each
// origin copy every StashMin bytes of outputs.
func (n *Node) stashOutputs(ctx context.Context, p *pack.Pack) *pack.Pack {
	if n.cfg.StashMin < 0 || len(p.Origin) == 0 {
		return p
	}
	drop := p.Droppable(n.cfg.StashMin)
	if len(drop) == 0 {
		return p
	}
	start := time.Now()
	replies, errs := n.guardCallAll(ctx, p.Origin, func(pack.Peer) api.GuardRequest {
		return api.OriginStash{Key: p.WorkflowID, Outputs: drop}
	}, replicateTimeout)
	ev := events.Event{Type: events.Stashed, Workflow: p.WorkflowID, Step: headPath(p), Attempt: p.Attempt,
		Branch: len(drop), Outcome: events.OutcomeOK, Seconds: time.Since(start).Seconds()}
	for i, rep := range replies {
		if errs[i] != nil {
			ev.Outcome, ev.Peer, ev.Reason = events.OutcomeError, p.Origin[i].ID, errs[i].Error()
			break
		}
		if !rep.OK {
			ev.Outcome, ev.Peer, ev.Reason = events.OutcomeRefused, p.Origin[i].ID, rep.Error
			break
		}
	}
	n.ev.Emit(ev)
	if ev.Outcome != events.OutcomeOK {
		n.log.Debug("outputs kept in the pack: an origin copy did not store them", "workflow", p.WorkflowID, "outputs", len(drop), "peer", ev.Peer, "err", ev.Reason)
		return p
	}
	return p.WithoutStashed(drop)
}
