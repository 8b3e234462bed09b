package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/origin"
)

// TestRetentionShrinksThenDeletes runs a FORK workflow on a real node,
// then applies the retention as if a week and then five weeks had passed:
// the workflow record first shrinks to a tombstone that still says it
// succeeded (a guardian asking hears it ended), its join record is
// deleted, and later the tombstone is deleted too; the journal holds what
// the tables hold at each point.
func TestRetentionShrinksThenDeletes(t *testing.T) {
	dir := t.TempDir()
	svc := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(svc, []byte("version: 1\npatterns:\n  - {match: \"S*\", kind: echo}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, stop, _ := runInternalNode(t, dir, svc)
	t.Cleanup(stop)
	ctx := context.Background()

	st, err := n.Submit("wf", "S1 FORK(S2, S3) SYNC S4", nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for w := n.origins.view(st.ID); w.Running(); w = n.origins.view(st.ID) {
		if time.Now().After(deadline) {
			t.Fatal("workflow did not finish within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	count := func(bucket string) int {
		c, err := n.journal.Count(bucket)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if count(journal.BucketJoins) != 1 || len(n.joins.all()) != 1 {
		t.Fatalf("want the FORK's join record before the retention: journal %d, table %d", count(journal.BucketJoins), len(n.joins.all()))
	}

	// A day later nothing is old enough.
	if pc := n.prune(ctx, time.Now().Add(time.Hour)); pc.workflowsShrunk+pc.joins != 0 {
		t.Fatalf("pruned too early: %+v", pc)
	}
	// A week later: the record is a tombstone, the join is gone.
	pc := n.prune(ctx, time.Now().Add(7*24*time.Hour))
	if pc.workflowsShrunk != 1 || pc.joins != 1 {
		t.Fatalf("after a week: %+v, want 1 workflow shrunk and 1 join deleted", pc)
	}
	w := n.origins.view(st.ID)
	if w == nil || !w.Pruned() || w.State().String() != api.StateSucceeded {
		t.Fatalf("after a week the record should be a succeeded tombstone, got %+v", w)
	}
	if full := w.Status(true); full.Result != nil || full.Trace != nil {
		t.Errorf("tombstone keeps result %v / trace %d entries", full.Result, len(full.Trace))
	}
	if rep := n.originReplicaOp("", api.OriginStatus{Key: st.ID}); !rep.Known || !rep.Released {
		t.Errorf("a guardian asking about the tombstone got %+v, want known and ended", rep)
	}
	if count(journal.BucketJoins) != 0 || len(n.joins.all()) != 0 {
		t.Errorf("join record left: journal %d, table %d", count(journal.BucketJoins), len(n.joins.all()))
	}
	raw, ok, err := n.journal.Get(journal.BucketWorkflows, st.ID)
	if err != nil || !ok || len(raw) > 400 {
		t.Errorf("journaled tombstone: %d bytes, ok %v, err %v; want a small record", len(raw), ok, err)
	}
	// Five weeks later the tombstone is deleted too.
	if pc := n.prune(ctx, time.Now().Add(6*7*24*time.Hour)); pc.workflowsDeleted != 1 {
		t.Fatalf("after six weeks: %+v, want the tombstone deleted", pc)
	}
	if n.origins.view(st.ID) != nil || count(journal.BucketWorkflows) != 0 {
		t.Errorf("tombstone left: table %v, journal %d", n.origins.view(st.ID) != nil, count(journal.BucketWorkflows))
	}
}

// runInternalNode runs a loopback test node (TestnetConfig, retention 24 h,
// a discarded log) on DATA under dir in this process, and returns it once
// it listens, a stop function, and how long the start took (journal
// compaction and resume included).
func runInternalNode(t *testing.T, dir, services string) (*Node, func(), time.Duration) {
	t.Helper()
	cfg := TestnetConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.ServicesFile = services
	cfg.Network = "internal-" + filepath.Base(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Retention = 24 * time.Hour
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- n.Run(ctx, func(api.NodeFile) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("node stopped at start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("node did not start within 60s")
	}
	return n, func() { cancel(); <-done }, time.Since(began)
}

// TestReplicaAsksPrimaryForALostEnd: a replica record still running long
// after its workflow began (the primary's tell of the end was lost) asks
// its primary, a real node, in the retention pass, and learns the end.
func TestReplicaAsksPrimaryForALostEnd(t *testing.T) {
	primary, stopP, _ := runInternalNode(t, t.TempDir(), "")
	t.Cleanup(stopP)
	replica, stopR, _ := runInternalNode(t, t.TempDir(), "")
	t.Cleanup(stopR)
	const id = "wf-lost-tell"
	began := time.Now().UTC().Add(-time.Hour)
	if _, err := primary.stepOrigin(id, origin.Submitted{Source: "S1", StepsTotal: 1, Origin: primary.host.ID().String(), At: began}); err != nil {
		t.Fatal(err)
	}
	rec := origin.Record{Status: api.Status{ID: id, State: api.StateRunning, Submitted: began, StepsTotal: 1}, Source: "S1", Primary: primary.self()}
	if _, err := replica.stepOrigin(id, origin.ReplicaStored{Record: rec}); err != nil {
		t.Fatal(err)
	}
	// The primary ends; its tell to the replica is never sent (it named no
	// replicas).
	done := api.OriginMsg{WorkflowID: id, Done: true, OK: true}
	if _, err := primary.stepOrigin(id, origin.Completed{Msg: done, At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if w := replica.origins.view(id); !w.Running() {
		t.Fatalf("replica before the pass: %s, want running", w.State())
	}
	replica.prune(context.Background(), time.Now().UTC())
	if w := replica.origins.view(id); w.State().String() != api.StateSucceeded {
		t.Fatalf("replica after the retention pass: %s, want succeeded (asked the primary)", w.State())
	}
}
