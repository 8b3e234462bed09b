package coreruntime

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node/core"
	"github.com/bedwe/bedwe/node/sim"
)

// ledger is what the services and clients of every peer saw: executions
// survive a peer's Close, as a service's own records would.
type ledger struct {
	mu      sync.Mutex
	execs   []sim.Execution
	reports chan sim.Report
	hook    func(sim.Execution)
}

func (l *ledger) execute(x sim.Execution) {
	l.mu.Lock()
	l.execs = append(l.execs, x)
	l.mu.Unlock()
	if l.hook != nil {
		l.hook(x)
	}
}

// runs is where each position of a chain started, in order.
func (l *ledger) runs(chain core.ChainID) map[int][]sim.NodeID {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int][]sim.NodeID{}
	for _, x := range l.execs {
		if x.Workflow == chain {
			out[x.Pos] = append(out[x.Pos], x.Node)
		}
	}
	return out
}

type mesh struct {
	dirs  []string
	hosts []host.Host
	rts   []*Runtime
	led   *ledger
}

// newMesh starts n runtimes on connected loopback hosts, node i in zone
// i % zones and seeded seed+i.
func newMesh(t testing.TB, n, zones int, seed uint64, hook func(sim.Execution)) *mesh {
	t.Helper()
	m := &mesh{led: &ledger{reports: make(chan sim.Report, 1024), hook: hook}}
	peers := make([]peer.ID, n)
	zoneOf := make([]int, n)
	for i := range n {
		h := p2ptest.Host(t)
		m.hosts = append(m.hosts, h)
		peers[i], zoneOf[i] = h.ID(), i%zones
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, a := range m.hosts {
		for j, b := range m.hosts {
			if i == j {
				continue
			}
			a.Peerstore().AddAddrs(b.ID(), b.Addrs(), peerstore.PermanentAddrTTL)
			if i < j {
				if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
					t.Fatalf("connect %d to %d: %v", i, j, err)
				}
			}
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for i, h := range m.hosts {
		m.dirs = append(m.dirs, t.TempDir())
		rt, err := Start(Config{
			Host: h, Peers: peers, Zones: zoneOf, DataDir: m.dirs[i], Seed: seed + uint64(i),
			Log: log, OnExecute: m.led.execute,
			OnReport: func(r sim.Report) { m.led.reports <- r },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := rt.Close(); err != nil {
				t.Errorf("close runtime %d: %v", i, err)
			}
		})
		m.rts = append(m.rts, rt)
	}
	return m
}

// await reads reports until every workflow in wfs ended, or fails the
// test at the deadline. It returns each workflow's first end report and
// which workflows were acknowledged.
func (m *mesh) await(t testing.TB, wfs []uint64, within time.Duration) (map[uint64]sim.Report, map[uint64]bool) {
	t.Helper()
	ends, acked := map[uint64]sim.Report{}, map[uint64]bool{}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for len(ends) < len(wfs) {
		select {
		case r := <-m.led.reports:
			switch r.Kind {
			case "acked":
				acked[r.Workflow] = true
			case "done", "failed":
				if _, ok := ends[r.Workflow]; !ok {
					ends[r.Workflow] = r
				}
			}
		case <-deadline.C:
			t.Fatalf("after %v only %d of %d workflows ended: %v", within, len(ends), len(wfs), ends)
		}
	}
	return ends, acked
}

func workflow(id uint64, steps int, d time.Duration, once ...int) *core.Workflow {
	w := &core.Workflow{ID: id}
	for i := range steps {
		w.Steps = append(w.Steps, core.Step{Service: fmt.Sprintf("wf%d-s%d", id, i), Duration: d})
	}
	for _, i := range once {
		w.Steps[i].Once = true
	}
	return w
}

// wantDetail is a workflow's fault-free result: core.Output of each step.
func wantDetail(w *core.Workflow) string {
	return strings.Join(core.Expected(w, core.RootChain(w.ID)), " ")
}

func TestWorkflowsRunOnRealHosts(t *testing.T) {
	m := newMesh(t, 5, 3, 1, nil)
	wfs := []*core.Workflow{
		workflow(1, 5, 50*time.Millisecond, 3),
		workflow(2, 5, 50*time.Millisecond, 1),
		workflow(3, 5, 50*time.Millisecond, 4),
	}
	start := time.Now()
	for i, w := range wfs {
		m.rts[2*i].Submit(w) // origins 0, 2 and 4
	}
	ends, acked := m.await(t, []uint64{1, 2, 3}, 20*time.Second)
	t.Logf("3 workflows done in %v", time.Since(start))
	for _, w := range wfs {
		end := ends[w.ID]
		if end.Kind != "done" {
			t.Fatalf("workflow %d ended %q", w.ID, end.Kind)
		}
		if !acked[w.ID] {
			t.Errorf("workflow %d ended without an acknowledgement", w.ID)
		}
		if want := wantDetail(w); end.Detail != want {
			t.Errorf("workflow %d outputs %q, want %q", w.ID, end.Detail, want)
		}
		runs := m.led.runs(core.RootChain(w.ID))
		for pos := range w.Steps {
			if len(runs[pos]) != 1 {
				t.Errorf("workflow %d step %d ran %d times (at %v), want once", w.ID, pos, len(runs[pos]), runs[pos])
			}
		}
	}
}

func TestForkRunsOnRealHosts(t *testing.T) {
	m := newMesh(t, 5, 3, 7, nil)
	w := workflow(1, 3, 50*time.Millisecond)
	w.Steps[1].Branches = [][]core.Step{
		{{Service: "a0", Duration: 50 * time.Millisecond}, {Service: "a1", Duration: 50 * time.Millisecond, Once: true}},
		{{Service: "b0", Duration: 100 * time.Millisecond}},
	}
	m.rts[1].Submit(w)
	ends, _ := m.await(t, []uint64{1}, 20*time.Second)
	if want := wantDetail(w); ends[1].Kind != "done" || ends[1].Detail != want {
		t.Fatalf("workflow ended %q with %q, want done with %q", ends[1].Kind, ends[1].Detail, want)
	}
	chains := map[core.ChainID]int{core.RootChain(1): len(w.Steps)}
	for b, steps := range w.Steps[1].Branches {
		chains[core.BranchChain(1, 1, b)] = len(steps)
	}
	for c, n := range chains {
		runs := m.led.runs(c)
		for pos := range n {
			if len(runs[pos]) != 1 {
				t.Errorf("chain %x step %d ran %d times (at %v), want once", c, pos, len(runs[pos]), runs[pos])
			}
		}
	}
}

func TestHolderClosedMidStepIsRerouted(t *testing.T) {
	// Each case's seeds and origin give another holder of step 2 to close.
	for _, c := range []struct {
		seed   uint64
		origin sim.NodeID
	}{{1, 0}, {100, 3}} {
		t.Run(fmt.Sprintf("seed%d-origin%d", c.seed, c.origin), func(t *testing.T) {
			holderClosedMidStep(t, c.seed, c.origin)
		})
	}
}

func holderClosedMidStep(t *testing.T, seed uint64, origin sim.NodeID) {
	// Five nodes in three zones: a group of three takes one node a zone,
	// so one closed node leaves at least two acceptors, a majority.
	started := make(chan sim.Execution, 1)
	m := newMesh(t, 5, 3, seed, func(x sim.Execution) {
		if x.Pos == 2 {
			select {
			case started <- x:
			default:
			}
		}
	})
	w := workflow(1, 6, 300*time.Millisecond, 4)
	m.rts[origin].Submit(w)

	var victim sim.NodeID
	select {
	case x := <-started:
		victim = x.Node
	case <-time.After(20 * time.Second):
		t.Fatal("step 2 never started")
	}
	// A crash: the runtime and its host go at once, mid-step.
	if err := m.rts[victim].Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.hosts[victim].Close(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	ends, _ := m.await(t, []uint64{1}, 30*time.Second)
	t.Logf("node %d closed during step 2; workflow %s %v later; runs %v", victim, ends[1].Kind, time.Since(killed), m.led.runs(core.RootChain(1)))
	if ends[1].Kind != "done" {
		t.Fatalf("workflow ended %q, want done", ends[1].Kind)
	}
	if want := wantDetail(w); ends[1].Detail != want {
		t.Errorf("outputs %q, want %q", ends[1].Detail, want)
	}
	runs := m.led.runs(core.RootChain(1))
	for pos, s := range w.Steps {
		at := runs[pos]
		switch {
		case pos == 2:
			// Once at the closed node, and once more where it was
			// re-routed (unless the step finished before the close).
			if len(at) < 1 || len(at) > 2 || at[0] != victim || len(at) == 2 && at[1] == victim {
				t.Errorf("step 2 ran at %v; want at %d, then at most once elsewhere", at, victim)
			}
		case s.Once && len(at) > 1:
			t.Errorf("once step %d ran %d times (at %v)", pos, len(at), at)
		case len(at) != 1:
			t.Errorf("step %d ran %d times (at %v), want once", pos, len(at), at)
		}
	}
	// The executions files hold what the ledger saw, the closed node's
	// included.
	var lines int
	for _, dir := range m.dirs {
		b, err := os.ReadFile(filepath.Join(dir, "executions.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(b, []byte("\n"))
	}
	m.led.mu.Lock()
	n := len(m.led.execs)
	m.led.mu.Unlock()
	if lines != n {
		t.Errorf("executions files hold %d lines, the ledger %d executions", lines, n)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	w := workflow(7, 3, time.Second, 1)
	w.Steps[2].Branches = [][]core.Step{{{Service: "a"}}, {{Service: "b"}, {Service: "c"}}}
	c := core.RootChain(7)
	v := core.Value{Token: core.Token{Ballot: core.Ballot{Epoch: 2, Node: 1}, Pos: 1}, Holder: 3,
		Pack: &core.Pack{Workflow: w, Chain: c, Outputs: []string{"wf7-s0"}}}
	branch := &core.Pack{Workflow: w, Chain: core.BranchChain(7, 2, 1), Outputs: []string{"b"}}
	group := []sim.NodeID{0, 1, 2}
	msgs := []sim.Message{
		&core.Accept{Workflow: c, Group: group, Value: v},
		&core.Accepted{Workflow: c, Token: v.Token, Holder: 3},
		&core.Reject{Workflow: c, Token: core.Token{Ballot: v.Token.Ballot, Pos: -1}, Promised: core.Ballot{Epoch: 3}, Holds: v.Token},
		&core.Take{Workflow: c, Group: group, Token: v.Token, Pack: v.Pack},
		&core.Took{Workflow: c, Token: v.Token},
		&core.Prepare{Workflow: c, Group: group, Ballot: core.Ballot{Epoch: 3, Node: 2}},
		&core.Promise{Workflow: c, Ballot: core.Ballot{Epoch: 3, Node: 2}, Has: true, Value: v},
		&core.Beat{Workflow: c, Token: v.Token, Waiting: true},
		&core.Query{Workflow: branch.Chain},
		&core.State{Workflow: branch.Chain, Has: true, Value: core.Value{Token: core.Token{Pos: 2}, End: core.Done, Holder: -1, Pack: branch}},
		&core.Take{Workflow: branch.Chain, Group: group, Token: core.Token{Pos: 1}, Pack: branch},
	}
	var stream bytes.Buffer
	for _, m := range msgs {
		f, err := encodeFrame(m)
		if err != nil {
			t.Fatal(err)
		}
		stream.Write(f)
	}
	br := bufio.NewReader(&stream)
	for _, want := range msgs {
		got, err := readFrame(br, 5)
		if err != nil {
			t.Fatalf("%T: %v", want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T round trip: got %+v, want %+v", want, got, want)
		}
	}

	bad := map[string]sim.Message{
		"take without pack":    &core.Take{Workflow: c, Group: group, Token: v.Token},
		"group out of range":   &core.Prepare{Workflow: c, Group: []sim.NodeID{0, 9}},
		"position past end":    &core.Take{Workflow: c, Group: group, Token: core.Token{Pos: 3}, Pack: v.Pack},
		"accept without pack":  &core.Accept{Workflow: c, Group: group, Value: core.Value{Holder: 1}},
		"holder out of range":  &core.Accept{Workflow: c, Group: group, Value: core.Value{Holder: 5, Pack: v.Pack}},
		"running past the end": &core.Accept{Workflow: c, Group: group, Value: core.Value{Token: core.Token{Pos: 3}, Pack: v.Pack}},
		"chain not a branch":   &core.Take{Workflow: c, Group: group, Pack: &core.Pack{Workflow: w, Chain: core.BranchChain(7, 1, 0)}},
		"branch position":      &core.Take{Workflow: c, Group: group, Token: core.Token{Pos: 2}, Pack: branch},
	}
	for name, m := range bad {
		f, err := encodeFrame(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readFrame(bufio.NewReader(bytes.NewReader(f)), 5); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	if _, err := readFrame(bufio.NewReader(bytes.NewReader([]byte{3, 99, 0, 0})), 5); err == nil {
		t.Error("unknown tag decoded without error")
	}
}

func TestJournalReplaysNewestRegisters(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := core.Record{Workflow: 1, Group: []sim.NodeID{0, 1, 2}, Promised: core.Ballot{Epoch: 1}}
	start := core.StartRecord{Workflow: 1, Token: core.Token{Ballot: core.Ballot{Epoch: 1}, Pos: 2}}
	other := core.Record{Workflow: 2, Group: []sim.NodeID{1, 2, 3}}
	newer := old
	newer.Promised = core.Ballot{Epoch: 4, Node: 2}
	var batch []entry
	for i, rec := range []any{old, start, other, newer} {
		data, err := encodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, entry{sim.LSN(i + 1), data})
	}
	if err := j.commit(batch[:2]); err != nil {
		t.Fatal(err)
	}
	if err := j.commit(batch[2:]); err != nil {
		t.Fatal(err)
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}

	j, err = openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	recs, last, err := j.replay()
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{start, other, newer}; !reflect.DeepEqual(recs, want) || last != 4 {
		t.Errorf("replay: %+v (last %d), want %+v (last 4)", recs, last, want)
	}
}
