package node

import (
	"context"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/pack"
)

// stashUnread returns the pack to hand on instead of p: without the
// outputs nobody ahead in it can name and without the trace entries
// nothing reads in the pack (pack.PlanStash), once every copy of the
// workflow's record stored them (node/origin O6) and when either weighs at
// least cfg.StashMin; otherwise p itself. A copy that does not store them
// (down, cut off, ended) leaves them in the pack: the next holder tries
// again. So a long chain hands on a pack that stops growing with its trace
// and, when its steps declare what they read, with its outputs,
// at the price of one round trip and one write at each origin copy every
// StashMin bytes.
func (n *Node) stashUnread(ctx context.Context, p *pack.Pack) *pack.Pack {
	if n.cfg.StashMin < 0 || len(p.Origin) == 0 {
		return p
	}
	next, s := p.PlanStash(n.cfg.StashMin)
	if s == nil {
		return p
	}
	start := n.clock.Now()
	replies, errs := n.guardCallAll(ctx, p.Origin, func(pack.Peer) api.GuardRequest {
		return api.OriginStash{Key: p.WorkflowID, Outputs: s.Outputs, Trace: s.Trace}
	}, replicateTimeout)
	ev := events.Event{Type: events.Stashed, Workflow: p.WorkflowID, Step: headPath(p), Attempt: p.Attempt,
		Outputs: len(s.Outputs), Outcome: events.OutcomeOK, Seconds: n.clock.Since(start).Seconds()}
	if s.Trace != nil {
		ev.TraceEntries = len(s.Trace.Entries)
	}
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
		n.log.Debug("outputs kept in the pack: an origin copy did not store them", "workflow", p.WorkflowID, "outputs", len(s.Outputs), "peer", ev.Peer, "err", ev.Reason)
		return p
	}
	return next
}
