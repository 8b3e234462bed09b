package node

import (
	"context"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/pack"
)

// Retention, in one paragraph: history does not grow without bound (and
// a replica record still running long after its workflow began asks its
// primary whether it ended, in case the primary's tell was lost). Every
// minute, guard release tombstones older than cancelMemory are forgotten
// (node/guard Prune); workflow records that ended before Config.Retention
// shrink to tombstones (node/origin O5: state, error and times only), and
// tombstones older than four retention periods are deleted; join copies
// created before the retention whose pattern moved on (or whose workflow
// ended, for a passive copy that never heard it) are deleted. Running work
// is never touched. bbolt does not shrink its file by itself: the journal
// is compacted when the node starts (journal.CompactIfSparse). The keys of
// work run here and handed on (handedon.go) are forgotten after
// handedOnMemory.

// pruneChunk is how many workflow records one retention transaction
// writes.
const pruneChunk = 512

// tombstoneRetentions is how many retention periods a workflow's tombstone
// outlives the end of the workflow.
const tombstoneRetentions = 4

// pruneLoop applies the retention every minute.
func (n *Node) pruneLoop(ctx context.Context) {
	tick := n.clock.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
		n.prune(ctx, n.clock.Now().UTC())
	}
}

// pruneCounts says what one pass of the retention removed.
type pruneCounts struct {
	guardMarks, workflowsShrunk, workflowsDeleted, joins, handedOn int
}

// prune applies the retention as of now.
func (n *Node) prune(ctx context.Context, now time.Time) pruneCounts {
	var pc pruneCounts
	before := now.Add(-cancelMemory)
	for _, g := range n.guards.all() {
		if g.Copy() == nil && g.Mark() != nil && g.Mark().At.Before(before) {
			n.stepGuardLogged(g.Key(), guard.Prune{Before: before})
			pc.guardMarks++
		}
	}
	n.unsettled.expire(now.Add(-handedOnMemory))
	n.silentPrimaries.set.expire(now.Add(-silenceKept))
	if k, err := n.pruneHandedOn(now.Add(-handedOnMemory)); err != nil {
		n.log.Error("retention: handed-on keys", "err", err)
	} else {
		pc.handedOn = k
	}
	cut := origin.Prune{Before: now.Add(-n.cfg.Retention), Forget: now.Add(-tombstoneRetentions * n.cfg.Retention)}
	var ended []string
	for _, w := range n.origins.all() {
		if !w.Running() {
			ended = append(ended, w.ID())
		} else if w.Role() == origin.RoleReplica && w.Status(false).Submitted.Before(now.Add(-relayFor)) {
			n.askPrimaryEnded(ctx, w)
		}
	}
	// One journal transaction (one sync) per chunk of records, not one per
	// record: the first pass after an upgrade may shrink a week of them.
	for lo := 0; lo < len(ended); lo += pruneChunk {
		written, deleted, err := n.origins.stepMany(ended[lo:min(lo+pruneChunk, len(ended))], cut, n.writeWorkflows)
		if err != nil {
			n.log.Error("retention: workflow records", "err", err)
			break
		}
		pc.workflowsShrunk += written
		pc.workflowsDeleted += deleted
	}
	for _, c := range n.joins.all() {
		m := c.cur.Load()
		switch {
		case m.Prunable(cut.Before, false):
		case m.Prunable(cut.Before, true) && n.workflowEnded(ctx, &pack.Pack{WorkflowID: m.WorkflowID(), Origin: m.Record().Origin}):
		default:
			continue
		}
		if n.pruneJoin(c) {
			pc.joins++
		}
	}
	if pc != (pruneCounts{}) {
		n.log.Info("retention", "guard_tombstones", pc.guardMarks, "workflows_shrunk", pc.workflowsShrunk,
			"workflow_tombstones_deleted", pc.workflowsDeleted, "joins_deleted", pc.joins, "handed_on_forgotten", pc.handedOn)
		n.touchActivity()
	}
	return pc
}

// askPrimaryEnded asks the primary of a replica record still running
// after relayFor whether the workflow ended: its tell of the end may have
// been lost while this peer was down (origin O3, from the replica's side).
func (n *Node) askPrimaryEnded(ctx context.Context, w *origin.Workflow) {
	primary := w.Primary()
	if primary.ID == "" {
		return
	}
	rep := n.guardCall(ctx, primary, api.OriginStatus{Key: w.ID()}, settleCallTimeout)
	if !rep.OK || !rep.Released || rep.Origin == nil {
		return
	}
	if _, err := n.stepOrigin(w.ID(), origin.CompletionFromPrimary{Msg: *rep.Origin, At: n.clock.Now().UTC()}); err != nil {
		n.log.Warn("replica: the end the primary told", "workflow", w.ID(), "err", err)
		return
	}
	n.log.Info("replica learnt the end from its primary", "workflow", w.ID())
}

// pruneJoin deletes a join copy the retention allows to go, under the
// copy's lock so that no step writes it back.
func (n *Node) pruneJoin(c *joinCopy) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pruned {
		return false
	}
	m := c.cur.Load()
	if err := n.journal.Delete(journal.BucketJoins, m.ID()); err != nil {
		n.log.Error("retention: delete join", "join", m.ID(), "err", err)
		return false
	}
	c.pruned = true
	n.joins.remove(m.ID(), c)
	if a, ok := m.Watching(); ok {
		n.unwatchIfIdle(a.ID)
	}
	return true
}
