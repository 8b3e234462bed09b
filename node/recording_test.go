package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// TestAGuardianWaitsForTheRecordItsProbeAnswered is node/guard G18 at a
// real node: an origin probes the release of a chain's last step before it
// records the completion, and releases the step's guardian only once it
// has. Here the record fails after the probe (this node has no record of
// the workflow), so no release comes; the step's holder then goes silent.
// The guardian must not re-route the step while the record may still come
// (the hold), and must say so to a backup that asks it. The
// late release then ends the copy, and nothing was ever re-routed. Before
// G18 the guardian claimed the re-route at once: a chain whose end an
// origin or a join was recording ran its step again (reliability-core
// "Left undone" 23).
func TestAGuardianWaitsForTheRecordItsProbeAnswered(t *testing.T) {
	lines := newLogLines()
	nf := startGuardian(t, lines)
	f := newFakeHolder(t, nf, api.GuardReply{OK: true})
	const key = "wf-recording|0"
	if rep := f.guard(t, api.GuardStore{Key: key, Pack: packFor(t, "S1 S2"), Holder: f.ref()}); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}

	h, id := rawHost(t, nf)
	msg := api.OriginMsg{WorkflowID: "wf-recording", Done: true, OK: true,
		Settle: []pack.Settle{{Kind: pack.SettleGuard, Key: key, Peers: []pack.Peer{{ID: id.String()}}}}}
	var ack api.Ack
	if err := rpc.CallCBOR(context.Background(), h, id, api.ProtoOrigin, msg, &ack, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code == api.CodeSuperseded || ack.Code == api.CodeUnsettled {
		t.Fatalf("completion of a workflow the node has no record of: %+v, want it probed and then not recorded", ack)
	}

	// The holder "loses power" after it sent the completion.
	if err := f.h.Close(); err != nil {
		t.Fatal(err)
	}
	lines.waitFor(t, "not re-routing yet: a join or an origin is recording the step's next hop", "key="+key)
	// A backup asking this primary about the silent holder waits too.
	rep := guardRequest(t, nf, api.GuardStatus{Key: key, Holder: f.h.ID().String(), Attempt: 0})
	if !rep.Known || rep.Released || !rep.Recording {
		t.Fatalf("a backup asked its primary: %+v, want the copy held and said to be recording", rep)
	}

	// The record's release, late.
	if rep := guardRequest(t, nf, api.GuardRelease{Key: key}); !rep.OK || rep.Superseded {
		t.Fatalf("release after the record: %+v, want released", rep)
	}
	if rep := guardRequest(t, nf, api.GuardStatus{Key: key}); !rep.Known || !rep.Released {
		t.Fatalf("guardian after the release: %+v, want released", rep)
	}
	if line, _ := lines.find("msg=re-routing", "key="+key); line != "" {
		t.Fatalf("the guardian re-routed a step whose next hop was being recorded: %s", line)
	}
}
