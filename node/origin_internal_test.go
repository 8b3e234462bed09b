package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/env"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// flakyJournal stands for the journal of workflow records: it fails while
// broken is set and keeps the last record written per workflow.
type flakyJournal struct {
	mu      sync.Mutex
	broken  bool
	written map[string]origin.Record
}

func (j *flakyJournal) persist(id string, rec *origin.Record, _ *origin.StashWrite) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken {
		return errors.New("disk full")
	}
	if rec != nil {
		j.written[id] = *rec
	}
	return nil
}

func (j *flakyJournal) forget(id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken {
		return errors.New("disk full")
	}
	delete(j.written, id)
	return nil
}

func (j *flakyJournal) set(broken bool) {
	j.mu.Lock()
	j.broken = broken
	j.mu.Unlock()
}

func (j *flakyJournal) record(id string) origin.Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.written[id]
}

// bareNode is a node with a host that listens nowhere, a log, a progress
// log and a context: what stepping origin records needs besides the table
// and its journal, which the caller sets.
func bareNode(t testing.TB) (*Node, context.CancelFunc) {
	t.Helper()
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		clock:           clockwork.NewRealClock(),
		rand:            env.NewRand(1),
		host:            h,
		selfID:          h.ID().String(),
		log:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		progress:        newProgressLog(),
		activityChanged: make(chan struct{}, 1),
		ctx:             ctx,
	}
	t.Cleanup(func() { cancel(); n.wg.Wait() })
	return n, cancel
}

// originNode is a node with only what the origin side needs: a host that
// listens nowhere (settle items name peers that cannot be dialled).
func originNode(t *testing.T) (*Node, *flakyJournal, context.CancelFunc) {
	t.Helper()
	j := &flakyJournal{written: map[string]origin.Record{}}
	n, cancel := bareNode(t)
	n.origins = newOriginTable(j.persist, j.forget)
	if _, err := n.stepOrigin("wf-1", origin.Submitted{Source: "S1 S2", StepsTotal: 2, Origin: "self", At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	return n, j, cancel
}

func done(by string) api.OriginMsg {
	return api.OriginMsg{WorkflowID: "wf-1", Done: true, OK: true,
		Outputs: map[string]json.RawMessage{"S2": json.RawMessage(`"` + by + `"`)},
		Trace:   []pack.TraceEntry{{Path: "1", Service: "S2", Outcome: pack.OutcomeOK}}}
}

// A completion whose record cannot be written is refused (the sender
// retries) and changes nothing: I4 and origin O2. Once the journal works
// the retry is taken, and a later completion never changes the result
// (O1).
func TestOriginCompletionAnsweredOnlyOnceDurable(t *testing.T) {
	n, j, _ := originNode(t)
	j.set(true)
	if err := n.completeHere(done("a")); err == nil {
		t.Fatal("a completion whose record could not be written was acknowledged")
	}
	if w := n.origins.view("wf-1"); !w.Running() {
		t.Fatalf("state after a refused completion = %s, want running", w.State())
	}
	if rep := n.originReplicaOp("", api.OriginStatus{Key: "wf-1"}); rep.Released {
		t.Fatalf("a guardian was told the workflow ended before its end was written: %+v", rep)
	}
	j.set(false)
	if err := n.completeHere(done("a")); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if rec := j.record("wf-1"); rec.Status.State != api.StateSucceeded || string(rec.Status.Result["S2"]) != `"a"` {
		t.Fatalf("journaled record = %+v, want succeeded with S2=a", rec.Status)
	}
	if err := n.completeHere(done("b")); err != nil {
		t.Fatalf("stale completion: %v", err)
	}
	rep := n.originReplicaOp("", api.OriginStatus{Key: "wf-1"})
	if !rep.Known || !rep.Released || rep.Origin == nil || string(rep.Origin.Outputs["S2"]) != `"a"` {
		t.Fatalf("origin-status after a stale completion = %+v, want ended with the first result", rep)
	}
}

// A cancel that cannot be written is refused and changes nothing (it is
// not broadcast either: this node has no pubsub, a broadcast would panic).
func TestOriginCancelRefusedWhenNotDurable(t *testing.T) {
	n, j, _ := originNode(t)
	j.set(true)
	resp := n.client(api.ClientRequest{Op: api.OpCancel, ID: "wf-1"})
	if resp.Error == "" {
		t.Fatalf("a cancel that could not be written was answered %+v", resp.Status)
	}
	if w := n.origins.view("wf-1"); !w.Running() {
		t.Fatalf("state after a refused cancel = %s, want running", w.State())
	}
}

// A completion whose last guardians none answers is neither recorded nor
// acknowledged (no answer is not a release: they may be cut off and
// re-routing): the sender keeps it and sends it again. Once the
// sender marks the items lenient (the guardians were killed), it is
// recorded. When the node stops while it asks, nothing is recorded.
func TestOriginCompletionUnsettled(t *testing.T) {
	n, j, cancel := originNode(t)
	msg := done("a")
	msg.Settle = []pack.Settle{{Kind: pack.SettleGuard, Key: "wf-1|1", Peers: []pack.Peer{{ID: "not-a-peer"}}}}
	err := n.completeHere(msg)
	if !errors.Is(err, errUnsettled) {
		t.Fatalf("a completion none of whose guardians answered: %v, want %v", err, errUnsettled)
	}
	if w := n.origins.view("wf-1"); !w.Running() {
		t.Fatalf("state after an unsettled completion = %s, want running", w.State())
	}
	msg.Settle[0].Lenient = true
	cancel()
	if err := n.completeHere(msg); err == nil || errors.Is(err, errSuperseded) {
		t.Fatalf("a completion while the node stops: %v, want a plain error", err)
	}
	if w := n.origins.view("wf-1"); !w.Running() {
		t.Fatalf("state after a completion while stopping = %s, want running", w.State())
	}
	n.ctx = context.Background()
	if err := n.completeHere(msg); err != nil {
		t.Fatalf("the lenient completion: %v", err)
	}
	if rec := j.record("wf-1"); rec.Status.State != api.StateSucceeded {
		t.Fatalf("journaled state = %q, want succeeded", rec.Status.State)
	}
}

// Journals written before package node/origin existed hold records with
// keys 1-5 only; they load unchanged, and a record with the new key 6
// still loads in the old shape.
func TestOriginRecordFormatCompatible(t *testing.T) {
	type oldRecord struct {
		Status   api.Status  `cbor:"1,keyasint"`
		Source   string      `cbor:"2,keyasint"`
		Replicas []pack.Peer `cbor:"3,keyasint,omitempty"`
		Replica  bool        `cbor:"4,keyasint,omitempty"`
		Primary  pack.Peer   `cbor:"5,keyasint,omitempty"`
	}
	old := oldRecord{
		Status:   api.Status{ID: "wf-1", State: api.StateRunning, StepsTotal: 2},
		Source:   "S1 S2",
		Replicas: []pack.Peer{{ID: "r1"}}, Replica: true, Primary: pack.Peer{ID: "p"},
	}
	var rec origin.Record
	if err := rpc.Dec.Unmarshal(rpc.MustCBOR(&old), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Status.ID != "wf-1" || rec.Source != "S1 S2" || !rec.Replica || rec.Primary.ID != "p" || len(rec.Replicas) != 1 || rec.HandBack {
		t.Fatalf("old record loaded as %+v", rec)
	}
	if w := origin.Load(rec); w.Role() != origin.RoleReplica || !w.Running() {
		t.Fatalf("old record: role %s state %s", w.Role(), w.State())
	}
	rec.HandBack = true
	var back oldRecord
	if err := rpc.Dec.Unmarshal(rpc.MustCBOR(&rec), &back); err != nil {
		t.Fatalf("a new record in the old shape: %v", err)
	}
	if back.Status.ID != "wf-1" || !back.Replica {
		t.Fatalf("new record read in the old shape: %+v", back)
	}
}
