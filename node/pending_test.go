package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// TestPendingCopiesGoWithTheHoldersBeats: a guardian keeps a copy released
// by a successor as pending until the holder lets go of the work (node/guard
// G17), and the holder's beats say when: they list the work it let go of
// lately (heldFrame.LetGo). On three real peers, node 1 runs every step
// (ten quick ones, then Z, which sleeps 20 s); nodes 0 and 2 guard them.
// Within 10 s, while Z still runs and node 1 still beats to the guardians
// for it, every pending copy of the quick steps is gone. With beats that
// let go of nothing, they stay until the guardian asks the holder
// (pendingUnlistedAsk, 10 s), and this fails (checked).
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

// TestPendingCopyGoesOnlyOnTheHoldersWord: a guardian keeps a copy released
// by a successor as pending until the holder says it let go of that
// attempt (node/guard G17). A beat that merely does not list the work is
// no such word: the holder may have written it before it began beating for
// the work, and the guardian read it after the release. Taken as "let go",
// it could confirm a release the successor then refused, and once the
// holder died nobody would hold the step.
//
// A real guardian; the holder is a raw libp2p host that asks it to guard
// three steps (A, B, C), each then released by a successor, and writes
// beat frames on api.ProtoBeatHeld in one order: one that lists nothing
// (as on api.ProtoBeatKeys), one that lists nothing (on ProtoBeatHeld),
// one that lets go of A at another attempt and of B, one that lets go of
// C. Once C is gone only A may be left. The holder then keeps beating
// without listing A, and the guardian asks it about A (reconcileHolder);
// told it no longer holds it, the copy goes.
func TestPendingCopyGoesOnlyOnTheHoldersWord(t *testing.T) {
	lines := newLogLines()
	cfg := testConfig(t, node.DefaultConfig(), echoServices)
	cfg.HTTP = "127.0.0.1:0"
	cfg.FirstBeatTimeout = 200 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	nf, _ := runNode(t, cfg)
	var movedOn atomic.Bool
	f := newFakeHolderFunc(t, nf, func() api.GuardReply {
		return api.GuardReply{OK: true, Released: movedOn.Load()}
	})
	successor := goneHost(t)
	keys := []string{"wf-test|A", "wf-test|B", "wf-test|C"}
	type letGo struct {
		Key     string `cbor:"1,keyasint"`
		Attempt int    `cbor:"2,keyasint"`
	}
	type heldFrame struct {
		Held  []string `cbor:"1,keyasint,omitempty"`
		LetGo []letGo  `cbor:"2,keyasint,omitempty"`
	}
	held := func(fr heldFrame) []byte { return append([]byte{3}, rpc.MustCBOR(fr)...) }

	// The holder beats for all three, as a holder does while the steps run.
	s, err := f.h.NewStream(context.Background(), f.node, protocol.ID(api.ProtoBeatHeld))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	var mu sync.Mutex
	current := held(heldFrame{Held: keys})
	write := func(frame []byte) {
		if err := pack.WriteFrame(s, frame); err != nil {
			t.Error(err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			mu.Lock()
			write(current)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { stop(); <-beating }()
	for _, key := range keys {
		if rep := f.guard(t, api.GuardStore{Key: key, Attempt: 0, Pack: packFor(t, "S1 S2"), Holder: f.ref()}); !rep.OK {
			t.Fatalf("store %s: %+v", key, rep)
		}
		if rep := f.guard(t, api.GuardRelease{Key: key, Attempt: 0, By: successor.ID, ByKey: key + "/next"}); !rep.OK {
			t.Fatalf("release %s: %+v", key, rep)
		}
	}
	if n := scrapeSum(t, []api.NodeFile{nf}, "bedwe_guard_pending_copies"); n != 3 {
		t.Fatalf("%v pending guard copies after three releases by a successor, want 3", n)
	}

	mu.Lock()
	write(append([]byte{2}, rpc.MustCBOR([]string{})...))
	write(held(heldFrame{}))
	write(held(heldFrame{LetGo: []letGo{{"wf-test|A", 1}, {"wf-test|B", 0}}}))
	write(held(heldFrame{LetGo: []letGo{{"wf-test|C", 0}}}))
	current = held(heldFrame{})
	mu.Unlock()
	lines.waitFor(t, "pending guard copy gone", "key=wf-test|C", "event=HolderLetGo", "confirmed=true")
	// The frames are read in order: A's fate is decided.
	if n := scrapeSum(t, []api.NodeFile{nf}, "bedwe_guard_pending_copies"); n != 1 {
		t.Fatalf("%v pending guard copies once the holder let go of B and C, want 1 (A's): a frame that did not list A let it go", n)
	}
	if line, _ := lines.find("pending guard copy gone", "key=wf-test|A"); line != "" {
		t.Fatalf("A's pending copy went though the holder never let go of it: %s", line)
	}

	// Beats that never list A again: the guardian asks the holder, which
	// says it no longer holds it.
	movedOn.Store(true)
	lines.waitFor(t, "pending guard copy gone", "key=wf-test|A", "event=MovedOn", "confirmed=true")
	if n := scrapeSum(t, []api.NodeFile{nf}, "bedwe_guard_pending_copies"); n != 0 {
		t.Fatalf("%v pending guard copies once the holder said it moved on, want 0", n)
	}
}

// TestAReroutesBackupCopyLeavesAPendingReleaseUnconfirmed is node/guard
// G21 at a real guardian: it keeps a
// copy of the holder's attempt 0 as pending, released by a successor that
// (unknown to it) then refused the hand-over. The other guardian re-routes
// the step, and the re-route's receiver recruits this guardian as its
// backup (attempt 1, the re-router its primary) before its settle of the
// re-route comes. That settle must be answered as the re-route's own
// chain, not superseded: nothing confirmed the release. Answered
// superseded, the receiver would refuse the re-route, and with the
// holder dead nobody would hold the step (as in the race-enabled
// TestARestartedGuardianStillAsksAboutItsPendingCopy).
func TestAReroutesBackupCopyLeavesAPendingReleaseUnconfirmed(t *testing.T) {
	lines := newLogLines()
	nf := startGuardian(t, lines)
	f := newFakeHolder(t, nf, api.GuardReply{OK: true})
	rerouter, successor := goneHost(t), goneHost(t)
	receiver, _ := rawHost(t, nf)
	const key = "wf-test|1"
	if rep := f.guard(t, api.GuardStore{Key: key, Attempt: 0, Pack: packFor(t, "S1 S2"), Holder: f.ref(), Primary: rerouter}); !rep.OK {
		t.Fatalf("store: %+v", rep)
	}
	if rep := f.guard(t, api.GuardRelease{Key: key, Attempt: 0, By: successor.ID, ByKey: "wf-test|2/next"}); !rep.OK || rep.Superseded {
		t.Fatalf("the successor's release: %+v", rep)
	}
	backup := api.GuardStore{Key: key, Attempt: 1, Pack: packFor(t, "S1 S2"), Holder: peerRef(receiver), Primary: rerouter}
	if rep := f.guard(t, backup); !rep.OK {
		t.Fatalf("the re-route receiver's backup copy: %+v", rep)
	}
	rep := f.guard(t, api.GuardRelease{Key: key, Attempt: 0, Rerouted: true, Rerouter: rerouter.ID})
	if !rep.OK || rep.Superseded {
		t.Fatalf("the re-route's settle with its backup copy stored here: %+v, want OK (the release of attempt 0 was never confirmed)", rep)
	}
	if st := f.guard(t, api.GuardStatus{Key: key}); st.Holder.ID != receiver.ID().String() || st.Attempt != 1 {
		t.Fatalf("status = %+v, want the re-route's copy (attempt 1 at %s)", st, receiver.ID())
	}
}
