package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/bedwe/bedwe/heartbeat"
	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// logLines collects a node's log lines and lets a test wait for one.
type logLines struct {
	mu    sync.Mutex
	lines []string
	added chan struct{} // closed and replaced on every line
}

func newLogLines() *logLines { return &logLines{added: make(chan struct{})} }

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, line)
	}
	close(l.added)
	l.added = make(chan struct{})
	return len(p), nil
}

// find returns the first line containing every part, if any.
func (l *logLines) find(parts ...string) (string, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return line, nil
	}
	return "", l.added
}

// waitFor waits until a line contains every part.
func (l *logLines) waitFor(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		line, added := l.find(parts...)
		if added == nil {
			return line
		}
		select {
		case <-added:
		case <-deadline:
			l.mu.Lock()
			tail := l.lines[max(0, len(l.lines)-20):]
			l.mu.Unlock()
			t.Fatalf("no log line with %q; the last lines:\n%s", parts, strings.Join(tail, "\n"))
		}
	}
}

// startGuardian runs a node with fast heartbeats (suspects a silent holder
// after about 0.5 s) and a generous 2 s confirmation, logging into lines.
func startGuardian(t *testing.T, lines *logLines) api.NodeFile {
	t.Helper()
	return startGuardianWith(t, lines, echoServices)
}

// startGuardianWith is startGuardian with the services file services.
func startGuardianWith(t *testing.T, lines *logLines, services string) api.NodeFile {
	t.Helper()
	cfg := testConfig(t, node.DefaultConfig(), services)
	cfg.Heartbeat = heartbeat.DefaultLocalConfig()
	cfg.Heartbeat.ConfirmTimeout = 2 * time.Second
	cfg.Heartbeat.LateTimerTolerance = 200 * time.Millisecond
	cfg.FirstBeatTimeout = 200 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelInfo}))
	nf, _ := runNode(t, cfg)
	return nf
}

// fakeHolder is a raw host that asks the node to guard a pack it "holds",
// never beats, and answers the guardian's add-watcher requests with reply.
type fakeHolder struct {
	h     host.Host
	node  peer.ID
	asked chan api.HeldAddWatcher
}

func newFakeHolder(t *testing.T, nf api.NodeFile, reply api.GuardReply) *fakeHolder {
	t.Helper()
	return newFakeHolderFunc(t, nf, func() api.GuardReply { return reply })
}

// newFakeHolderFunc is newFakeHolder answering with what reply returns
// when asked.
func newFakeHolderFunc(t *testing.T, nf api.NodeFile, reply func() api.GuardReply) *fakeHolder {
	t.Helper()
	h, id := rawHost(t, nf)
	f := &fakeHolder{h: h, node: id, asked: make(chan api.HeldAddWatcher, 16)}
	rpc.Serve(h, nil, api.ProtoHeldAddWatcher, 1<<20, 10*time.Second, func(_ context.Context, _ peer.ID, req []byte) []byte {
		var m api.HeldAddWatcher
		if err := rpc.Dec.Unmarshal(req, &m); err != nil {
			return nil
		}
		select {
		case f.asked <- m:
		default:
		}
		return rpc.MustCBOR(reply())
	})
	return f
}

func (f *fakeHolder) ref() pack.Peer {
	ref := pack.Peer{ID: f.h.ID().String(), Zone: "z1"}
	for _, a := range f.h.Addrs() {
		ref.Addrs = append(ref.Addrs, a.String())
	}
	return ref
}

func (f *fakeHolder) guard(t *testing.T, m api.GuardRequest) api.GuardReply {
	t.Helper()
	var rep api.GuardReply
	if err := rpc.CallCBOR(context.Background(), f.h, f.node, m.Protocol(), m, &rep, 10*time.Second); err != nil {
		t.Fatalf("%s: %v", m.Protocol(), err)
	}
	return rep
}

// A holder whose beats stop but which answers a ping is not suspected; the
// guardian asks it about its copy and drops the copy when the holder says
// it moved on (its release was lost), keeps it and is re-added as a
// watcher when the holder still holds the work, and re-routes the step
// (the guardian is the primary) when the holder says it never took it —
// it refused the hand-over as unsettled (node/guard G10: read as "moved
// on", that answer would lose the step).
func TestGuardianReconcilesWithLiveHolder(t *testing.T) {
	tests := []struct {
		name      string
		released  bool
		neverTook bool
	}{
		{"holder moved on", true, false},
		{"holder still holds it", false, false},
		{"holder never took it", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines := newLogLines()
			nf := startGuardian(t, lines)
			f := newFakeHolder(t, nf, api.GuardReply{OK: true, Released: tc.released, NeverTook: tc.neverTook})
			const key = "wf-test|1"
			if rep := f.guard(t, api.GuardStore{Key: key, Attempt: 2, Pack: packFor(t, "S1 S2"), Holder: f.ref()}); !rep.OK {
				t.Fatalf("store refused: %+v", rep)
			}
			lines.waitFor(t, "late beats but the holder answers a ping")
			m := recvGuard(t, f.asked)
			if m.Key != key || m.Attempt != 2 || m.Watcher.ID != f.node.String() {
				t.Fatalf("holder asked %+v, want add-watcher for %s attempt 2 by %s", m, key, f.node)
			}
			if tc.neverTook {
				lines.waitFor(t, "msg=re-routing", "key="+key, "silent="+rpc.ShortID(f.h.ID()))
				return
			}
			st := f.guard(t, api.GuardStatus{Key: key})
			if tc.released {
				lines.waitFor(t, "dropped guard copies of work the holder had moved on from", "dropped=1")
				st = f.guard(t, api.GuardStatus{Key: key})
				if !st.Known || !st.Released {
					t.Errorf("status after the holder moved on = %+v, want released", st)
				}
			} else if !st.Known || st.Released || st.Holder.ID != f.h.ID().String() || st.Attempt != 2 {
				t.Errorf("status = %+v, want the copy kept for holder %s at attempt 2", st, f.h.ID())
			}
			if line, _ := lines.find(`msg="peer suspected"`); line != "" {
				t.Errorf("a live holder was suspected: %s", line)
			}
		})
	}
}

// A FORK at the head of a guarded pack (the origin's first pack) is
// re-routed by dispatching it from the guardian when its holder dies,
// instead of crashing the guardian.
func TestGuardianRedispatchesForkHeadedPack(t *testing.T) {
	lines := newLogLines()
	nf := startGuardian(t, lines)
	f := newFakeHolder(t, nf, api.GuardReply{OK: true})
	const key = "wf-test|submit"
	if rep := f.guard(t, api.GuardStore{Key: key, Pack: packFor(t, "FORK(S1, S2) SYNC S3"), Holder: f.ref()}); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}
	// The holder "loses power": its connections close, it never beats.
	if err := f.h.Close(); err != nil {
		t.Fatal(err)
	}
	lines.waitFor(t, `msg="peer suspected"`, "guarded=1")
	lines.waitFor(t, "msg=re-routing", "key="+key, "step=(dispatch)", "attempt=1")
}

func recvGuard(t *testing.T, ch <-chan api.HeldAddWatcher) api.HeldAddWatcher {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("the holder was never asked anything")
		panic("unreachable")
	}
}

// A guardian about to re-route asks the silent holder once more, even in
// the first round and however the other guardians answered, and on a
// fresh connection when the one that made it silent stays mute (after a
// cut heals, the old connection can stay mute for seconds while a new dial
// gets through at once). A holder that answers
// is reconciled with (here it says it moved on: the copy is dropped),
// never re-routed — after a cut heals, that re-route would run a step
// again whose successor had run it (an at-most-once step run twice, as in
// isolate-join-holder). Fails without the last holder check, and
// without the fresh connection.
func TestGuardianAsksSilentHolderBeforeRerouting(t *testing.T) {
	lines := newLogLines()
	nf := startGuardian(t, lines)
	f := newFakeHolder(t, nf, api.GuardReply{OK: true, Released: true})
	// Pings on the connections open now go unanswered, as through a cut;
	// a new connection's are echoed.
	mute := map[string]bool{}
	for _, c := range f.h.Network().ConnsToPeer(f.node) {
		mute[c.ID()] = true
	}
	var muted atomic.Int32
	f.h.SetStreamHandler(ping.ID, func(s network.Stream) {
		defer s.Close()
		if mute[s.Conn().ID()] {
			muted.Add(1)
			_, _ = io.Copy(io.Discard, s)
			return
		}
		_, _ = io.Copy(s, s)
	})
	const key = "wf-test|1"
	if rep := f.guard(t, api.GuardStore{Key: key, Attempt: 0, Pack: packFor(t, "S1 S2"), Holder: f.ref()}); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}
	lines.waitFor(t, `msg="peer suspected"`, "guarded=1")
	lines.waitFor(t, "not re-routing: the silent holder answers again", "key="+key)
	lines.waitFor(t, "dropped guard copies of work the holder had moved on from", "dropped=1")
	if line, _ := lines.find("msg=re-routing"); line != "" {
		t.Errorf("a holder that answers on a fresh connection was re-routed: %s", line)
	}
	if muted.Load() == 0 {
		t.Errorf("no ping reached the mute connection: the test did not exercise a mute connection")
	}
	if st := f.guard(t, api.GuardStatus{Key: key}); !st.Known || !st.Released {
		t.Errorf("status after the holder moved on = %+v, want released", st)
	}
}

// A guardian that re-routed a step past an attempt refuses that attempt
// when it is handed the step itself (node/guard G9): after a cut healed,
// the late hand-off of the old attempt reached the very guardian that had
// re-routed it, which ran the step a second time.
func TestGuardianRefusesAttemptItRerouted(t *testing.T) {
	lines, nf, f, key := guardedAtAttempt0(t)
	// The holder "loses power": the guardian re-routes attempt 1.
	if err := f.h.Close(); err != nil {
		t.Fatal(err)
	}
	lines.waitFor(t, "msg=re-routing", "key="+key, "attempt=1")
	h, id := rawHost(t, nf)
	ack, err := handoff(t, h, id, packFor(t, "S1 S2"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code != api.CodeSuperseded {
		t.Fatalf("attempt 0 handed to the guardian that re-routed it: ack %+v, want %s", ack, api.CodeSuperseded)
	}
}

// A peer that guards a step at attempt 0 and is handed attempt 1 of it (a
// guardian re-routed the step to it) answers a later release of attempt 0
// Superseded, as the primary that re-routed would: a holder of attempt 0
// cut off during the re-route, whose settle reached only this peer, would
// otherwise start a second chain (node/guard G9).
func TestNewerAttemptSupersedesGuardCopy(t *testing.T) {
	_, nf, f, key := guardedAtAttempt0(t)
	p, err := pack.Decode(packFor(t, "S1 S2"), pack.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	p.Attempt = 1
	raw, err := pack.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	h, id := rawHost(t, nf)
	if ack, err := handoff(t, h, id, raw); err != nil || !ack.OK {
		t.Fatalf("attempt 1 refused: %+v %v", ack, err)
	}
	rep := f.guard(t, api.GuardRelease{Key: key, Attempt: 0, By: "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD"})
	if !rep.Superseded {
		t.Fatalf("release of attempt 0 after attempt 1 was handed here: %+v, want superseded", rep)
	}
}

// guardedAtAttempt0 starts a guardian that guards step 0 of "S1 S2" at
// attempt 0 for a fake holder, and returns its log, node, holder and key.
func guardedAtAttempt0(t *testing.T) (*logLines, api.NodeFile, *fakeHolder, string) {
	t.Helper()
	lines := newLogLines()
	nf := startGuardian(t, lines)
	f := newFakeHolder(t, nf, api.GuardReply{OK: true})
	key := journal.StepKey("wf-test", "0")
	if rep := f.guard(t, api.GuardStore{Key: key, Attempt: 0, Pack: packFor(t, "S1 S2"), Holder: f.ref()}); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}
	return lines, nf, f, key
}

// A backup guardian whose holder dies asks the primary; a primary that
// keeps no copy of the step (it was still handing the step again to the
// holder, which had taken it first) answers "not known", and the backup
// re-routes (node/guard G3). It tells that primary of the re-route
// (G7): a release of the old attempt, marked re-routed, so the primary
// answers the cut-off holder's late release superseded. Otherwise the
// primary would answer it as a plain release and the holder's old chain
// would run an at-most-once step a second time (isolate-join-holder).
// The primary is a real libp2p host that records what reaches it.
func TestActingBackupTellsPrimaryOfReroute(t *testing.T) {
	lines := newLogLines()
	nf := startGuardian(t, lines)
	primary := p2ptest.Host(t)
	questions := make(chan api.GuardStatus, 16)
	rpc.Serve(primary, nil, api.GuardStatus{}.Protocol(), api.MaxControlFrame, 10*time.Second, func(_ context.Context, _ peer.ID, req []byte) []byte {
		var m api.GuardStatus
		if err := rpc.Dec.Unmarshal(req, &m); err == nil {
			select {
			case questions <- m:
			default:
			}
		}
		return rpc.MustCBOR(api.GuardReply{OK: true}) // no copy: not known
	})
	told, _ := serveRecording[api.GuardRelease](primary, api.GuardRelease{}.Protocol(), 0)
	const key = "wf-test|0"
	f := backupWhoseHolderDies(t, nf, key, primary)
	lines.waitFor(t, "msg=re-routing", "key="+key, "attempt=1")
	awaitReroutedNotice(t, told, key, 30*time.Second, "the primary that kept no copy was never told of the backup's re-route")
	// Before it re-routed, the backup asked the primary as a co-guardian
	// deciding a re-route of the holder's attempt 0 (G13).
	holder := f.h.ID().String()
	for {
		select {
		case m := <-questions:
			if m.Key == key && m.Rerouting && m.Holder == holder && m.Attempt == 0 {
				return
			}
		default:
			t.Fatalf("the backup never asked the primary as a co-guardian deciding a re-route of %s at attempt 0", holder)
		}
	}
}

// backupWhoseHolderDies makes the node at nf a backup guardian of key (step
// 0 of "S1 S2" at attempt 0, primary the host primary) for a fake holder,
// and then the holder loses power. It returns the holder.
func backupWhoseHolderDies(t *testing.T, nf api.NodeFile, key string, primary host.Host) *fakeHolder {
	t.Helper()
	f := newFakeHolder(t, nf, api.GuardReply{OK: true})
	store := api.GuardStore{Key: key, Pack: packFor(t, "S1 S2"), Holder: f.ref(), Primary: peerRef(primary)}
	if rep := f.guard(t, store); !rep.OK {
		t.Fatalf("store refused: %+v", rep)
	}
	if err := f.h.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// awaitReroutedNotice waits up to within for the release the primary is
// told of when a backup re-routes key (attempt 0, marked re-routed: G7),
// and fails with missing if none comes.
func awaitReroutedNotice(t *testing.T, told <-chan api.GuardRelease, key string, within time.Duration, missing string) {
	t.Helper()
	select {
	case m := <-told:
		if m.Key != key || m.Attempt != 0 || !m.Rerouted {
			t.Fatalf("the primary was told %+v, want attempt 0 of %s released as re-routed", m, key)
		}
	case <-time.After(within):
		t.Fatal(missing)
	}
}

// backupTestNode starts a node that guards as a backup with short timers
// (detection in ~2 s, BackupDelay 300 ms), logging into the lines returned.
func backupTestNode(t *testing.T) (api.NodeFile, *logLines) {
	t.Helper()
	lines := newLogLines()
	cfg := testConfig(t, node.DefaultConfig(), echoServices)
	cfg.Heartbeat = heartbeat.DefaultLocalConfig()
	cfg.Heartbeat.ConfirmTimeout = 2 * time.Second
	cfg.FirstBeatTimeout = 200 * time.Millisecond
	cfg.BackupDelay = 300 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelInfo}))
	nf, _ := runNode(t, cfg)
	return nf, lines
}

// TestBackupWaitsForAPrimaryHandingTheStep is guard invariant G15 at a
// real node: a backup guardian whose holder dies asks the step's primary
// (a real libp2p host), which keeps no copy because it is still handing
// the step on (the holder's ack never reached it) and says so. The backup
// waits and asks again instead of standing in; once the primary answers
// that it knows nothing and hands nothing on, it re-routes (G3). A backup
// that re-routed after the first answer would let the sender hand the
// step to the holder again: the step would run twice (flapping-link).
func TestBackupWaitsForAPrimaryHandingTheStep(t *testing.T) {
	nf, lines := backupTestNode(t)
	primary := p2ptest.Host(t)
	const handingAnswers = 2
	questions := make(chan api.GuardStatus, 64)
	var asked atomic.Int32
	rpc.Serve(primary, nil, api.GuardStatus{}.Protocol(), api.MaxControlFrame, 10*time.Second, func(_ context.Context, _ peer.ID, req []byte) []byte {
		var m api.GuardStatus
		if err := rpc.Dec.Unmarshal(req, &m); err != nil || m.Rerouting {
			return rpc.MustCBOR(api.GuardReply{OK: true})
		}
		questions <- m
		if asked.Add(1) <= handingAnswers {
			return rpc.MustCBOR(api.GuardReply{OK: true, Handing: true})
		}
		return rpc.MustCBOR(api.GuardReply{OK: true}) // no copy, no hand-off: not known
	})
	told, _ := serveRecording[api.GuardRelease](primary, api.GuardRelease{}.Protocol(), 0)
	const key = "wf-test|0"
	holder := backupWhoseHolderDies(t, nf, key, primary).h.ID().String()
	awaitReroutedNotice(t, told, key, 60*time.Second, "the backup never re-routed after the primary stopped handing the step on")
	// The re-route came after the primary's answers that it was handing
	// the step on, not after the first of them.
	if n := asked.Load(); n <= handingAnswers {
		t.Fatalf("the backup re-routed after %d questions to the primary; the first %d were answered \"handing it on\"", n, handingAnswers)
	}
	for range handingAnswers {
		m := <-questions
		if m.Key != key || m.Holder != holder || m.Attempt != 0 {
			t.Fatalf("the backup asked the primary %+v, want key %s, holder %s, attempt 0", m, key, holder)
		}
	}
	if line, _ := lines.find("not re-routing: the primary guardian is still handing the step on"); line == "" {
		t.Fatal("the backup did not say why it waited")
	}
}

// TestSupersededChainCopyNotRerouted is guard invariant G12 at a real
// node: it guards step S1 for a holder (a real libp2p host) that took the
// hand-over settling the step before with guardian G (another real host),
// and the holder goes silent. Before it re-routes, the node probes G for
// the release the holder made (By the holder). When G answers superseded
// (it re-routed the step before past that attempt: the holder's chain is
// superseded), the node drops its copy with no tombstone and S1 never
// runs (counted in the services' invocation record); when G answers that
// the release stands, the node re-routes. Without the probe, a
// guardian would re-route a superseded chain's copy whose holder's
// withdrawal had been lost to a cut, and a step that the live chain had
// already delivered would run again (flapping-link).
func TestSupersededChainCopyNotRerouted(t *testing.T) {
	for _, superseded := range []bool{true, false} {
		t.Run(fmt.Sprintf("superseded=%v", superseded), func(t *testing.T) {
			recFile := filepath.Join(t.TempDir(), "invocations.jsonl")
			lines := newLogLines()
			nf := startGuardianWith(t, lines, fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"S*\", kind: echo}\n", recFile))
			g := p2ptest.Host(t)
			probes := make(chan api.GuardRelease, 16)
			rpc.Serve(g, nil, api.GuardRelease{}.Protocol(), api.MaxControlFrame, 10*time.Second, func(_ context.Context, _ peer.ID, req []byte) []byte {
				var m api.GuardRelease
				if err := rpc.Dec.Unmarshal(req, &m); err != nil {
					return nil
				}
				probes <- m
				return rpc.MustCBOR(api.GuardReply{OK: true, Known: true, Superseded: superseded && m.Probe})
			})
			f := newFakeHolder(t, nf, api.GuardReply{OK: true})
			const before = "wf-test|before"
			key := journal.StepKey("wf-test", "0")
			raw := withSettle(t, packFor(t, "S1 S2"), pack.Settle{Kind: pack.SettleGuard, Key: before, Peers: []pack.Peer{peerRef(g)}})
			if rep := f.guard(t, api.GuardStore{Key: key, Pack: raw, Holder: f.ref()}); !rep.OK {
				t.Fatalf("store refused: %+v", rep)
			}
			holder := f.h.ID().String()
			if err := f.h.Close(); err != nil {
				t.Fatal(err)
			}
			if superseded {
				lines.waitFor(t, "not re-routing: a guardian of the step before re-routed it past this chain", "key="+key)
			} else {
				lines.waitFor(t, "msg=re-routing", "key="+key, "attempt=1")
			}
			select {
			case m := <-probes:
				if !m.Probe || m.Key != before || m.Attempt != 0 || m.By != holder {
					t.Fatalf("G was asked %+v, want a probe of %s attempt 0 by the holder %s", m, before, holder)
				}
			default:
				t.Fatal("G was never asked")
			}
			if superseded {
				if rep := guardRequest(t, nf, api.GuardStatus{Key: key}); rep.Known {
					t.Fatalf("the guardian after dropping the superseded chain's copy: %+v, want nothing known (no tombstone)", rep)
				}
				if runs := countRuns(t, recFile, "S1"); runs != 0 {
					t.Fatalf("S1 ran %d times, want 0: a superseded chain's copy was re-routed", runs)
				}
			}
		})
	}
}
