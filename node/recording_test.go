package node_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/internal/p2ptest"
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
// late release then ends the copy, and nothing was ever re-routed. A
// guardian that claimed the re-route at once would break G18: a chain
// whose end an origin or a join was recording would run its step again.
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

// TestAStoodInBackupStepsBackForItsPrimary is node/guard G19 at a real
// node: a backup guardian whose holder dies asks the step's primary (a
// real libp2p host), which does not answer that question, so the backup
// stands in (G3). In its last questions before the re-route it asks the
// primary again, which now answers that it guards the same holder's
// attempt with a live copy: the backup steps back and watches the holder
// again instead of re-routing. Twice in a row, and nothing is re-routed:
// without G19 it would re-route beside the primary, and after a one-way
// cut healed both guardians would do so (an at-most-once step run twice,
// as in the one-way-cut test).
func TestAStoodInBackupStepsBackForItsPrimary(t *testing.T) {
	nf, lines := backupTestNode(t)
	primary := p2ptest.Host(t)
	const key = "wf-test|0"
	var holder pack.Peer
	var ready sync.WaitGroup
	ready.Add(1)
	rpc.Serve(primary, nil, api.GuardStatus{}.Protocol(), api.MaxControlFrame, 10*time.Second, func(_ context.Context, _ peer.ID, req []byte) []byte {
		var m api.GuardStatus
		if err := rpc.Dec.Unmarshal(req, &m); err != nil {
			return rpc.MustCBOR(api.GuardReply{Error: err.Error()})
		}
		if !m.Rerouting {
			// The backup's question about the silent holder is lost (a
			// mute connection after a cut).
			return rpc.MustCBOR(api.GuardReply{Error: "no answer"})
		}
		ready.Wait()
		return rpc.MustCBOR(api.GuardReply{OK: true, Known: true, Holder: holder, Attempt: 0})
	})
	told, _ := serveRecording[api.GuardRelease](primary, api.GuardRelease{}.Protocol(), 0)
	f := newFakeHolder(t, nf, api.GuardReply{OK: true})
	holder = f.ref()
	ready.Done()
	if rep := f.guard(t, api.GuardStore{Key: key, Pack: packFor(t, "S1 S2"), Holder: holder, Primary: peerRef(primary)}); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}
	if err := f.h.Close(); err != nil {
		t.Fatal(err)
	}
	const steppedBack = "not re-routing: the primary guardian this backup stood in for answers and guards the step"
	lines.waitFor(t, "primary guardian gone too; re-routing as backup", "key="+key)
	lines.waitForCount(t, 2, steppedBack, "key="+key)
	if line, _ := lines.find("msg=re-routing", "key="+key); line != "" {
		t.Fatalf("the backup re-routed beside its primary: %s", line)
	}
	select {
	case m := <-told:
		t.Fatalf("the primary was told of a re-route: %+v", m)
	default:
	}
	if rep := guardRequest(t, nf, api.GuardStatus{Key: key}); !rep.Known || rep.Released || rep.Holder.ID != holder.ID {
		t.Fatalf("the backup after stepping back: %+v, want its copy of the holder's attempt kept", rep)
	}
}

// waitForCount waits until n lines contain every one of parts.
func (l *logLines) waitForCount(t *testing.T, n int, parts ...string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		l.mu.Lock()
		got, added := 0, l.added
	next:
		for _, line := range l.lines {
			for _, p := range parts {
				if !strings.Contains(line, p) {
					continue next
				}
			}
			got++
		}
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-added:
		case <-deadline:
			t.Fatalf("%d of %d log lines with %q", got, n, parts)
		}
	}
}
