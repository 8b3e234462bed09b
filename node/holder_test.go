package node_test

import "testing"

// TestSameAttemptHandedTwiceRunsOnce hands one pack to a real node twice
// while its step runs (a sender whose first hand-off timed out tries the
// same peer again): both hand-offs are acknowledged, and the step runs
// once — counted in the services' invocation record after the node handed
// the step on. Before the holder machine, the second hand-off journaled
// and ran the step a second time.
func TestSameAttemptHandedTwiceRunsOnce(t *testing.T) {
	nf, recFile, evFile := recordingNode(t, "  S1: {kind: sleep, duration: 1500ms}\n")
	h, id := rawHost(t, nf)
	payload := packFor(t, "S1 S2")
	for i := range 2 {
		ack, err := handoff(t, h, id, payload)
		if err != nil {
			t.Fatal(err)
		}
		if !ack.OK {
			t.Fatalf("hand-off %d: %+v, want OK", i+1, ack)
		}
	}
	// S1 is handed on (to S2, on the same node) once it ended.
	waitHandedOn(t, evFile, "0")
	if runs := countRuns(t, recFile, "S1"); runs != 1 {
		t.Fatalf("S1 ran %d times, want 1", runs)
	}
}
