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
	// Change every shared-looking part of the clone; the original must not move.
	c.Origin[0].Addrs[0] = "changed"
	c.Origin[1].ID = "changed"
	c.Workflow.Steps[0].(*grammar.Service).Attrs[0].Value = "1s"
	c.Workflow.Steps[1].(*grammar.Fork).Branches[0].Steps[0].(*grammar.Service).Name = "changed"
	c.Workflow.Steps[2].(*grammar.Choice).Arms[0].Guard = "false"
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
