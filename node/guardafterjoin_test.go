package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
)

// TestGuardAfterSyncNamesEarlierOutputs runs a guarded CHOICE after a
// SYNC whose guard names outputs produced before the join: the join's
// stored continuation must not be re-checked as if it were a whole
// workflow (where no step before the guard produces those labels).
func TestGuardAfterSyncNamesEarlierOutputs(t *testing.T) {
	nf := startNode(t, echoServices)
	cl, err := client.Dial(context.Background(), nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cl.Submit(ctx, "wf", `S1 FORK(S2, S3) SYNC CHOICE(IF(S1.echo.step == "0" && S2 != nil) S4, ELSE S5) ENDCHOICE`, []byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	final, err := cl.Wait(ctx, st.ID, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != api.StateSucceeded {
		t.Fatalf("state %s: %s", final.State, final.Error)
	}
	if _, ok := final.Result["S4"]; !ok {
		t.Errorf("the guard naming S1 and S2 must hold and run S4; result %v", final.Result)
	}
}
