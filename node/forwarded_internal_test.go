package node

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/pack"
)

// TestHandOnAndGuardCopyInOneCommit: once the next holder acknowledged a
// hand-off, the sender drops its held record (remembering the hand-on)
// and keeps its guard copy of what it handed on in one journal commit,
// not two — and both are in the journal afterwards.
func TestHandOnAndGuardCopyInOneCommit(t *testing.T) {
	dir := t.TempDir()
	cfg := TestnetConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.Network = "internal-" + filepath.Base(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.HTTP = "127.0.0.1:0" // metrics: the journal's commits are counted
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- n.Run(ctx, func(api.NodeFile) { close(ready) }) }()
	defer func() { cancel(); <-done }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("node stopped at start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("node did not start within 60s")
	}

	w, err := grammar.Parse("t", []byte("S1 S2"))
	if err != nil {
		t.Fatal(err)
	}
	grammar.AssignPaths(w)
	p := &pack.Pack{WorkflowID: "wf-one-commit", Origin: []pack.Peer{n.self()}, Workflow: w, Input: []byte("null")}
	// The step's guardian g, which the next holder names as released
	// (api.Ack.Released): the hand-on ends the held record (held H6).
	g := pack.Peer{ID: newPeerID(t).String()}
	rec := held.Record{Pack: p, Key: heldKey(p), GuardKey: guardKey(p), Guardians: []pack.Peer{g}}
	s, _ := n.helds.add(rec.Key, held.Accept(n.host.ID().String(), rec), time.Now())
	for _, ev := range []held.Event{held.Accepted{}, held.Settled{Result: held.SettleOK}, held.Ran{OK: true, Output: []byte(`{"x":1}`)}} {
		if _, err := n.stepHeld(s, ev); err != nil {
			t.Fatal(err)
		}
	}
	rd, err := n.stepHeld(s, held.StartForwarding{})
	if err != nil || rd.Forward == nil {
		t.Fatalf("start forwarding: %v %+v", err, rd)
	}
	next := rd.Forward.Pack
	next.Sender = n.self()
	raw, err := pack.Encode(next)
	if err != nil {
		t.Fatal(err)
	}
	receiver := newPeerID(t)

	before := journalCommits(t, n)
	n.forwardedAndGuarded(s, next, handedOff{to: receiver, raw: raw, released: []string{g.ID}})
	if got := journalCommits(t, n) - before; got != 1 {
		t.Errorf("the hand-on and the guard copy took %v journal commits, want 1", got)
	}
	if ph := s.view().Phase(); ph != held.PhaseDone {
		t.Errorf("held record %s after the hand-on, want done", ph)
	}
	if _, ok, err := n.journal.Get(journal.BucketPacks, rec.Key); err != nil || ok {
		t.Errorf("held record still journaled (%v, %v)", ok, err)
	}
	if _, ok, err := n.journal.Get(journal.BucketHandedOn, rec.Key); err != nil || !ok {
		t.Errorf("hand-on not remembered in the journal (%v, %v)", ok, err)
	}
	if _, ok, err := n.journal.Get(journal.BucketOutbox, guardKey(next)); err != nil || !ok {
		t.Errorf("guard copy of the step handed on not journaled (%v, %v)", ok, err)
	}
	if c := n.guards.view(guardKey(next)).Copy(); c == nil || c.Holder.ID != receiver.String() {
		t.Errorf("guard copy %+v, want one held by the receiver", c)
	}
}

// journalCommits is how many journal writes n's metrics counted.
func journalCommits(t *testing.T, n *Node) float64 {
	t.Helper()
	mfs, err := n.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "bedwe_journal_write_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// newPeerID is the ID of a key made for the test (no host behind it).
func newPeerID(t testing.TB) peer.ID {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
