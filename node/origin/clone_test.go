package origin

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

// TestSteppingACloneLeavesTheOriginal: the node steps a clone and keeps
// the original when the journal refuses the write, so no event may reach
// the original through what a clone shares with it (Record.clone shares
// the slices and maps Step only ever replaces whole).
func TestSteppingACloneLeavesTheOriginal(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	entry := func(i int) pack.TraceEntry {
		return pack.TraceEntry{Path: fmt.Sprint(i), Service: "S", Peer: "p", Outcome: pack.OutcomeOK,
			Start: at.Add(time.Duration(i) * time.Second), End: at.Add(time.Duration(i)*time.Second + time.Millisecond)}
	}
	w := New("wf-1")
	w.Step(Submitted{Source: "S S S", StepsTotal: 3, Origin: "o", Origins: []string{"/o"},
		Replicas: []pack.Peer{{ID: "r"}}, At: at})
	// Recent full, with room to grow in place, and a stash of each kind.
	for i := range RecentEvents + 3 {
		w.Step(Progress{Entry: entry(i)})
	}
	out := json.RawMessage(`"x"`)
	w.Step(Stashed{Outputs: []pack.StashedOutput{{Label: "S", Digest: pack.Digest(out), Value: out}}})
	run := []pack.TraceEntry{entry(0), entry(1)}
	w.Step(Stashed{Trace: &pack.StashedTrace{Digest: pack.TraceDigest(run), Entries: run}})
	before := w.Record()

	events := []Event{
		Progress{Entry: entry(100)},
		Stashed{Outputs: []pack.StashedOutput{{Label: "T", Digest: pack.Digest(out), Value: out}}},
		Completed{Msg: api.OriginMsg{WorkflowID: "wf-1", Done: true, OK: true,
			Outputs: map[string]json.RawMessage{"S": out}, Trace: []pack.TraceEntry{entry(7)}}, At: at},
		Prune{Before: at.Add(time.Hour), Forget: at.Add(2 * time.Hour)},
	}
	c := w.Clone()
	for _, ev := range events {
		c.Step(ev)
		if got := w.Record(); !reflect.DeepEqual(got, before) {
			t.Fatalf("stepping a clone with %T changed the original:\nbefore %+v\nafter  %+v", ev, before, got)
		}
		// The next event steps a clone of the clone, as the node does.
		c = c.Clone()
	}
	if c.Running() || !c.Pruned() {
		t.Fatalf("the clone did not end and get pruned (running %v, pruned %v): the events did not apply", c.Running(), c.Pruned())
	}
}
