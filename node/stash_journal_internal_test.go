package node

import (
	"bytes"
	"encoding/json"
	"maps"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// loadRecords reads the journal as a restart does: the records, any stash
// still inside one moved out, and the stash entries put back.
func loadRecords(t *testing.T, n *Node) map[string]*origin.Record {
	t.Helper()
	recs := map[string]*origin.Record{}
	if err := n.journal.ForEach(journal.BucketWorkflows, func(key string, value []byte) error {
		var rec origin.Record
		if err := rpc.Dec.Unmarshal(value, &rec); err != nil {
			return err
		}
		recs[key] = &rec
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.moveStashOut(recs); err != nil {
		t.Fatal(err)
	}
	if err := n.loadStash(recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestStashWritesOnlyWhatItAdds: a stash (origin O6) writes its own
// entries and leaves the workflow's record as it was, so what a workflow's
// stashes write grows with what they add, not with the square of it
// (rewriting the record, stash inside, at every stash would not). A
// restart puts the entries back, and the completion drops them.
func TestStashWritesOnlyWhatItAdds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	n := stashNode(t, path)
	const id = "wf-1"
	if _, err := n.stepOrigin(id, origin.Submitted{Source: "S1 S2 S3 S4 S5", StepsTotal: 5, Origin: "self", At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	record := func() []byte {
		v, ok, err := n.journal.Get(journal.BucketWorkflows, id)
		if err != nil || !ok {
			t.Fatalf("record of %s: ok %v, %v", id, ok, err)
		}
		return v
	}
	submitted := record()
	for i := 1; i <= 4; i++ {
		if _, err := n.stepOrigin(id, stashOf(i)); err != nil {
			t.Fatal(err)
		}
		if got := record(); !bytes.Equal(got, submitted) {
			t.Fatalf("stash %d rewrote the workflow record (%d bytes, %d when submitted)", i, len(got), len(submitted))
		}
	}
	if c, _ := n.journal.Count(journal.BucketStash); c != 8 {
		t.Fatalf("%d stash entries after 4 stashes of an output and a run each, want 8", c)
	}

	// A restart: the machine loaded from the journal holds the same stash.
	recs := loadRecords(t, n)
	live := n.origins.view(id).Record()
	if got := recs[id]; got == nil || !maps.EqualFunc(got.Stash, live.Stash, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) ||
		!reflect.DeepEqual(got.StashTrace, live.StashTrace) {
		t.Fatalf("the journal's stash differs from the live one:\njournal %d outputs, %d runs\nlive    %d outputs, %d runs",
			len(recs[id].Stash), len(recs[id].StashTrace), len(live.Stash), len(live.StashTrace))
	}

	// The completion puts every output back into the result and drops the
	// entries with the stash.
	var trace []pack.TraceEntry
	for i := 1; i <= 4; i++ {
		trace = append(trace, pack.TraceEntry{Outcome: pack.OutcomeStashed, Stash: stashOf(i).Trace.Digest})
	}
	trace = append(trace, pack.TraceEntry{Path: "4", Service: "S5", Outcome: pack.OutcomeOK})
	rd, err := n.stepOrigin(id, origin.Completed{Msg: api.OriginMsg{WorkflowID: id, Done: true, OK: true,
		Outputs: map[string]json.RawMessage{"S5": json.RawMessage(`5`)}, Trace: trace}, At: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rd.Emit.Missing) > 0 {
		t.Fatalf("the completion misses %v", rd.Emit.Missing)
	}
	if got := len(n.origins.view(id).Status(true).Result); got != 5 {
		t.Fatalf("the result holds %d outputs, want 5", got)
	}
	if c, _ := n.journal.Count(journal.BucketStash); c != 0 {
		t.Fatalf("%d stash entries left after the completion", c)
	}
}

// TestStashInsideAnOldRecordMovesOut: a record written before the stash
// had entries of its own holds it inside. A restart moves it out (entries
// written, the record rewritten without it) before anything steps, so the
// record's next write, which never holds a stash, loses nothing.
func TestStashInsideAnOldRecordMovesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	n := stashNode(t, path)
	const id = "wf-old"
	s1, s2 := stashOf(1), stashOf(2)
	old := origin.Record{
		Status: api.Status{ID: id, State: api.StateRunning, StepsTotal: 3},
		Source: "S1 S2 S3",
		Stash: map[string]json.RawMessage{
			origin.StashKey("S1", s1.Outputs[0].Digest): s1.Outputs[0].Value,
			origin.StashKey("S2", s2.Outputs[0].Digest): s2.Outputs[0].Value,
		},
		StashTrace: map[string][]pack.TraceEntry{s1.Trace.Digest: s1.Trace.Entries},
	}
	if err := n.journal.Put(journal.BucketWorkflows, id, rpc.MustCBOR(&old)); err != nil {
		t.Fatal(err)
	}
	recs := loadRecords(t, n)
	if got := recs[id]; !reflect.DeepEqual(got.Stash, old.Stash) || !reflect.DeepEqual(got.StashTrace, old.StashTrace) {
		t.Fatalf("loaded stash %d outputs, %d runs; want %d, %d", len(got.Stash), len(got.StashTrace), len(old.Stash), len(old.StashTrace))
	}
	var onDisk origin.Record
	v, _, _ := n.journal.Get(journal.BucketWorkflows, id)
	if err := rpc.Dec.Unmarshal(v, &onDisk); err != nil {
		t.Fatal(err)
	}
	if len(onDisk.Stash) > 0 || len(onDisk.StashTrace) > 0 {
		t.Fatalf("the record still holds its stash after the move (%d outputs, %d runs)", len(onDisk.Stash), len(onDisk.StashTrace))
	}
	if c, _ := n.journal.Count(journal.BucketStash); c != 3 {
		t.Fatalf("%d stash entries, want 3", c)
	}
	// Loaded twice (a second restart), the same.
	if again := loadRecords(t, n); !reflect.DeepEqual(again[id].Stash, old.Stash) {
		t.Fatalf("a second load has %d outputs, want %d", len(again[id].Stash), len(old.Stash))
	}
}
