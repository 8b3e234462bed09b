package node

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// submitStep stands for the origin's dispatch of the first pack in journal
// and guard keys (no step path is a word).
const submitStep = "submit"

// recentEvents is how many step attempts a status shows.
const recentEvents = 8

// workflowRecord is the origin's record of a submitted workflow.
type workflowRecord struct {
	Status api.Status `cbor:"1,keyasint"`
	Source string     `cbor:"2,keyasint"`
	// Replicas (on the origin) keep copies of this record; Replica marks a
	// copy held for another origin.
	Replicas []pack.Peer `cbor:"3,keyasint,omitempty"`
	Replica  bool        `cbor:"4,keyasint,omitempty"`
	// Primary is the origin a replica copies (set on replicas).
	Primary pack.Peer `cbor:"5,keyasint,omitempty"`
}

func fullAddrs(p pack.Peer) []string {
	var out []string
	for _, a := range p.Addrs {
		out = append(out, a+"/p2p/"+p.ID)
	}
	return out
}

func (n *Node) saveWorkflow(rec *workflowRecord) error {
	return n.journal.Put(journal.BucketWorkflows, rec.Status.ID, rpc.MustCBOR(rec))
}

// Submit parses and checks source, records this peer as the workflow's
// origin, and starts it. The returned status carries the new workflow ID.
func (n *Node) Submit(fileName, source string, input json.RawMessage) (api.Status, error) {
	w, err := grammar.Parse(fileName, []byte(source))
	if err != nil {
		return api.Status{}, err
	}
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if !json.Valid(input) {
		return api.Status{}, fmt.Errorf("the workflow input is not valid JSON")
	}
	grammar.AssignPaths(w)
	services, _, _ := grammar.Stats(w)
	rec := &workflowRecord{
		Status: api.Status{
			ID:         newID("wf"),
			State:      api.StateRunning,
			Submitted:  time.Now().UTC(),
			StepsTotal: services,
			Origin:     n.host.ID().String(),
		},
		Source: source,
	}
	p := &pack.Pack{
		WorkflowID: rec.Status.ID,
		Origin:     []pack.Peer{n.self()},
		Workflow:   w,
		Input:      input,
		Outputs:    map[string]json.RawMessage{},
	}
	// k replicas of the record (each also a guardian of the first pack),
	// one zone each where possible: losing the origin and one replica
	// loses neither the workflow nor its result (I3). The first replica
	// is the first pack's primary guardian, the others its backups.
	rec.Status.Origins = fullAddrs(n.self())
	st := &held.Record{Pack: p, DispatchOnly: true, Key: journal.PackKey(p.WorkflowID, submitStep, 0), GuardKey: journal.StepKey(p.WorkflowID, submitStep)}
	replicas := n.pickReplicas(n.cfg.JoinReplicas, map[peer.ID]bool{n.host.ID(): true})
	for _, ref := range replicas {
		p.Origin = append(p.Origin, ref)
		rec.Replicas = append(rec.Replicas, ref)
		rec.Status.Origins = append(rec.Status.Origins, fullAddrs(ref)...)
	}
	raw, err := pack.Encode(p)
	if err != nil {
		return api.Status{}, fmt.Errorf("encode the first pack: %w", err)
	}
	for i, ref := range replicas {
		cp := *rec
		cp.Replica, cp.Replicas, cp.Primary = true, nil, n.self()
		if rep := n.callGuard(n.ctx, ref, api.GuardMsg{Op: api.GuardOrigin, Key: rec.Status.ID, Record: rpc.MustCBOR(&cp)}); !rep.OK {
			n.log.Warn("origin replica refused", "peer", rpc.ShortIDString(ref.ID), "err", rep.Error)
			continue
		}
		store := api.GuardMsg{Op: api.GuardStore, Key: st.GuardKey, Pack: raw, Holder: n.self()}
		if i > 0 && len(st.Guardians) > 0 {
			store.Primary = st.Guardians[0]
		}
		if rep := n.callGuard(n.ctx, ref, store); rep.OK {
			st.Guardians = append(st.Guardians, ref)
		}
	}
	n.mu.Lock()
	n.workflows[rec.Status.ID] = rec
	err = n.saveWorkflow(rec)
	n.mu.Unlock()
	if err != nil {
		return api.Status{}, fmt.Errorf("journal workflow: %w", err)
	}
	if err := n.hold(*st); err != nil {
		return api.Status{}, fmt.Errorf("journal workflow: %w", err)
	}
	n.log.Info("workflow submitted", "workflow", rec.Status.ID, "services", services, "replicas", len(rec.Replicas))
	return rec.Status, nil
}

func (n *Node) handleOrigin(_ context.Context, _ peer.ID, req []byte) []byte {
	var msg api.OriginMsg
	if err := rpc.Dec.Unmarshal(req, &msg); err != nil {
		return rpc.AckBytes(api.CodeBadPack, "bad origin message: "+err.Error())
	}
	if !n.completeHere(msg) {
		return rpc.AckBytes(api.CodeInternal, fmt.Sprintf("peer %s is not the origin of %s", rpc.ShortID(n.host.ID()), msg.WorkflowID))
	}
	return rpc.AckBytes("", "")
}

// completeHere applies msg to this peer's record of the workflow and, for
// a completion, settles what the last holder listed (its guardians are
// released by the origin, so they never re-run a finished workflow).
func (n *Node) completeHere(msg api.OriginMsg) bool {
	if !n.onOrigin(msg) {
		return false
	}
	if msg.Done {
		_ = n.settle(n.ctx, 0, msg.Settle)
	}
	return true
}

// onOrigin applies a progress event or a completion to the workflow record.
func (n *Node) onOrigin(msg api.OriginMsg) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	rec, ok := n.workflows[msg.WorkflowID]
	if !ok {
		return false
	}
	st := &rec.Status
	if msg.Event != nil {
		if msg.Event.Outcome == pack.OutcomeOK {
			st.StepsDone++
		}
		st.Recent = append(st.Recent, *msg.Event)
		if len(st.Recent) > recentEvents {
			st.Recent = st.Recent[len(st.Recent)-recentEvents:]
		}
	}
	if msg.Done {
		n.ev.Emit(events.Event{Type: events.Completed, Workflow: msg.WorkflowID, After: lastRan(msg.Trace), Stale: st.State != api.StateRunning})
	}
	if msg.Done && st.State == api.StateRunning {
		st.Finished = time.Now().UTC()
		if msg.OK {
			st.State = api.StateSucceeded
		} else {
			st.State = api.StateFailed
			st.Error = msg.Error
		}
		st.Result = msg.Outputs
		st.Trace = msg.Trace
		sort.SliceStable(st.Trace, func(i, j int) bool { return st.Trace[i].Start.Before(st.Trace[j].Start) })
		done := 0
		for _, e := range st.Trace {
			if e.Outcome == pack.OutcomeOK {
				done++
			}
		}
		st.StepsDone = done
		if err := n.saveWorkflow(rec); err != nil {
			n.log.Error("journal workflow result", "workflow", msg.WorkflowID, "err", err)
		}
		n.log.Info("workflow finished", "workflow", msg.WorkflowID, "state", st.State, "error", st.Error)
		if rec.Replica && rec.Primary.ID != "" {
			// The completion reached this replica (the origin was down):
			// hand it back so the origin answers with the result too.
			primary := rec.Primary
			n.spawn(func(ctx context.Context) {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
				defer cancel()
				for wait := time.Second; ctx.Err() == nil; wait = min(2*wait, 30*time.Second) {
					if rep := n.callGuard(ctx, primary, api.GuardMsg{Op: api.GuardOriginDone, Key: msg.WorkflowID, Origin: &msg}); rep.OK {
						return
					}
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
				}
			})
		}
		if !rec.Replica {
			for _, r := range rec.Replicas {
				n.spawn(func(ctx context.Context) {
					n.callGuard(ctx, r, api.GuardMsg{Op: api.GuardOriginDone, Key: msg.WorkflowID, Origin: &msg})
				})
			}
		}
	}
	return true
}

// originReplicaOp stores or updates a replica of a workflow record.
func (n *Node) originReplicaOp(m api.GuardMsg) api.GuardReply {
	switch m.Op {
	case api.GuardOrigin:
		var rec workflowRecord
		if err := rpc.Dec.Unmarshal(m.Record, &rec); err != nil {
			return api.GuardReply{Error: "bad workflow record: " + err.Error()}
		}
		rec.Replica = true
		n.mu.Lock()
		defer n.mu.Unlock()
		if _, ok := n.workflows[rec.Status.ID]; !ok {
			n.workflows[rec.Status.ID] = &rec
			if err := n.saveWorkflow(&rec); err != nil {
				return api.GuardReply{Error: "journal: " + err.Error()}
			}
		}
		return api.GuardReply{OK: true}
	case api.GuardOriginDone:
		if m.Origin == nil || !n.onOrigin(*m.Origin) {
			return api.GuardReply{Error: "no replica of workflow " + m.Key}
		}
		return api.GuardReply{OK: true}
	case api.GuardOriginStatus:
		n.mu.Lock()
		defer n.mu.Unlock()
		rec, ok := n.workflows[m.Key]
		if !ok || rec.Status.State == api.StateRunning {
			return api.GuardReply{OK: true, Known: ok}
		}
		st := rec.Status
		done := api.OriginMsg{WorkflowID: st.ID, Done: true, OK: st.State == api.StateSucceeded, Error: st.Error, Outputs: st.Result, Trace: st.Trace}
		return api.GuardReply{OK: true, Known: true, Released: true, Origin: &done}
	}
	return api.GuardReply{Error: "unknown origin operation " + m.Op}
}

// reportEvent tells the origin that a step attempt ended (best effort).
func (n *Node) reportEvent(p *pack.Pack, e pack.TraceEntry) {
	if len(p.Origin) == 0 {
		return
	}
	msg := api.OriginMsg{WorkflowID: p.WorkflowID, Event: &e}
	origins := p.Origin
	n.spawn(func(ctx context.Context) {
		for _, o := range origins {
			if o.ID == n.host.ID().String() {
				if n.onOrigin(msg) {
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
			if err := rpc.CallCBOR(ctx, n.host, id, api.ProtoOrigin, msg, &ack, 2*time.Second); err == nil && ack.OK {
				return
			}
		}
	})
}

func (n *Node) handleClient(_ context.Context, from peer.ID, req []byte) []byte {
	var r api.ClientRequest
	if err := rpc.Dec.Unmarshal(req, &r); err != nil {
		return rpc.MustCBOR(api.ClientResponse{Error: "bad request: " + err.Error()})
	}
	if err := n.authorizeClient(from, r.Op); err != nil {
		return rpc.MustCBOR(api.ClientResponse{Error: err.Error()})
	}
	return rpc.MustCBOR(n.client(r))
}

func (n *Node) client(r api.ClientRequest) api.ClientResponse {
	switch r.Op {
	case api.OpSubmit:
		st, err := n.Submit(r.FileName, r.Source, r.Input)
		if err != nil {
			return api.ClientResponse{Error: err.Error()}
		}
		return api.ClientResponse{Status: &st}
	case api.OpStatus, api.OpResult:
		n.mu.Lock()
		defer n.mu.Unlock()
		rec, ok := n.workflows[r.ID]
		if !ok {
			return api.ClientResponse{Error: fmt.Sprintf("peer %s is not the origin of workflow %q (ask the peer it was submitted to)", rpc.ShortID(n.host.ID()), r.ID)}
		}
		st := rec.Status
		if r.Op == api.OpStatus {
			st.Result, st.Trace = nil, nil
		}
		return api.ClientResponse{Status: &st}
	case api.OpCancel:
		n.mu.Lock()
		rec, ok := n.workflows[r.ID]
		if !ok {
			n.mu.Unlock()
			return api.ClientResponse{Error: fmt.Sprintf("peer %s is not the origin of workflow %q", rpc.ShortID(n.host.ID()), r.ID)}
		}
		if rec.Status.State == api.StateRunning {
			rec.Status.State = api.StateCancelled
			rec.Status.Finished = time.Now().UTC()
			rec.Status.Error = "cancelled by request"
			if err := n.saveWorkflow(rec); err != nil {
				n.log.Error("journal cancel", "err", err)
			}
		}
		st := rec.Status
		n.mu.Unlock()
		n.publishCancel(cancelMsg{WorkflowID: r.ID})
		return api.ClientResponse{Status: &st}
	case api.OpPeers:
		return api.ClientResponse{Peers: n.pres.infos(), Refused: n.gate.Refused()}
	case api.OpPublishSchedule, api.OpSchedule:
		return n.clientSchedule(r)
	case api.OpList:
		n.mu.Lock()
		defer n.mu.Unlock()
		var out []api.Status
		for _, rec := range n.workflows {
			st := rec.Status
			st.Result, st.Trace, st.Recent = nil, nil, nil
			out = append(out, st)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Submitted.Before(out[j].Submitted) })
		return api.ClientResponse{Statuses: out}
	}
	return api.ClientResponse{Error: fmt.Sprintf("unknown operation %q", r.Op)}
}

// syncOrigins asks the replicas of every workflow still running here
// whether it finished while this origin was down, and adopts the result.
func (n *Node) syncOrigins(ctx context.Context) {
	n.mu.Lock()
	var recs []*workflowRecord
	for _, rec := range n.workflows {
		if !rec.Replica && rec.Status.State == api.StateRunning {
			recs = append(recs, rec)
		}
	}
	n.mu.Unlock()
	for _, rec := range recs {
		for _, r := range rec.Replicas {
			rep := n.callGuard(ctx, r, api.GuardMsg{Op: api.GuardOriginStatus, Key: rec.Status.ID})
			if rep.OK && rep.Origin != nil {
				n.log.Info("workflow finished while this origin was down", "workflow", rec.Status.ID)
				n.onOrigin(*rep.Origin)
				break
			}
		}
	}
}
