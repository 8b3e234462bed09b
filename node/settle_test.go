package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// TestSupersededChainCompletionRefused is I1 at a real node: a guardian
// re-routes a step whose holder vanished, and a completion whose last
// step is that step's superseded attempt — the end of the old chain — is
// refused at the origin before it is recorded, with the superseded code,
// while the same completion naming the re-routed attempt is not (it fails
// later, for a workflow this test never submitted). Before the release
// probe (node/guard G6) the origin recorded such a completion and only
// noted the superseded answer afterwards.
func TestSupersededChainCompletionRefused(t *testing.T) {
	lines := newLogLines()
	nf := startGuardian(t, lines)
	f := newFakeHolder(t, nf, api.GuardReply{OK: true})
	const key = "wf-test|0"
	if rep := f.guard(t, api.GuardStore{Key: key, Pack: packFor(t, "S1 S2"), Holder: f.ref()}); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}
	// The holder "loses power"; the guardian re-routes S1 (to itself: it
	// offers S1) at attempt 1.
	if err := f.h.Close(); err != nil {
		t.Fatal(err)
	}
	lines.waitFor(t, "msg=re-routing", "key="+key, "attempt=1")

	h, id := rawHost(t, nf)
	self := pack.Peer{ID: id.String()}
	complete := func(attempt int) api.Ack {
		msg := api.OriginMsg{WorkflowID: "wf-test", Done: true, OK: true,
			Settle: []pack.Settle{{Kind: pack.SettleGuard, Key: key, Attempt: attempt, Peers: []pack.Peer{self}}}}
		var ack api.Ack
		if err := rpc.CallCBOR(context.Background(), h, id, api.ProtoOrigin, msg, &ack, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		return ack
	}
	if ack := complete(0); ack.OK || ack.Code != api.CodeSuperseded {
		t.Errorf("completion of the superseded attempt: %+v, want refused with code %s", ack, api.CodeSuperseded)
	}
	if ack := complete(1); ack.Code == api.CodeSuperseded {
		t.Errorf("completion of the re-routed attempt refused as superseded: %+v", ack)
	}
}
