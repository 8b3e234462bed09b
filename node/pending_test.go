package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/journal"
)

// TestPendingCopiesGoWithTheHoldersBeats: a guardian keeps a copy released
// by a successor as pending until the holder lets go of the work (node/guard
// G17), and the holder's beats say when, by listing the work they are for.
// On three real peers, node 1 runs every step (ten quick ones, then Z,
// which sleeps 20 s); nodes 0 and 2 guard them. While Z still runs, and
// node 1 still beats to the guardians for it, every pending copy of the
// quick steps is gone: the beats no longer list them. With beats that list
// nothing, the pending copies stay until the holder stops beating (after
// Z), and this fails.
func TestPendingCopiesGoWithTheHoldersBeats(t *testing.T) {
	const quick = 10
	nodes := startMesh(t, "pending", 3, func(i int, cfg *node.Config) string {
		cfg.HTTP = "127.0.0.1:0"
		if i == 1 {
			return "version: 1\npatterns:\n  - {match: \"Z\", kind: sleep, duration: 20s}\n  - {match: \"S*\", kind: echo}\n"
		}
		return "version: 1\nservices:\n  unused: {kind: echo}\n"
	})
	var src strings.Builder
	for i := range quick {
		fmt.Fprintf(&src, "S%d ", i)
	}
	src.WriteString("Z")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, nodes[0].Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	st, err := cl.Submit(ctx, "wf.bedwe", src.String(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the quick steps done and Z running", func() error {
		s, err := cl.Status(ctx, st.ID)
		if err != nil {
			return err
		}
		if s.StepsDone < quick {
			return fmt.Errorf("%d steps done", s.StepsDone)
		}
		return nil
	})
	eventually(t, 10*time.Second, "no pending guard copy while Z runs", func() error {
		if n := scrapeSum(t, nodes, "bedwe_guard_pending_copies"); n != 0 {
			return fmt.Errorf("%v pending guard copies", n)
		}
		return nil
	})
	s, err := cl.Status(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != api.StateRunning {
		t.Fatalf("the workflow is %s: the pending copies went with its end, not with the beats", s.State)
	}
	if n := scrapeSum(t, nodes, "bedwe_guard_copies"); n == 0 {
		t.Fatal("no guard copy of Z while it runs: nothing was beating")
	}
}

// TestPendingCopiesLeaveTheJournal: a guardian's pending copy (node/guard
// G17) is journaled where its live copy was, beside a tombstone that says
// so, and its end is journaled with a later write rather than a commit of
// its own (journal.Later). Once a workflow of ten steps on three real
// peers has ended and every pending copy was confirmed, no guard copy is
// left in any node's journal after a clean stop. Without the deferred
// delete every confirmed pending copy stays there until its tombstone is
// pruned, and a restart restores them as pending.
func TestPendingCopiesLeaveTheJournal(t *testing.T) {
	const steps = 10
	network := "pending-journal-" + filepath.Base(t.TempDir())
	var nodes []api.NodeFile
	var stops []func()
	var dataDirs []string
	for i := range 3 {
		cfg := testConfig(t, node.TestnetConfig(), "version: 1\npatterns:\n  - {match: \"S*\", kind: echo}\n")
		cfg.HTTP = "127.0.0.1:0"
		cfg.Network, cfg.Zone = network, fmt.Sprintf("z%d", i)
		if i > 0 {
			cfg.Bootstrap = nodes[0].Addrs
		}
		nf, stop := runNode(t, cfg)
		nodes, stops, dataDirs = append(nodes, nf), append(stops, stop), append(dataDirs, cfg.DataDir)
	}
	for _, nf := range nodes {
		waitPeers(t, nf, len(nodes))
	}
	var src strings.Builder
	for i := range steps {
		fmt.Fprintf(&src, "S%d ", i)
	}
	ctx, cl := hopClient(t, nodes[0])
	runSequence(t, ctx, cl, src.String(), steps)
	eventually(t, 30*time.Second, "every pending guard copy confirmed", func() error {
		if n := scrapeSum(t, nodes, "bedwe_guard_pending_copies"); n != 0 {
			return fmt.Errorf("%v pending guard copies", n)
		}
		return nil
	})
	for _, stop := range stops {
		stop()
	}
	for i, dir := range dataDirs {
		j, err := journal.Open(filepath.Join(dir, "journal.db"))
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		err = j.ForEach(journal.BucketOutbox, func(key string, _ []byte) error {
			left = append(left, key)
			return nil
		})
		j.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("node %d: guard copies left in the journal after the workflow ended: %v", i, left)
		}
	}
}
