package pack

import (
	"reflect"
	"testing"

	"github.com/bedwe/bedwe/grammar"
)

func TestCloneIsDeep(t *testing.T) {
	orig := fullPack()
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("clone differs from the original")
	}
	// The workflow's steps are shared (never changed once built); the
	// workflow value and its step list are not.
	if c.Workflow == orig.Workflow {
		t.Error("the clone shares the original's *grammar.Workflow")
	}
	if c.Workflow.Steps[0] != orig.Workflow.Steps[0] {
		t.Error("the clone copied the workflow's steps; they are meant to be shared")
	}
	c.Workflow.Steps[0] = &grammar.Service{Name: "replaced"}
	c.Workflow.Steps = append(c.Workflow.Steps, &grammar.Service{Name: "appended"})
	// Change every other shared-looking part of the clone; the original
	// must not move.
	c.Origin[0].Addrs[0] = "changed"
	c.Origin[1].ID = "changed"
	c.Input[0] = '['
	c.Outputs["prep"][1] = 'X'
	c.Outputs["new"] = nil
	c.Frames[0].Holders[0].ID = "changed"
	c.Frames[1].Branch = 9
	c.Sender.Addrs[0] = "changed"
	c.Trace[0].Note = "changed"
	if !reflect.DeepEqual(orig, fullPack()) {
		t.Errorf("changing the clone changed the original")
	}
	if (*Pack)(nil).Clone() != nil {
		t.Error("Clone of nil is not nil")
	}
	if m := minimalPack(); !reflect.DeepEqual(m.Clone(), m) {
		t.Error("clone of a minimal pack differs (nil fields must stay nil)")
	}
}
