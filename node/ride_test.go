package node_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
)

// TestStoreAndReleaseInOneCommit is api.GuardStoreRelease at a real
// guardian: the copy it is sent and the release of the step
// before are written in one journal commit; the copy is kept whatever the
// release is answered (as a store sent on its own before the release
// would have been), and a released step leaves its tombstone.
func TestStoreAndReleaseInOneCommit(t *testing.T) {
	cfg := testConfig(t, node.DefaultConfig(), echoServices)
	cfg.HTTP = "127.0.0.1:0"
	nf, _ := runNode(t, cfg)
	nodes := []api.NodeFile{nf}
	f := newFakeHolder(t, nf, api.GuardReply{OK: true})
	by := f.h.ID().String()
	store := func(key string, attempt int) api.GuardStore {
		return api.GuardStore{Key: key, Attempt: attempt, Pack: packFor(t, "S1 S2"), Holder: f.ref()}
	}
	status := func(key string) api.GuardReply { return f.guard(t, api.GuardStatus{Key: key}) }

	if rep := f.guard(t, store("wf-ride|0", 0)); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}
	before := journalWrites(t, nodes)
	rep := f.guard(t, api.GuardStoreRelease{Store: store("wf-ride|1", 0), Release: api.GuardRelease{Key: "wf-ride|0", By: by}})
	if !rep.OK || rep.Superseded || rep.Pending || rep.Error != "" {
		t.Fatalf("store and release: %+v, want a plain OK", rep)
	}
	if n := journalWrites(t, nodes) - before; n != 1 {
		t.Errorf("store and release took %v journal commits, want 1", n)
	}
	if st := status("wf-ride|0"); !st.Known || !st.Released {
		t.Errorf("the released step: %+v, want a tombstone (known, released)", st)
	}
	if st := status("wf-ride|1"); !st.Known || st.Released || st.Holder.ID != by {
		t.Errorf("the stored step: %+v, want its copy, held by %s", st, by)
	}

	// A release the guardian answers superseded (it guards a newer
	// attempt): the copy sent with it is kept all the same, in one commit.
	if rep := f.guard(t, store("wf-ride|2", 1)); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}
	before = journalWrites(t, nodes)
	rep = f.guard(t, api.GuardStoreRelease{Store: store("wf-ride|3", 0), Release: api.GuardRelease{Key: "wf-ride|2", Attempt: 0, By: by}})
	if !rep.Superseded {
		t.Errorf("release of a re-routed attempt: %+v, want superseded", rep)
	}
	if n := journalWrites(t, nodes) - before; n != 1 {
		t.Errorf("store with a superseded release took %v journal commits, want 1", n)
	}
	if st := status("wf-ride|3"); !st.Known || st.Released {
		t.Errorf("the copy sent with a superseded release: %+v, want it kept", st)
	}
	if got := scrape(t, nf.HTTP)["bedwe_guard_copies"]; got != 3 {
		t.Errorf("%v guard copies, want 3 (wf-ride|1, wf-ride|2 and wf-ride|3)", got)
	}

	if rep := f.guard(t, api.GuardStoreRelease{Store: store("wf-ride|4", 0), Release: api.GuardRelease{Key: "wf-ride|4", By: by}}); rep.Error == "" {
		t.Errorf("a store and a release of one step: %+v, want an error", rep)
	}
}

// TestBackupCopyRidesTheRelease runs a sequence whose steps only node 1
// offers, on three real peers: every receiver takes a guardian of the
// step before as its backup, and its copy goes with that guardian's
// release (api.GuardStoreRelease) instead of a store of its own beside
// it — after the origin's hand-off of S0 as after each local one. Every
// step runs once, every guard copy is released at the end, and only the
// submission's two copies are stored apart.
func TestBackupCopyRidesTheRelease(t *testing.T) {
	const steps = 20
	recFile := t.TempDir() + "/invocations.jsonl"
	nodes := startMesh(t, "ride", 3, func(i int, cfg *node.Config) string {
		cfg.HTTP = "127.0.0.1:0"
		if i == 1 {
			return fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"S*\", kind: echo}\n", recFile)
		}
		return "version: 1\nservices:\n  unused: {kind: echo}\n"
	})
	var src strings.Builder
	for i := range steps {
		fmt.Fprintf(&src, "S%d ", i)
	}
	rides0 := requestsServed(t, nodes, api.ProtoGuardStoreRelease)
	stores0 := requestsServed(t, nodes, api.ProtoGuardStore)
	commits0 := journalWrites(t, nodes)
	final := runWorkflowInput(t, nodes[0].Addrs[0], src.String(), nil)
	if final.State != api.StateSucceeded || final.StepsDone != steps {
		t.Fatalf("%s: %s, %d steps done: %s", final.ID, final.State, final.StepsDone, final.Error)
	}
	runs := runsPerStep(t, recFile)
	for i := range steps {
		if n := runs[final.ID+" "+strconv.Itoa(i)]; n != 1 {
			t.Errorf("step %d ran %d times, want once", i, n)
		}
	}
	if len(runs) != steps {
		t.Errorf("%d steps ran, want %d", len(runs), steps)
	}
	eventually(t, 30*time.Second, "every guard copy released", func() error {
		if n := scrapeSum(t, nodes, "bedwe_guard_copies"); n != 0 {
			return fmt.Errorf("%v guard copies left", n)
		}
		return nil
	})
	rides := requestsServed(t, nodes, api.ProtoGuardStoreRelease) - rides0
	stores := requestsServed(t, nodes, api.ProtoGuardStore) - stores0
	t.Logf("%d steps: %v stores riding a release, %v stores apart, %v journal commits", steps, rides, stores, journalWrites(t, nodes)-commits0)
	// The submission's two copies (the origin's dispatch) are stored
	// apart; every step's backup rides a release of the step before.
	if rides < steps {
		t.Errorf("%v backup copies rode a release, want %d (one a step)", rides, steps)
	}
	if stores > 2 {
		t.Errorf("%v copies were stored apart, want at most 2 (the submission's)", stores)
	}
}
