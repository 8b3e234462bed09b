package node

import (
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/pack"
)

// TestHandedOnMemoryKeepsLineageAcrossRestart: the handed-on memory
// journals the chain of each attempt it remembers (pack.Lineage) and a
// restarted node reads it back, with entries of the form written before
// lineages were kept read as the first chain; without the lineage a
// restarted peer would answer another chain's hand-off of the same step
// as the one it remembers.
func TestHandedOnMemoryKeepsLineageAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	lin := pack.Lineage{Marks: []pack.Mark{{Path: "1", Attempt: 1}, {Path: "3.0/2", Attempt: 2}},
		Actor: &pack.JoinActor{Join: "j-1", Epoch: 1, Actor: "12D3KooWA"}}
	at := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	n, stop, _ := runInternalNode(t, dir, "")
	err := n.journal.Update(func(tx *journal.Tx) error {
		if err := putHandedOn(tx, "wf/4/000", at, true, lin); err != nil {
			return err
		}
		if err := putHandedOn(tx, "wf/5/000", at, false, pack.Lineage{}); err != nil {
			return err
		}
		return tx.Put(journal.BucketHandedOn, "wf/6/000", []byte("superseded "+at.Format(time.RFC3339Nano)))
	})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	n, stop, _ = runInternalNode(t, dir, "")
	defer stop()
	for _, c := range []struct {
		key        string
		superseded bool
		lineage    string
	}{
		{"wf/4/000", true, "1@1,3.0/2@2;j-1:1:12D3KooWA"},
		{"wf/5/000", false, ""},
		{"wf/6/000", true, ""},
	} {
		e, ok := n.handedOn.get(c.key)
		if !ok || e.v.superseded != c.superseded || e.v.lineage.String() != c.lineage || !e.at.Equal(at) {
			t.Errorf("%s after a restart: %+v (remembered %v), want superseded=%v lineage %q at %s", c.key, e, ok, c.superseded, c.lineage, at)
		}
	}
}
