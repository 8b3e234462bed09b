package node_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/bedwe/bedwe/node/api"
)

// TestGuardAfterSyncNamesEarlierOutputs runs a guarded CHOICE after a
// SYNC whose guard names outputs produced before the join: the join's
// stored continuation must not be re-checked as if it were a whole
// workflow (where no step before the guard produces those labels).
func TestGuardAfterSyncNamesEarlierOutputs(t *testing.T) {
	nf := startNode(t, echoServices)
	final := runWorkflowInput(t, nf.Addrs[0], `S1 FORK(S2, S3) SYNC CHOICE(IF(S1.echo.step == "0" && S2 != nil) S4, ELSE S5) ENDCHOICE`, json.RawMessage(`{"x":1}`))
	if final.State != api.StateSucceeded {
		t.Fatalf("state %s: %s", final.State, final.Error)
	}
	if _, ok := final.Result["S4"]; !ok {
		t.Errorf("the guard naming S1 and S2 must hold and run S4; result %v", final.Result)
	}
}

// TestStepGetsOnlyWhatItReads: a step that declares reads= is given only
// those earlier outputs (the echo builtin lists the labels it was given),
// one without it every earlier output, and the result still holds every
// step's output. The reads of a branch's step name outputs from before the
// FORK, which the join's stored branches must accept.
func TestStepGetsOnlyWhatItReads(t *testing.T) {
	nf := startNode(t, echoServices)
	final := runWorkflowInput(t, nf.Addrs[0], `S1 S2 S3[reads=(S1)] S4[reads=()] FORK(S5[reads=(S2, S4)], S6) SYNC S7`, json.RawMessage(`{"x":1}`))
	if final.State != api.StateSucceeded {
		t.Fatalf("state %s: %s", final.State, final.Error)
	}
	saw := func(label string) []string {
		t.Helper()
		var out struct {
			Echo struct {
				Input json.RawMessage `json:"input"`
			} `json:"echo"`
			Outputs []string `json:"outputs"`
		}
		if err := json.Unmarshal(final.Result[label], &out); err != nil {
			t.Fatalf("output of %s: %v (%s)", label, err, final.Result[label])
		}
		if string(out.Echo.Input) != `{"x":1}` {
			t.Errorf("%s was given input %s, want the workflow input", label, out.Echo.Input)
		}
		return out.Outputs
	}
	for label, want := range map[string][]string{
		"S2": {"S1"},
		"S3": {"S1"},
		"S4": {},
		"S5": {"S2", "S4"},
		"S6": {"S1", "S2", "S3", "S4"},
		"S7": {"S1", "S2", "S3", "S4", "S5", "S6"},
	} {
		if got := saw(label); !slices.Equal(got, want) {
			t.Errorf("%s was given %v, want %v", label, got, want)
		}
	}
}
