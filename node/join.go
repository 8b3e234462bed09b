package node

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// joinRecord is the state a peer keeps for a FORK, FIRST or FAILOVER it
// split: the branches, the continuation after the pattern, the data as it
// was at the split, and the branch results received so far.
type joinRecord struct {
	ID         string                     `cbor:"1,keyasint"`
	WorkflowID string                     `cbor:"2,keyasint"`
	Kind       pack.FrameKind             `cbor:"3,keyasint"`
	Branches   []*wireWorkflow            `cbor:"4,keyasint"`
	Rest       *wireWorkflow              `cbor:"5,keyasint,omitempty"`
	Origin     []pack.Peer                `cbor:"6,keyasint"`
	Input      json.RawMessage            `cbor:"7,keyasint,omitempty"`
	Outputs    map[string]json.RawMessage `cbor:"8,keyasint,omitempty"`
	Trace      []pack.TraceEntry          `cbor:"9,keyasint,omitempty"`
	Frames     []pack.Frame               `cbor:"10,keyasint,omitempty"`
	Results    map[int]*branchResult      `cbor:"11,keyasint,omitempty"`
	// Next is the FAILOVER branch in progress.
	Next int `cbor:"12,keyasint"`
	// Done is set once the pattern's outcome is decided; OK and Error hold
	// it, Winners the branches whose outputs continue.
	Done    bool   `cbor:"13,keyasint"`
	OK      bool   `cbor:"14,keyasint"`
	Error   string `cbor:"15,keyasint,omitempty"`
	Winners []int  `cbor:"16,keyasint,omitempty"`
	// Forwarded is set once the continuation has been moved on.
	Forwarded bool      `cbor:"17,keyasint"`
	Created   time.Time `cbor:"18,keyasint"`
	// Replicas (on the primary) keep copies of this record.
	Replicas []pack.Peer `cbor:"19,keyasint,omitempty"`
	// Replica marks this copy as a replica of Primary's record; Active once
	// it took over (the primary went silent or a branch end reached it).
	Replica bool      `cbor:"20,keyasint,omitempty"`
	Active  bool      `cbor:"21,keyasint,omitempty"`
	Primary pack.Peer `cbor:"22,keyasint,omitempty"`
	// Moved marks a primary's copy handed over to Primary (a replica) when
	// this peer drained before a power cut, or taken over by it while this
	// peer was down: it never acts again, and branch ends reaching it are
	// refused so they go on to the new holder.
	Moved bool `cbor:"23,keyasint,omitempty"`
	// checking is set while a restarted primary asks its replicas whether
	// one took over; branch ends are refused meanwhile.
	checking bool
}

// acting reports whether this copy of the join decides and forwards.
func (j *joinRecord) acting() bool { return !j.Replica || j.Active }

type branchResult struct {
	OK      bool                       `cbor:"1,keyasint"`
	Error   string                     `cbor:"2,keyasint,omitempty"`
	Outputs map[string]json.RawMessage `cbor:"3,keyasint,omitempty"`
	Trace   []pack.TraceEntry          `cbor:"4,keyasint,omitempty"`
	Attempt int                        `cbor:"5,keyasint"`
}

func frameKind(k grammar.HeadKind) pack.FrameKind {
	switch k {
	case grammar.HeadFirst:
		return pack.FrameFirst
	case grammar.HeadFailover:
		return pack.FrameFailover
	}
	return pack.FrameFork
}

func kindName(k pack.FrameKind) string {
	switch k {
	case pack.FrameFirst:
		return "FIRST"
	case pack.FrameFailover:
		return "FAILOVER"
	}
	return "FORK"
}

func (n *Node) saveJoin(j *joinRecord) error {
	return n.journal.Put(journal.BucketJoins, j.ID, rpc.MustCBOR(j))
}

// startJoin makes this peer the join holder of the pattern at the head of p
// and sends its branches out (all at once, or the first for FAILOVER).
func (n *Node) startJoin(ctx context.Context, p *pack.Pack, head grammar.Head, rest *grammar.Workflow) {
	j := &joinRecord{
		ID:         newID("j"),
		WorkflowID: p.WorkflowID,
		Kind:       frameKind(head.Kind),
		Rest:       toWire(rest),
		Origin:     p.Origin,
		Input:      p.Input,
		Outputs:    copyOutputs(p.Outputs),
		Trace:      p.Trace,
		Frames:     p.Frames,
		Results:    map[int]*branchResult{},
		Created:    time.Now().UTC(),
	}
	for _, b := range head.Branches {
		j.Branches = append(j.Branches, toWire(b))
	}
	n.replicateJoin(ctx, j)
	n.mu.Lock()
	n.joins[j.ID] = j
	err := n.saveJoin(j)
	n.mu.Unlock()
	n.kickBeats()
	n.touchActivity()
	if err != nil {
		n.log.Error("journal join", "err", err)
	}
	n.log.Debug("join started", "workflow", p.WorkflowID, "join", j.ID, "kind", kindName(j.Kind), "branches", len(head.Branches))
	if j.Kind == pack.FrameFailover {
		n.startBranches(ctx, j, head.Branches[:1], 0)
		return
	}
	n.startBranches(ctx, j, head.Branches, 0)
}

// startBranches dispatches branches (numbered from first) of join j, each to
// a distinct peer where possible.
func (n *Node) startBranches(ctx context.Context, j *joinRecord, branches []*grammar.Workflow, first int) {
	used := map[peer.ID]bool{}
	for k, b := range branches {
		i := first + k
		frames := append(append([]pack.Frame{}, j.Frames...), pack.Frame{
			JoinID: j.ID, Kind: j.Kind, Branch: i, Holders: j.holders(n.self()),
		})
		bp := &pack.Pack{
			WorkflowID: j.WorkflowID,
			Origin:     j.Origin,
			Workflow:   b,
			Input:      j.Input,
			Outputs:    copyOutputs(j.Outputs),
			Frames:     frames,
		}
		n.dispatchAvoiding(ctx, bp, used)
	}
}

// dispatchAvoiding is dispatch for a branch: when its head is a service it
// goes to a peer not in used if possible, and the chosen peer joins used.
func (n *Node) dispatchAvoiding(ctx context.Context, p *pack.Pack, used map[peer.ID]bool) {
	head, rest, err := grammar.Peel(p.Workflow, n.selector(p))
	if err != nil || head.Kind != grammar.HeadService {
		n.spawn(func(ctx context.Context) { n.dispatch(ctx, p) })
		return
	}
	steps := []grammar.Step{head.Service}
	if rest != nil {
		steps = append(steps, rest.Steps...)
	}
	p.Workflow = &grammar.Workflow{Steps: steps}
	target, err := n.handoffExcluding(ctx, p, used, nil)
	if err == nil {
		used[target] = true
		n.guardHandedOff(p, target, nil)
		return
	}
	if ctx.Err() != nil || err == errCancelled {
		return
	}
	msg := fmt.Sprintf("step %s (path %s): %v", head.Service.Name, head.Service.Path, err)
	n.spawn(func(ctx context.Context) {
		if ferr := n.finishBranch(ctx, p, false, msg); ferr != nil {
			n.log.Error("report failure", "workflow", p.WorkflowID, "err", ferr)
		}
	})
}

func (n *Node) handleDeliver(ctx context.Context, from peer.ID, req []byte) []byte {
	var d api.Delivery
	if err := rpc.Dec.Unmarshal(req, &d); err != nil {
		return rpc.AckBytes(api.CodeBadPack, "bad delivery: "+err.Error())
	}
	n.mu.Lock()
	j, ok := n.joins[d.JoinID]
	moved := ok && j.Moved
	checking := ok && j.checking
	takeOver := ok && j.Replica && !j.Active && !moved
	n.mu.Unlock()
	if moved {
		return rpc.AckBytes(api.CodeDraining, fmt.Sprintf("peer %s handed join %s over to %s", rpc.ShortID(n.host.ID()), d.JoinID, rpc.ShortIDString(j.Primary.ID)))
	}
	if checking {
		return rpc.AckBytes(api.CodeInternal, fmt.Sprintf("peer %s restarted and is asking its replicas about join %s; try later", rpc.ShortID(n.host.ID()), d.JoinID))
	}
	if takeOver {
		// A branch end could not reach the primary: this replica acts now.
		n.takeOverJoin(ctx, j, "a branch end reached the replica")
	}
	if !n.onDelivery(d) {
		return rpc.AckBytes(api.CodeInternal, fmt.Sprintf("peer %s holds no join %s", rpc.ShortID(n.host.ID()), d.JoinID))
	}
	return rpc.AckBytes("", "")
}

// onDelivery records a branch result and, when it decides the pattern,
// moves the continuation on. It reports whether this peer holds the join.
func (n *Node) onDelivery(d api.Delivery) bool {
	n.mu.Lock()
	j, ok := n.joins[d.JoinID]
	if !ok || j.Moved || j.checking {
		n.mu.Unlock()
		return false
	}
	if j.Results == nil {
		j.Results = map[int]*branchResult{} // a record read back from the journal
	}
	if prev, seen := j.Results[d.Branch]; j.Done || (seen && prev.Attempt >= d.Attempt) {
		n.mu.Unlock()
		return true // duplicate or late: already counted
	}
	j.Results[d.Branch] = &branchResult{OK: d.OK, Error: d.Error, Outputs: d.Outputs, Trace: d.Trace, Attempt: d.Attempt}
	var startNext bool
	var cancelOthers []int
	total := len(j.Branches)
	switch j.Kind {
	case pack.FrameFork:
		if !d.OK {
			j.Done, j.OK = true, false
			j.Error = fmt.Sprintf("FORK branch %d failed: %s", d.Branch+1, d.Error)
			cancelOthers = others(total, d.Branch)
		} else if len(j.Results) == total {
			j.Done, j.OK = true, true
			for i := range total {
				j.Winners = append(j.Winners, i)
			}
		}
	case pack.FrameFirst:
		if d.OK {
			j.Done, j.OK, j.Winners = true, true, []int{d.Branch}
			cancelOthers = others(total, d.Branch)
		} else if len(j.Results) == total {
			j.Done, j.OK = true, false
			j.Error = "every FIRST branch failed: " + branchErrors(j)
		}
	case pack.FrameFailover:
		if d.OK {
			j.Done, j.OK, j.Winners = true, true, []int{d.Branch}
		} else if j.Next+1 < total {
			j.Next++
			startNext = true
		} else {
			j.Done, j.OK = true, false
			j.Error = "every FAILOVER branch failed: " + branchErrors(j)
		}
	}
	if err := n.saveJoin(j); err != nil {
		n.log.Error("journal join", "join", j.ID, "err", err)
	}
	done, next := j.Done, j.Next
	acting := j.acting()
	replicas := append([]pack.Peer{}, j.Replicas...)
	n.mu.Unlock()
	if !acting {
		return true // a passive replica only records
	}
	// The replicas learn the result before the sender hears the ack.
	for _, r := range replicas {
		n.callGuard(n.ctx, r, api.GuardMsg{Op: api.GuardJoinUpdate, Key: j.ID, Delivery: &d})
	}

	if len(cancelOthers) > 0 {
		n.publishCancel(cancelMsg{WorkflowID: j.WorkflowID, JoinID: j.ID, Branches: cancelOthers})
	}
	switch {
	case startNext:
		n.spawn(func(ctx context.Context) {
			b, err := j.Branches[next].workflow()
			if err != nil {
				n.log.Error("failover branch", "join", j.ID, "err", err)
				return
			}
			n.startBranches(ctx, j, []*grammar.Workflow{b}, next)
		})
	case done:
		n.spawn(func(ctx context.Context) { n.forwardJoin(ctx, j) })
	}
	return true
}

func others(total, except int) []int {
	var out []int
	for i := range total {
		if i != except {
			out = append(out, i)
		}
	}
	return out
}

func branchErrors(j *joinRecord) string {
	var keys []int
	for k := range j.Results {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("branch %d: %s", k+1, j.Results[k].Error))
	}
	return strings.Join(parts, "; ")
}

// forwardJoin moves a decided pattern on: the merged data continues with the
// residual after the pattern, or the failure goes up a level.
func (n *Node) forwardJoin(ctx context.Context, j *joinRecord) {
	n.mu.Lock()
	p := &pack.Pack{
		WorkflowID: j.WorkflowID,
		Origin:     j.Origin,
		Input:      j.Input,
		Outputs:    copyOutputs(j.Outputs),
		Trace:      append([]pack.TraceEntry{}, j.Trace...),
		Frames:     j.Frames,
	}
	var keys []int
	for k := range j.Results {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		p.Trace = append(p.Trace, j.Results[k].Trace...)
	}
	for _, w := range j.Winners {
		if r := j.Results[w]; r != nil {
			for label, out := range r.Outputs {
				p.Outputs[label] = out
			}
		}
	}
	ok, msg := j.OK, j.Error
	n.mu.Unlock()

	rest, err := j.Rest.workflow()
	if err != nil {
		ok, msg = false, err.Error()
	}
	if !ok {
		if err := n.finishBranch(ctx, p, false, msg); err != nil {
			return
		}
	} else if rest == nil {
		if err := n.finishBranch(ctx, p, true, ""); err != nil {
			return
		}
	} else {
		p.Workflow = rest
		n.dispatch(ctx, p)
		if ctx.Err() != nil {
			return
		}
	}
	n.mu.Lock()
	j.Forwarded = true
	if err := n.saveJoin(j); err != nil {
		n.log.Error("journal join", "join", j.ID, "err", err)
	}
	replicas := append([]pack.Peer{}, j.Replicas...)
	primary := j.Primary
	replica := j.Replica
	n.mu.Unlock()
	n.kickBeats()
	n.touchActivity()
	for _, r := range replicas {
		n.callGuard(ctx, r, api.GuardMsg{Op: api.GuardJoinDone, Key: j.ID})
	}
	if replica {
		n.unwatchIfIdle(primary.ID)
	}
}

// holders lists the peers a branch end may deliver to: the primary (self),
// then its replicas.
func (j *joinRecord) holders(self pack.Peer) []pack.Peer {
	return append([]pack.Peer{self}, j.Replicas...)
}

// replicateJoin stores a copy of a new join record at a peer in another
// zone, so the peer waiting at SYNC is not a single point of loss.
func (n *Node) replicateJoin(ctx context.Context, j *joinRecord) {
	r, ok := n.pickGuardian(map[peer.ID]bool{n.host.ID(): true}, n.cfg.Zone)
	if !ok {
		return
	}
	cp := *j
	cp.Replica, cp.Primary, cp.Replicas = true, n.self(), nil
	ref := n.peerRef(r)
	if rep := n.callGuard(ctx, ref, api.GuardMsg{Op: api.GuardJoin, Key: j.ID, Record: rpc.MustCBOR(&cp)}); rep.OK {
		j.Replicas = []pack.Peer{ref}
	}
}

// callGuard sends one guard message and returns the reply (zero on error).
func (n *Node) callGuard(ctx context.Context, to pack.Peer, m api.GuardMsg) api.GuardReply {
	id, err := peer.Decode(to.ID)
	if err != nil {
		return api.GuardReply{}
	}
	n.learnAddrs(id, to.Addrs)
	var rep api.GuardReply
	if err := rpc.CallCBOR(ctx, n.host, id, api.ProtoGuard, m, &rep, n.cfg.StreamTimeout); err != nil {
		return api.GuardReply{Error: err.Error()}
	}
	return rep
}

// takeOverJoin makes a replica act for a join whose primary is gone.
func (n *Node) takeOverJoin(ctx context.Context, j *joinRecord, why string) {
	n.mu.Lock()
	if !j.Replica || j.Active || j.Forwarded || j.Moved {
		n.mu.Unlock()
		return
	}
	j.Active = true
	_ = n.saveJoin(j)
	done := j.Done
	n.mu.Unlock()
	n.log.Warn("taking over join", "join", j.ID, "workflow", j.WorkflowID, "why", why, "done", done)
	if done {
		n.forwardJoin(ctx, j)
	}
}

// joinReplicaOp serves the join-replica guard operations.
func (n *Node) joinReplicaOp(from peer.ID, m api.GuardMsg) api.GuardReply {
	switch m.Op {
	case api.GuardJoin:
		var j joinRecord
		if err := rpc.Dec.Unmarshal(m.Record, &j); err != nil {
			return api.GuardReply{Error: "bad join record: " + err.Error()}
		}
		j.Replica, j.Active = true, false
		if j.Results == nil {
			j.Results = map[int]*branchResult{}
		}
		n.mu.Lock()
		if _, exists := n.joins[j.ID]; !exists {
			n.joins[j.ID] = &j
			_ = n.saveJoin(&j)
		}
		n.mu.Unlock()
		n.learnAddrs(from, j.Primary.Addrs)
		n.watchHolder(from)
		return api.GuardReply{OK: true}
	case api.GuardJoinUpdate:
		if m.Delivery == nil {
			return api.GuardReply{Error: "join update without a delivery"}
		}
		if !n.onDelivery(*m.Delivery) {
			return api.GuardReply{Error: "no replica of join " + m.Key}
		}
		return api.GuardReply{OK: true}
	case api.GuardJoinDone:
		n.mu.Lock()
		j, ok := n.joins[m.Key]
		if ok && !j.Active {
			j.Forwarded = true
			_ = n.saveJoin(j)
		}
		n.mu.Unlock()
		if ok {
			n.unwatchIfIdle(from.String())
		}
		return api.GuardReply{OK: true}
	case api.GuardJoinHandover:
		return n.joinHandoverOp(from, m)
	case api.GuardJoinStatus:
		n.mu.Lock()
		defer n.mu.Unlock()
		j, ok := n.joins[m.Key]
		return api.GuardReply{OK: true, Known: ok, Active: ok && j.Active}
	}
	return api.GuardReply{Error: "unknown join operation " + m.Op}
}
