package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/node/service"
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

// withSettle returns the pack raw with its settle list set to items.
func withSettle(t *testing.T, raw []byte, items ...pack.Settle) []byte {
	return editPack(t, raw, func(p *pack.Pack) { p.Settle = items })
}

// editPack decodes raw, lets edit change the pack and encodes it again.
func editPack(t *testing.T, raw []byte, edit func(*pack.Pack)) []byte {
	t.Helper()
	p, err := pack.Decode(raw, pack.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	edit(p)
	b, err := pack.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// peerRef names a raw host as a pack peer.
func peerRef(h host.Host) pack.Peer {
	ref := pack.Peer{ID: h.ID().String()}
	for _, a := range h.Addrs() {
		ref.Addrs = append(ref.Addrs, a.String())
	}
	return ref
}

// goneHost is a peer that was a real libp2p host on loopback and is
// closed: cut off or killed, nobody can tell (it answers nothing).
func goneHost(t *testing.T) pack.Peer {
	t.Helper()
	gone, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	ref := peerRef(gone)
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	return ref
}

// countRuns counts the invocations of svc in a services record file.
func countRuns(t *testing.T, recFile, svc string) int {
	t.Helper()
	recs, err := service.ReadRecords(recFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	runs := 0
	for _, r := range recs {
		if r.Service == svc {
			runs++
		}
	}
	return runs
}

// runsPerStep counts the invocations in a services record file by
// workflow and step path, keyed "WORKFLOW STEP".
func runsPerStep(t *testing.T, recFile string) map[string]int {
	t.Helper()
	recs, err := service.ReadRecords(recFile)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, r := range recs {
		runs[r.Workflow+" "+r.Step]++
	}
	return runs
}

// waitHandedOn waits until the events file shows step handed on.
func waitHandedOn(t *testing.T, evFile, step string) {
	t.Helper()
	waitEvents(t, evFile, events.HandedOn, step, 1)
}

// recordingNode starts a testnet-timed node offering every S* service
// (echo, plus the declarations in services, YAML lines under services:)
// whose invocations go to recFile and whose events go to evFile.
func recordingNode(t *testing.T, services string) (nf api.NodeFile, recFile, evFile string) {
	t.Helper()
	return recordingNodeWith(t, services, nil)
}

// recordingNodeWith is recordingNode with edit applied to its config.
func recordingNodeWith(t *testing.T, services string, edit func(*node.Config)) (nf api.NodeFile, recFile, evFile string) {
	t.Helper()
	dir := t.TempDir()
	recFile = filepath.Join(dir, "invocations.jsonl")
	evFile = filepath.Join(dir, "events.jsonl")
	yaml := fmt.Sprintf("version: 1\nrecord: %s\n", recFile)
	if services != "" {
		yaml += "services:\n" + services
	}
	yaml += "patterns:\n  - {match: \"S*\", kind: echo}\n"
	cfg := testConfig(t, node.TestnetConfig(), yaml)
	cfg.EventsFile = evFile
	if edit != nil {
		edit(&cfg)
	}
	nf, _ = runNode(t, cfg)
	return nf, recFile, evFile
}

// TestUnansweredSettleRefusesHandover is "no answer is not a release"
// (I1) at a real node: a hand-off whose only
// guardian to release does not answer (a real libp2p host, closed: cut
// off or killed, the receiver cannot tell) is refused with the unsettled
// code and nothing runs; the same hand-off with the item marked lenient
// (the sender gave up waiting: the guardian was killed) is taken, and the
// step runs once — counted in the services' invocation record. A
// receiver that took the silent guardian as gone would acknowledge at
// once.
func TestUnansweredSettleRefusesHandover(t *testing.T) {
	nf, recFile, evFile := recordingNode(t, "")
	h, id := rawHost(t, nf)
	item := pack.Settle{Kind: pack.SettleGuard, Key: "wf-test|0", Attempt: 0, Peers: []pack.Peer{goneHost(t)}}
	ack, err := handoff(t, h, id, withSettle(t, packFor(t, "S1 S2"), item))
	if err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code != api.CodeUnsettled {
		t.Fatalf("hand-off with an unanswered guardian: %+v, want refused with code %s", ack, api.CodeUnsettled)
	}
	// A guardian that watches this peer for the step (its sender could
	// not hand it here again) is told it never took it (node/guard G10),
	// not that it moved on.
	if rep := offerWatcherTo(t, h, id, journal.StepKey("wf-test", "0")); !rep.OK || rep.Released || !rep.NeverTook {
		t.Fatalf("watcher offered for the refused step: %+v, want never took (not released)", rep)
	}
	item.Lenient = true
	ack, err = handoff(t, h, id, withSettle(t, packFor(t, "S1 S2"), item))
	if err != nil {
		t.Fatal(err)
	}
	if !ack.OK {
		t.Fatalf("lenient hand-off: %+v, want OK", ack)
	}
	waitHandedOn(t, evFile, "0")
	if runs := countRuns(t, recFile, "S1"); runs != 1 {
		t.Fatalf("S1 ran %d times, want 1 (the refused hand-off must not run)", runs)
	}
	waitNotHeld(t, h, id, journal.StepKey("wf-test", "0"))
	if rep := offerWatcherTo(t, h, id, journal.StepKey("wf-test", "0")); !rep.OK || !rep.Released || rep.NeverTook {
		t.Fatalf("watcher offered for the step taken and handed on: %+v, want released", rep)
	}
}

// offerWatcherTo offers h as a watcher of step key at attempt 0 held at id.
func offerWatcherTo(t *testing.T, h host.Host, id peer.ID, key string) api.GuardReply {
	t.Helper()
	var rep api.GuardReply
	msg := api.HeldAddWatcher{Key: key, Attempt: 0, Watcher: peerRef(h)}
	if err := rpc.CallCBOR(context.Background(), h, id, msg.Protocol(), msg, &rep, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestSecondSuccessorRefused is guard invariant G8 on real nodes: a
// sender hands the same step to receiver A and, its ack lost, to receiver
// B. Both settle the step before it with the same guardian G; G was
// released by A, so it answers B's release superseded naming A, B refuses
// the pack with the taken code naming A (the sender then guards the step
// at A), and the step runs once (counted in the invocation record).
// Before G8, G answered "released already" and the step ran on both.
func TestSecondSuccessorRefused(t *testing.T) {
	dir := t.TempDir()
	recFile := filepath.Join(dir, "invocations.jsonl")
	services := fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"S*\", kind: echo}\n", recFile)
	gf := startNode(t, echoServices)
	cfgA := testConfig(t, node.TestnetConfig(), services)
	cfgA.EventsFile = filepath.Join(dir, "a-events.jsonl")
	af, _ := runNode(t, cfgA)
	bf, _ := runNode(t, testConfig(t, node.TestnetConfig(), services))

	hg, g := rawHost(t, gf)
	const key = "wf-test|0"
	var rep api.GuardReply
	store := api.GuardStore{Key: key, Pack: packFor(t, "S0 S1 S2"), Holder: peerRef(hg)}
	if err := rpc.CallCBOR(context.Background(), hg, g, store.Protocol(), store, &rep, 10*time.Second); err != nil || !rep.OK {
		t.Fatalf("store: %v %+v", err, rep)
	}
	gref := pack.Peer{ID: gf.PeerID, Addrs: gf.Addrs}
	payload := withSettle(t, packFor(t, "S1 S2"), pack.Settle{Kind: pack.SettleGuard, Key: key, Peers: []pack.Peer{gref}})

	handToAThenB(t, af, bf, payload)
	waitHandedOn(t, cfgA.EventsFile, "0")
	if runs := countRuns(t, recFile, "S1"); runs != 1 {
		t.Fatalf("S1 ran %d times, want 1", runs)
	}
}

// TestSecondContinuationReceiverRefused is join invariant J8 on real
// nodes: a join actor hands its continuation to receiver A and, its ack
// lost (a cut between them), to receiver B. Both settle it with the join's
// replica C, naming the actor. C recorded A as the receiver, so it answers
// B superseded naming A; B refuses the pack with the taken code naming A
// (the actor then hands the pack to A again), and the step after the join
// runs once — counted in the invocation record. Without J8, C would answer
// B "forwarded already" and the step after SYNC would run on both.
func TestSecondContinuationReceiverRefused(t *testing.T) {
	dir := t.TempDir()
	recFile := filepath.Join(dir, "invocations.jsonl")
	services := fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"S*\", kind: echo}\n", recFile)
	cf := startNode(t, echoServices)
	cfgA := testConfig(t, node.TestnetConfig(), services)
	cfgA.EventsFile = filepath.Join(dir, "a-events.jsonl")
	af, _ := runNode(t, cfgA)
	bf, _ := runNode(t, testConfig(t, node.TestnetConfig(), services))

	actor, cref := joinReplicaAt(t, cf, "j-test")
	payload := withSettle(t, packFor(t, "S1 S2"), pack.Settle{Kind: pack.SettleJoinForwarded, Key: "j-test", Peers: []pack.Peer{cref}, Epoch: 0, Actor: actor.ID})

	ha, a := handToAThenB(t, af, bf, payload)
	// A asked again (the actor's hand-off to the first receiver, J8)
	// answers as it did: it holds the step, which runs there once.
	if ack, err := handoff(t, ha, a, payload); err != nil || !ack.OK {
		t.Fatalf("continuation to A again: %v %+v, want OK", err, ack)
	}
	waitHandedOn(t, cfgA.EventsFile, "0")
	if runs := countRuns(t, recFile, "S1"); runs != 1 {
		t.Fatalf("S1 ran %d times, want 1", runs)
	}
}

// TestHandedOnAttemptNotRunAgain is I2 at a real holder after its record
// is gone: a step ran and was handed on, and the holder dropped its
// record; the same attempt handed to it again (a sender whose ack was
// lost tries again, or the actor of a join hands a continuation to the
// receiver a taken refusal named, J8) is answered as taken and does not
// run again — counted in the invocation record. Before the holder
// remembered what it handed on, the second hand-off ran the step again.
func TestHandedOnAttemptNotRunAgain(t *testing.T) {
	nf, recFile, evFile := recordingNode(t, "")
	h, id := rawHost(t, nf)
	payload := packFor(t, "S1 S2")
	if ack, err := handoff(t, h, id, payload); err != nil || !ack.OK {
		t.Fatalf("hand-off: %v %+v, want OK", err, ack)
	}
	waitHandedOn(t, evFile, "0")
	waitNotHeld(t, h, id, journal.StepKey("wf-test", "0"))
	ack, err := handoff(t, h, id, payload)
	if err != nil || !ack.OK {
		t.Fatalf("the same attempt again: %v %+v, want OK (taken before)", err, ack)
	}
	// A second acceptance would hold the step (from before its ack) until
	// it ran and moved on again.
	waitNotHeld(t, h, id, journal.StepKey("wf-test", "0"))
	if runs := countRuns(t, recFile, "S1"); runs != 1 {
		t.Fatalf("S1 ran %d times, want 1", runs)
	}
}

// waitNotHeld waits until the node id no longer holds step key at attempt
// 0 (it answers a watcher offer "released").
func waitNotHeld(t *testing.T, h host.Host, id peer.ID, key string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rep api.GuardReply
		msg := api.HeldAddWatcher{Key: key, Attempt: 0, Watcher: peerRef(h)}
		if err := rpc.CallCBOR(context.Background(), h, id, msg.Protocol(), msg, &rep, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if rep.Released {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds %s after 30s: %+v", id, key, rep)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// joinReplicaAt makes a raw host (the actor: it answers pings, so the
// copy never takes over from it while a test runs) the primary of a join
// id and gives node nf a replica copy of it.
func joinReplicaAt(t *testing.T, nf api.NodeFile, id string) (actor, replica pack.Peer) {
	t.Helper()
	hp, c := rawHost(t, nf)
	actor = peerRef(hp)
	replica = pack.Peer{ID: nf.PeerID, Addrs: nf.Addrs}
	primary := join.New(join.Record{ID: id, WorkflowID: "wf-test", Kind: pack.FrameFork,
		Branches: []*join.Body{{Text: "S0"}}, Replicas: []pack.Peer{replica}, Created: time.Now().UTC()}, actor)
	cp := primary.ReplicaCopy(0)
	var rep api.GuardReply
	msg := api.JoinReplica{Record: rpc.MustCBOR(&cp)}
	if err := rpc.CallCBOR(context.Background(), hp, c, msg.Protocol(), msg, &rep, 10*time.Second); err != nil || !rep.OK {
		t.Fatalf("join replica: %v %+v", err, rep)
	}
	return actor, replica
}

// TestOwnAnswerDoesNotSettle: a receiver that holds one of the join's
// copies itself gets its continuation, and the join's other copy does not
// answer (cut off or killed: it cannot tell). Its own copy's answer does
// not settle the item — the silent copy may have recorded another
// receiver — so it refuses as unsettled and nothing runs. Were its own
// answer to count, a flapping link could run the step after SYNC on two
// peers.
func TestOwnAnswerDoesNotSettle(t *testing.T) {
	nf, recFile, _ := recordingNode(t, "")
	actor, self := joinReplicaAt(t, nf, "j-own")
	other := goneHost(t)
	h, id := rawHost(t, nf)
	payload := withSettle(t, packFor(t, "S1 S2"), pack.Settle{Kind: pack.SettleJoinForwarded, Key: "j-own", Peers: []pack.Peer{self, other}, Epoch: 0, Actor: actor.ID})
	ack, err := handoff(t, h, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code != api.CodeUnsettled {
		t.Fatalf("continuation settled only by the receiver's own copy: %+v, want refused with code %s", ack, api.CodeUnsettled)
	}
	if runs := countRuns(t, recFile, "S1"); runs != 0 {
		t.Fatalf("S1 ran %d times, want 0", runs)
	}
}

// TestRefusedReceiverGivesWay is the yield of guard G8 on real nodes: the
// step before has two guardians, G1 and G2; G2 was released by successor
// X already (X's answer lost), G1 not. Receiver A of the same attempt
// releases G1 (its answer comes first) and is refused by G2 naming X; A
// refuses the pack and gives way at G1, which then names X too — so X,
// handed the pack again by the sender, is not refused naming A (which
// holds nothing). Without the yield the two would name each other for
// ever (a workflow stuck in "taken" refusals).
func TestRefusedReceiverGivesWay(t *testing.T) {
	g1f, g2f := startNode(t, echoServices), startNode(t, echoServices)
	af, recFile, _ := recordingNode(t, "")
	const key = "wf-test|0"
	const x = "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD" // successor X
	call := func(nf api.NodeFile, m api.GuardRequest) api.GuardReply { return guardRequest(t, nf, m) }
	holder := pack.Peer{ID: af.PeerID} // any holder: only the tombstones matter here
	for _, g := range []api.NodeFile{g1f, g2f} {
		if rep := call(g, api.GuardStore{Key: key, Pack: packFor(t, "S0 S1 S2"), Holder: holder}); !rep.OK {
			t.Fatalf("store: %+v", rep)
		}
	}
	if rep := call(g2f, api.GuardRelease{Key: key, By: x}); !rep.OK || rep.Superseded {
		t.Fatalf("X's release at G2: %+v", rep)
	}
	g1 := pack.Peer{ID: g1f.PeerID, Addrs: g1f.Addrs}
	g2 := pack.Peer{ID: g2f.PeerID, Addrs: g2f.Addrs}
	h, a := rawHost(t, af)
	ack, err := handoff(t, h, a, withSettle(t, packFor(t, "S1 S2"), pack.Settle{Kind: pack.SettleGuard, Key: key, Peers: []pack.Peer{g1, g2}}))
	if err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code != api.CodeTaken || len(ack.Guardians) != 1 || ack.Guardians[0].ID != x {
		t.Fatalf("hand-off to A: %+v, want refused with code %s naming X", ack, api.CodeTaken)
	}
	// G1 names X now: A's release would be refused naming X, X's is not.
	if rep := call(g1f, api.GuardRelease{Key: key, Probe: true, By: af.PeerID}); !rep.Superseded || rep.Holder.ID != x {
		t.Errorf("G1 after A gave way, probed for A: %+v, want superseded naming X", rep)
	}
	if rep := call(g1f, api.GuardRelease{Key: key, Probe: true, By: x}); rep.Superseded {
		t.Errorf("G1 after A gave way, probed for X: %+v, want not superseded", rep)
	}
	if runs := countRuns(t, recFile, "S1"); runs != 0 {
		t.Fatalf("S1 ran %d times at A, want 0", runs)
	}
}

// handToAThenB hands payload to node A (which must take it) and then the
// same attempt to node B, which must refuse it with the taken code naming
// A (G8, J8); it returns the host that reached A.
func handToAThenB(t *testing.T, af, bf api.NodeFile, payload []byte) (host.Host, peer.ID) {
	t.Helper()
	ha, a := rawHost(t, af)
	if ack, err := handoff(t, ha, a, payload); err != nil || !ack.OK {
		t.Fatalf("hand-off to A: %v %+v, want OK", err, ack)
	}
	hb, b := rawHost(t, bf)
	ack, err := handoff(t, hb, b, payload)
	if err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code != api.CodeTaken || len(ack.Guardians) != 1 || ack.Guardians[0].ID != af.PeerID {
		t.Fatalf("the same attempt to B: %+v, want refused with code %s naming A (%s)", ack, api.CodeTaken, af.PeerID)
	}
	return ha, a
}

// withOrigin returns raw with its origin set to origin.
func withOrigin(t *testing.T, raw []byte, origin pack.Peer) []byte {
	return editPack(t, raw, func(p *pack.Pack) { p.Origin = []pack.Peer{origin} })
}

// withTrace returns raw with trace set to entries.
func withTrace(t *testing.T, raw []byte, entries ...pack.TraceEntry) []byte {
	return editPack(t, raw, func(p *pack.Pack) { p.Trace = entries })
}

// serveRecording answers requests on proto at h with OK, after failing
// (resetting the stream of) the first failFirst calls, and sends every
// request it answered, decoded, to the returned channel; calls counts them
// all.
func serveRecording[T any](h host.Host, proto string, failFirst int32) (got <-chan T, calls *atomic.Int32) {
	ch := make(chan T, 16)
	calls = &atomic.Int32{}
	rpc.Serve(h, nil, proto, api.MaxControlFrame, 10*time.Second, func(_ context.Context, _ peer.ID, req []byte) []byte {
		if calls.Add(1) <= failFirst {
			return nil
		}
		var m T
		if err := rpc.Dec.Unmarshal(req, &m); err != nil {
			return nil
		}
		ch <- m
		return rpc.MustCBOR(api.GuardReply{OK: true})
	})
	return ch, calls
}

// waitEvents waits until the events file shows n events of type typ for
// step.
func waitEvents(t *testing.T, evFile, typ, step string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, err := events.Read(evFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		seen := 0
		for _, e := range evs {
			if e.Type == typ && e.Step == step {
				seen++
			}
		}
		if seen >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s events for step %s after 30s, want %d", seen, typ, step, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChainsOfOneStepToldApart: two chains of a workflow reach the same
// step at the same attempt — a guardian re-routed the step before it
// (attempt 1) while its holder, cut off, ran attempt 0 and handed on. The
// peer they both reach tells them apart by their lineage (pack.Lineage):
// the newer chain, handed while the older one is held, is refused busy
// (sent elsewhere), not answered as the older one ends — a "superseded"
// there would make the newer chain drop its work and lose the workflow;
// once the older one ended, the newer one is taken and runs; and the
// older chain, handed where the newer one ran, is refused as superseded —
// answered "taken", the old chain would go on past its next hop (I1).
// Executions are counted from the
// services' record.
func TestChainsOfOneStepToldApart(t *testing.T) {
	nf, recFile, evFile := recordingNode(t, "  S1: {kind: sleep, duration: 1500ms}\n")
	h, id := rawHost(t, nf)
	// h is the workflow's origin too: it takes every completion, so each
	// chain's records end here and are remembered as handed on.
	rpc.Serve(h, nil, api.ProtoOrigin, api.MaxControlFrame, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
		return rpc.MustCBOR(api.Ack{OK: true})
	})
	older := withOrigin(t, packFor(t, "S1 S2"), peerRef(h))
	now := time.Now().UTC()
	newer := withTrace(t, older,
		pack.TraceEntry{Path: "prev", Service: "S0", Peer: nf.PeerID, Start: now, End: now, Attempt: 0, Outcome: pack.OutcomeSuperseded},
		pack.TraceEntry{Path: "prev", Service: "S0", Peer: nf.PeerID, Start: now, End: now, Attempt: 1, Outcome: pack.OutcomeOK})

	if ack, err := handoff(t, h, id, older); err != nil || !ack.OK {
		t.Fatalf("older chain: %v %+v, want OK", err, ack)
	}
	ack, err := handoff(t, h, id, newer)
	if err != nil || ack.OK || ack.Code != api.CodeBusy {
		t.Fatalf("newer chain while the older one is held: %v %+v, want refused with code %s", err, ack, api.CodeBusy)
	}
	waitEvents(t, evFile, events.HandedOn, "0", 1)
	waitNotHeld(t, h, id, journal.StepKey("wf-test", "0"))

	if ack, err := handoff(t, h, id, newer); err != nil || !ack.OK {
		t.Fatalf("newer chain after the older one ended: %v %+v, want OK", err, ack)
	}
	waitEvents(t, evFile, events.HandedOn, "0", 2)
	waitNotHeld(t, h, id, journal.StepKey("wf-test", "0"))
	if runs := countRuns(t, recFile, "S1"); runs != 2 {
		t.Fatalf("S1 ran %d times, want 2 (once per chain)", runs)
	}

	ack, err = handoff(t, h, id, older)
	if err != nil || ack.OK || ack.Code != api.CodeSuperseded {
		t.Fatalf("older chain where the newer one ran: %v %+v, want refused with code %s", err, ack, api.CodeSuperseded)
	}
	if ack, err := handoff(t, h, id, newer); err != nil || !ack.OK {
		t.Fatalf("newer chain again (its ack lost): %v %+v, want OK (taken before)", err, ack)
	}
	if runs := countRuns(t, recFile, "S1"); runs != 2 {
		t.Fatalf("S1 ran %d times, want 2", runs)
	}
}

// TestReplicaRelaysOldActorsBranchEnd is join J9 at a real node: a
// replica that follows a new actor (a copy took the join over at epoch 1)
// gets a branch end from the old actor — cut off, it had not heard, took
// the end and replicated it — and relays it to the new actor, a real
// libp2p host that records what reaches it. Otherwise the end would stay
// at copies that do not act and the new actor would wait for ever (the
// workflow lost, as in isolate-join-holder).
func TestReplicaRelaysOldActorsBranchEnd(t *testing.T) {
	nf, _, _ := recordingNode(t, "")
	joinReplicaAt(t, nf, "j-relay")
	newActor := p2ptest.Host(t)
	got, _ := serveRecording[api.JoinUpdate](newActor, api.ProtoJoinUpdate, 0)

	h, id := rawHost(t, nf)
	call := func(m api.GuardRequest) api.GuardReply {
		t.Helper()
		var rep api.GuardReply
		if err := rpc.CallCBOR(context.Background(), h, id, m.Protocol(), m, &rep, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := call(api.JoinActor{Key: "j-relay", Holder: peerRef(newActor), Epoch: 1}); !rep.OK {
		t.Fatalf("new actor: %+v", rep)
	}
	// The update comes from a peer that is not the new actor (the old
	// actor stands for any).
	hp := p2ptest.Host(t)
	ai, err := peer.AddrInfoFromString(nf.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := hp.Connect(context.Background(), *ai); err != nil {
		t.Fatal(err)
	}
	upd := api.JoinUpdate{Key: "j-relay", Delivery: api.Delivery{WorkflowID: "wf-test", JoinID: "j-relay", Branch: 0, OK: true}}
	var rep api.GuardReply
	if err := rpc.CallCBOR(context.Background(), hp, id, upd.Protocol(), upd, &rep, 10*time.Second); err != nil || !rep.OK {
		t.Fatalf("update from the old actor: %v %+v", err, rep)
	}
	select {
	case m := <-got:
		if m.Key != "j-relay" || m.Delivery.Branch != 0 || !m.Delivery.OK {
			t.Fatalf("relayed %+v, want branch 0 of j-relay", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the new actor never got the branch end the old actor replicated to the replica")
	}
}

// TestJoinCopyThatMissedABranchStartIsToldLater is join J6 at a real
// node: a branch's first holder registers with every copy of the join
// before it acknowledges, and the item counts as settled once one copy
// answered — so a copy whose call failed (a stream reset here) does not
// learn who holds the branch, and taking the join over later it would
// start the branch a second time (a branch step run twice, as in
// isolate-join-holder). So the holder tells such a copy once it has taken
// the work (completeSettle). The copies are real libp2p hosts; the one that
// failed the first call records what reaches it afterwards.
func TestJoinCopyThatMissedABranchStartIsToldLater(t *testing.T) {
	nf, _, _ := recordingNode(t, "")
	answering, missing := p2ptest.Host(t), p2ptest.Host(t)
	rpc.Serve(answering, nil, api.ProtoJoinBranch, api.MaxControlFrame, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
		return rpc.MustCBOR(api.GuardReply{OK: true})
	})
	told, calls := serveRecording[api.JoinBranch](missing, api.ProtoJoinBranch, 1) // the first call fails
	h, id := rawHost(t, nf)
	item := pack.Settle{Kind: pack.SettleBranchStarted, Key: "j-missed", Branch: 1, Peers: []pack.Peer{peerRef(answering), peerRef(missing)}, Epoch: 0, Actor: answering.ID().String()}
	if ack, err := handoff(t, h, id, withSettle(t, packFor(t, "S1"), item)); err != nil || !ack.OK {
		t.Fatalf("branch start: %v %+v, want OK (one copy answered)", err, ack)
	}
	select {
	case m := <-told:
		if m.Key != "j-missed" || m.Branch != 1 || m.Holder.ID != nf.PeerID {
			t.Fatalf("the copy was told %+v, want branch 1 of j-missed held by %s", m, nf.PeerID)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the copy whose call failed was never told who holds the branch (%d calls)", calls.Load())
	}
}

// TestRefusedHandoverWithdrawsItsBackup is guard invariant G11 on real
// nodes: receiver A, in a mesh with B, takes a hand-over, recruits B as the
// backup guardian of the step, settles the step before with guardian G —
// which another successor X released first — and refuses the pack as
// taken by X. A withdraws B's copy: B drops it and records nothing as
// moved on, so that B, recruited afterwards as a backup of the step where
// it really is (at X), keeps that copy and does not answer "released".
// Were A to release B as if the step had moved on, B's tombstone would
// make it ignore X's copy, and the sender's guard, asking B before it
// re-routed the step from the killed X, would drop the step as moved on
// (a workflow lost, as in zone-plus-one).
func TestRefusedHandoverWithdrawsItsBackup(t *testing.T) {
	dir := t.TempDir()
	recFile := filepath.Join(dir, "invocations.jsonl")
	services := fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"S*\", kind: echo}\n", recFile)
	network := "withdraw-" + filepath.Base(dir)
	cfgB := testConfig(t, node.TestnetConfig(), services)
	cfgB.Network, cfgB.Zone = network, "z1"
	bf, _ := runNode(t, cfgB)
	cfgA := testConfig(t, node.TestnetConfig(), services)
	cfgA.Network, cfgA.Bootstrap = network, bf.Addrs
	af, _ := runNode(t, cfgA)
	waitPeers(t, af, 2)
	gf := startNode(t, echoServices)

	const x = "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD" // successor X
	call := func(nf api.NodeFile, m api.GuardRequest) api.GuardReply { return guardRequest(t, nf, m) }
	const before = "wf-test|0"
	if rep := call(gf, api.GuardStore{Key: before, Pack: packFor(t, "S0 S1 S2"), Holder: pack.Peer{ID: gf.PeerID}}); !rep.OK {
		t.Fatalf("store at G: %+v", rep)
	}
	if rep := call(gf, api.GuardRelease{Key: before, By: x}); !rep.OK || rep.Superseded {
		t.Fatalf("X's release at G: %+v", rep)
	}
	h, a := rawHost(t, af)
	g := pack.Peer{ID: gf.PeerID, Addrs: gf.Addrs}
	ack, err := handoff(t, h, a, withSettle(t, packFor(t, "S1 S2"), pack.Settle{Kind: pack.SettleGuard, Key: before, Peers: []pack.Peer{g}}))
	if err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code != api.CodeTaken || len(ack.Guardians) != 1 || ack.Guardians[0].ID != x {
		t.Fatalf("hand-off to A: %+v, want refused with code %s naming X", ack, api.CodeTaken)
	}
	// A recruited B (its only peer) before it settled, and withdrew it
	// before it answered.
	stepKey := journal.StepKey("wf-test", "0")
	if rep := call(bf, api.GuardStatus{Key: stepKey}); rep.Known || rep.Released {
		t.Fatalf("B after A withdrew: %+v, want nothing known (no tombstone)", rep)
	}
	// The sender guards the step at X and recruits B as its backup.
	if rep := call(bf, api.GuardStore{Key: stepKey, Pack: packFor(t, "S1 S2"), Holder: pack.Peer{ID: x}, Primary: pack.Peer{ID: af.PeerID}}); !rep.OK {
		t.Fatalf("store of X's copy at B: %+v", rep)
	}
	if rep := call(bf, api.GuardStatus{Key: stepKey}); !rep.Known || rep.Released || rep.Holder.ID != x {
		t.Fatalf("B guarding the step at X: %+v, want known, held by X, not released", rep)
	}
	// A withdrawal names its caller as the holder: another peer's cannot
	// drop X's copy.
	if rep := call(bf, api.GuardWithdraw{Key: stepKey}); !rep.OK {
		t.Fatalf("withdrawal by a third peer: %+v", rep)
	}
	if rep := call(bf, api.GuardStatus{Key: stepKey}); !rep.Known || rep.Holder.ID != x {
		t.Fatalf("B after a third peer's withdrawal: %+v, want still held by X", rep)
	}
	if runs := countRuns(t, recFile, "S1"); runs != 0 {
		t.Fatalf("S1 ran %d times, want 0", runs)
	}
	// Not by chance: B did get A's copy, and its withdrawal.
	waitLogLine(t, filepath.Join(filepath.Dir(cfgB.DataDir), "node.log"), "guard copy withdrawn", stepKey, rpc.ShortIDString(af.PeerID))
}

// guardRequest sends m to the node at nf from a new libp2p host and
// returns its answer.
func guardRequest(t *testing.T, nf api.NodeFile, m api.GuardRequest) api.GuardReply {
	t.Helper()
	h, id := rawHost(t, nf)
	var rep api.GuardReply
	if err := rpc.CallCBOR(context.Background(), h, id, m.Protocol(), m, &rep, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return rep
}

// waitLogLine waits until the log file at path has a line that contains
// every one of parts.
func waitLogLine(t *testing.T, path string, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in %s after 30s", parts, path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicaTakingOverADecidedJoinForwards is join J4 at a real node: a
// replica that recorded both branch ends from its actor's updates (the
// actor a real libp2p host) gets one of them again straight from the
// branch's holder — the actor took it and replicated it, and its ack was
// lost to a cut — so it takes the join over, and being decided it moves
// the continuation on: the step after the join runs, once, counted in
// the services' record. Were it to take over and forward nothing, the
// old actor's continuation would be refused as superseded (J7), and the
// workflow would be lost (flapping-link).
func TestReplicaTakingOverADecidedJoinForwards(t *testing.T) {
	nf, recFile, _ := recordingNode(t, "")
	hp, c := rawHost(t, nf)
	actor := peerRef(hp)
	// The old actor answers the continuation's settle (it is at epoch 0 and
	// was told of the takeover, or not: either way it does not refuse).
	rpc.Serve(hp, nil, api.ProtoJoinForwarded, api.MaxControlFrame, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
		return rpc.MustCBOR(api.GuardReply{OK: true})
	})
	const id = "j-decided"
	replica := pack.Peer{ID: nf.PeerID, Addrs: nf.Addrs}
	primary := join.New(join.Record{ID: id, WorkflowID: "wf-test", Kind: pack.FrameFork,
		Branches: []*join.Body{{Text: "S0", Paths: []string{"0.0/0"}}, {Text: "S1", Paths: []string{"0.1/0"}}},
		Rest:     &join.Body{Text: "S5", Paths: []string{"1"}},
		Origin:   []pack.Peer{{ID: "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD"}},
		Replicas: []pack.Peer{replica}, Created: time.Now().UTC()}, actor)
	cp := primary.ReplicaCopy(0)
	call := func(m api.GuardRequest) {
		t.Helper()
		var rep api.GuardReply
		if err := rpc.CallCBOR(context.Background(), hp, c, m.Protocol(), m, &rep, 10*time.Second); err != nil || !rep.OK {
			t.Fatalf("%s: %v %+v", m.Protocol(), err, rep)
		}
	}
	call(api.JoinReplica{Record: rpc.MustCBOR(&cp)})
	for b := range 2 {
		call(api.JoinUpdate{Key: id, Delivery: api.Delivery{WorkflowID: "wf-test", JoinID: id, Branch: b, OK: true}})
	}
	if runs := countRuns(t, recFile, "S5"); runs != 0 {
		t.Fatalf("S5 ran %d times before the takeover, want 0 (a replica does not act)", runs)
	}
	// Branch 1's holder, whose delivery to the actor timed out, delivers it
	// here.
	d := api.Delivery{WorkflowID: "wf-test", JoinID: id, Branch: 1, OK: true}
	var ack api.Ack
	if err := rpc.CallCBOR(context.Background(), hp, c, api.ProtoDeliver, d, &ack, 10*time.Second); err != nil || !ack.OK {
		t.Fatalf("branch end delivered to the replica: %v %+v", err, ack)
	}
	waitRuns(t, recFile, "S5", 1)
}

// waitRuns waits until svc was invoked n times in the services record
// file recFile, and fails if it was invoked more often.
func waitRuns(t *testing.T, recFile, svc string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs := countRuns(t, recFile, svc)
		if runs > n {
			t.Fatalf("%s ran %d times, want %d", svc, runs, n)
		}
		if runs == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s ran %d times after 30s, want %d", svc, runs, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReleaseWaitsWhileACoGuardianDecidesReroute is guard invariant G13
// at real nodes: B, a backup guardian of a step (a real node; its holder a
// real libp2p host that still answers), is asked by another guardian of
// the step whether the step moved on before that guardian re-routes it.
// A receiver R (a real node) then takes a hand-over whose settle names
// the step's primary P (a real host, closed: cut off from R) and B. B
// answers R's release Pending and records nothing, so R refuses the
// hand-over as unsettled and S1 never runs (counted in the services'
// record); once the re-route's notice reaches B (G7), R's next try is
// refused as superseded. Without the question R takes the hand-over on
// B's word. Without G13, B would answer the release between the
// primary's question and its notice: a flapping holder's next hop that
// reached only B would start a second chain 1 ms after the primary
// claimed the re-route, and an at-most-once step would run twice
// (flapping-link).
func TestReleaseWaitsWhileACoGuardianDecidesReroute(t *testing.T) {
	for _, asked := range []bool{true, false} {
		t.Run(fmt.Sprintf("asked=%v", asked), func(t *testing.T) {
			lines := newLogLines()
			bf := startGuardian(t, lines)
			f := newFakeHolder(t, bf, api.GuardReply{OK: true}) // still holds the step
			p := p2ptest.Host(t)
			primary := peerRef(p)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			key := journal.StepKey("wf-before", "0")
			if rep := f.guard(t, api.GuardStore{Key: key, Pack: packFor(t, "S0 S1"), Holder: f.ref(), Primary: primary}); !rep.OK {
				t.Fatalf("store at B: %+v", rep)
			}
			if asked {
				rep := guardRequest(t, bf, api.GuardStatus{Key: key, Rerouting: true, Holder: f.h.ID().String(), Attempt: 0})
				if !rep.Known || rep.Released || rep.Holder.ID != f.h.ID().String() {
					t.Fatalf("B asked before a re-route: %+v, want its copy held by the holder", rep)
				}
			}
			rf, recFile, evFile := recordingNode(t, "")
			h, r := rawHost(t, rf)
			item := pack.Settle{Kind: pack.SettleGuard, Key: key, Peers: []pack.Peer{primary, {ID: bf.PeerID, Addrs: bf.Addrs}}}
			raw := withSettle(t, packFor(t, "S1 S2"), item)
			ack, err := handoff(t, h, r, raw)
			if err != nil {
				t.Fatal(err)
			}
			if !asked {
				if !ack.OK {
					t.Fatalf("hand-off settled by the backup alone: %+v, want taken", ack)
				}
				waitHandedOn(t, evFile, "0")
				if runs := countRuns(t, recFile, "S1"); runs != 1 {
					t.Fatalf("S1 ran %d times, want 1", runs)
				}
				return
			}
			if ack.OK || ack.Code != api.CodeUnsettled {
				t.Fatalf("hand-off while a co-guardian decides a re-route: %+v, want refused with code %s", ack, api.CodeUnsettled)
			}
			if rep := guardRequest(t, bf, api.GuardStatus{Key: key}); !rep.Known || rep.Released {
				t.Fatalf("B after answering pending: %+v, want its copy kept, nothing released", rep)
			}
			// The re-route's notice (G7).
			if rep := guardRequest(t, bf, api.GuardRelease{Key: key, Rerouted: true}); !rep.OK {
				t.Fatalf("re-route notice at B: %+v", rep)
			}
			ack, err = handoff(t, h, r, raw)
			if err != nil {
				t.Fatal(err)
			}
			if ack.OK || ack.Code != api.CodeSuperseded {
				t.Fatalf("hand-off after the re-route notice: %+v, want refused with code %s", ack, api.CodeSuperseded)
			}
			if runs := countRuns(t, recFile, "S1"); runs != 0 {
				t.Fatalf("S1 ran %d times, want 0: the superseded chain went on", runs)
			}
		})
	}
}

// TestAReceiverRefusedWhileTakingIsAskedAgain is G8 and J6 at a receiver
// asked twice for the same attempt while its first acceptance is still
// settling: the guardian of the step before (a raw host) holds its answer
// to the first settle, then says another peer took the attempt first, so
// the first hand-off is refused naming that peer. The second hand-off,
// waiting meanwhile, is then taken afresh: it settles again, the guardian
// (which recorded this receiver since, as join copies do once a swap is
// resolved) answers it, and S1 runs once. Were the second hand-off
// answered "superseded" from the first's refusal, a sender told to hand
// the step to the peer that took it first would stop its chain there: a
// FORK branch started while a link flapped would be lost that way (two
// receivers each refused naming the other, neither holding the branch).
func TestAReceiverRefusedWhileTakingIsAskedAgain(t *testing.T) {
	nf, recFile, evFile := recordingNodeWith(t, "", func(cfg *node.Config) { cfg.HTTP = "127.0.0.1:0" })
	h, id := rawHost(t, nf)
	other, _ := rawHost(t, nf) // the peer named as the first receiver
	gate := make(chan struct{})
	var calls atomic.Int32
	rpc.Serve(h, nil, api.GuardRelease{}.Protocol(), api.MaxControlFrame, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
		if calls.Add(1) == 1 {
			<-gate
			return rpc.MustCBOR(api.GuardReply{OK: true, Known: true, Superseded: true, Released: true, Holder: pack.Peer{ID: other.ID().String()}})
		}
		return rpc.MustCBOR(api.GuardReply{OK: true})
	})
	rpc.Serve(h, nil, api.ProtoOrigin, api.MaxControlFrame, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
		return rpc.MustCBOR(api.Ack{OK: true})
	})
	raw := editPack(t, packFor(t, "S1 S2"), func(p *pack.Pack) {
		p.Origin = []pack.Peer{peerRef(h)}
		p.Sender = peerRef(h)
		p.Settle = []pack.Settle{{Kind: pack.SettleGuard, Key: "wf-test|prev", Peers: []pack.Peer{peerRef(h)}}}
	})
	type answer struct {
		ack api.Ack
		err error
	}
	send := func() <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			var a answer
			var out []byte
			if out, a.err = rpc.Call(context.Background(), h, id, api.ProtoHandoff, raw, api.MaxControlFrame, 20*time.Second); a.err == nil {
				a.err = rpc.Dec.Unmarshal(out, &a.ack)
			}
			ch <- a
		}()
		return ch
	}
	first := send()
	eventually(t, 10*time.Second, "the first acceptance settling", func() error {
		if n := calls.Load(); n != 1 {
			return fmt.Errorf("%d release calls", n)
		}
		return nil
	})
	second := send()
	eventually(t, 10*time.Second, "the second hand-off received", func() error {
		if n := scrape(t, nf.HTTP)[`bedwe_streams_served_total{protocol="`+api.ProtoHandoff+`"}`]; n != 2 {
			return fmt.Errorf("%v hand-off streams served", n)
		}
		return nil
	})
	close(gate)
	a1, a2 := <-first, <-second
	if a1.err != nil || a1.ack.Code != api.CodeTaken || len(a1.ack.Guardians) != 1 || a1.ack.Guardians[0].ID != other.ID().String() {
		t.Fatalf("first hand-off: %v %+v, want refused as taken by %s", a1.err, a1.ack, other.ID())
	}
	if a2.err != nil || !a2.ack.OK {
		t.Fatalf("second hand-off: %v %+v, want taken afresh (OK)", a2.err, a2.ack)
	}
	waitEvents(t, evFile, events.HandedOn, "0", 1)
	if runs := countRuns(t, recFile, "S1"); runs != 1 {
		t.Fatalf("S1 ran %d times, want 1", runs)
	}
}

// TestASecondRerouteOfAnAttemptHeldHereIsRefused is node/guard G20 at a
// receiver both re-routes reached: two guardians re-routed the same
// attempt (each cut from the other), and both handed their pack to this
// node. The first is taken; the second, from another re-router, is
// refused as superseded, so its re-router drops its chain; the first
// re-router's resend (its ack lost) is answered as taken. S1 runs once.
// Were the second answered as the first ("accepted"), its re-router
// would go on as if its chain lived here: a stood-in backup that had
// given way to its primary's re-route would then guard it too
// (TestNetnsGuardiansCutFromEachOtherBothClaim).
// S1 sleeps, so that the attempt is still held here when the later
// hand-offs come (an attempt that ended here is answered as it ended,
// handedon.go; with an echo S1, a busy machine sometimes ended it first).
func TestASecondRerouteOfAnAttemptHeldHereIsRefused(t *testing.T) {
	nf, recFile, evFile := recordingNode(t, "  S1: {kind: sleep, duration: 3s}\n")
	h, id := rawHost(t, nf)
	goneRef := goneHost(t)
	rerouted := func(by string) []byte {
		return editPack(t, packFor(t, "S1 S2"), func(p *pack.Pack) {
			p.Attempt = 1
			p.Settle = []pack.Settle{{Kind: pack.SettleRerouted, Key: journal.StepKey("wf-test", "0"), Attempt: 0, Peers: []pack.Peer{goneRef}, Actor: by, Lenient: true}}
		})
	}
	first, second := h.ID().String(), goneRef.ID
	if ack, err := handoff(t, h, id, rerouted(first)); err != nil || !ack.OK {
		t.Fatalf("the first re-route: %+v %v, want taken", ack, err)
	}
	if ack, err := handoff(t, h, id, rerouted(second)); err != nil || ack.OK || ack.Code != api.CodeSuperseded {
		t.Fatalf("another guardian's re-route of the attempt held here: %+v %v, want refused as %s", ack, err, api.CodeSuperseded)
	}
	if ack, err := handoff(t, h, id, rerouted(first)); err != nil || !ack.OK {
		t.Fatalf("the first re-router's resend: %+v %v, want taken (the same chain)", ack, err)
	}
	waitHandedOn(t, evFile, "0")
	if runs := countRuns(t, recFile, "S1"); runs != 1 {
		t.Fatalf("S1 ran %d times, want 1", runs)
	}
}
