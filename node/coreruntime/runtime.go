package coreruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node/core"
	"github.com/bedwe/bedwe/node/sim"
)

// Config is one peer's runtime.
type Config struct {
	// Host is the peer's libp2p host; the runtime registers ProtocolID on
	// it and dials the other peers through its peerstore.
	Host host.Host
	// Peers is the mesh: index i is sim.NodeID(i) on every peer, so every
	// peer must be given the same list. It must contain Host.ID().
	Peers []peer.ID
	// Zones is each peer's power zone, by index (nil: all in zone 0).
	Zones []int
	// DataDir holds the journal (journal.db) and the executions file.
	DataDir string
	// Seed seeds the machine's random source.
	Seed uint64
	// Clock is the runtime's clock (nil: the real one).
	Clock clockwork.Clock
	// Core is the protocol's timing (zero: core.DefaultConfig()).
	Core core.Config
	// Log receives the runtime's diagnostics (nil: slog.Default()).
	Log *slog.Logger
	// OnExecute and OnReport, when set, are told of every execution and
	// report. They run on the event loop: they must not block, and must
	// not call Close.
	OnExecute func(sim.Execution)
	OnReport  func(sim.Report)
	// QueueLen bounds each peer's outbound queue (0: 256 messages).
	QueueLen int
}

// Runtime runs one peer's core.Node on a libp2p host and a bbolt journal.
//
// One goroutine, the event loop, calls the machine: received messages,
// timer fires, journal commits and Submit are posted to it over one
// channel. The sim.Host methods below are the machine's view of the world
// and are called on the loop only; Submit, Executions and Close are the
// methods other goroutines may call.
type Runtime struct {
	cfg   Config
	self  sim.NodeID
	index map[peer.ID]sim.NodeID
	log   *slog.Logger
	clock clockwork.Clock
	start time.Time

	ctx    context.Context
	cancel context.CancelFunc
	in     chan func()
	// loopDone closes when the loop returns; wg counts the writers and
	// the journal committer.
	loopDone  chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// Loop-owned state.
	node     *core.Node
	rand     *rand.Rand
	selfq    []sim.Message
	timers   map[sim.TimerKey]*timer
	timerGen uint64
	outs     []*outbox
	jr       *journal
	lsn      sim.LSN
	pending  []entry
	// wantSync: a Sync came while a commit ran (or one failed); the next
	// commit takes every record pending by then.
	wantSync   bool
	committing bool
	execFile   *os.File

	// inbound tracks accepted streams so Close can reset them.
	inMu     sync.Mutex
	inbound  map[*inStream]bool
	inClosed bool

	execMu sync.Mutex
	execs  []sim.Execution
}

type timer struct {
	gen uint64
	t   clockwork.Timer
}

var _ sim.Host = (*Runtime)(nil)

// Start opens the journal, replays it into a new core.Node, starts the
// event loop and the per-peer writers, and registers the stream handler.
func Start(cfg Config) (*Runtime, error) {
	if cfg.Host == nil {
		return nil, errors.New("start runtime: no host")
	}
	if cfg.Zones != nil && len(cfg.Zones) != len(cfg.Peers) {
		return nil, fmt.Errorf("start runtime: %d zones for %d peers", len(cfg.Zones), len(cfg.Peers))
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Core == (core.Config{}) {
		cfg.Core = core.DefaultConfig()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 256
	}
	r := &Runtime{
		cfg:      cfg,
		self:     -1,
		index:    map[peer.ID]sim.NodeID{},
		clock:    cfg.Clock,
		start:    cfg.Clock.Now(),
		in:       make(chan func(), 256),
		loopDone: make(chan struct{}),
		node:     core.New(cfg.Core),
		rand:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		timers:   map[sim.TimerKey]*timer{},
		inbound:  map[*inStream]bool{},
	}
	for i, p := range cfg.Peers {
		if _, dup := r.index[p]; dup {
			return nil, fmt.Errorf("start runtime: peer %s listed twice", p)
		}
		r.index[p] = sim.NodeID(i)
		if p == cfg.Host.ID() {
			r.self = sim.NodeID(i)
		}
	}
	if r.self < 0 {
		return nil, fmt.Errorf("start runtime: host %s is not in the mesh", cfg.Host.ID())
	}
	r.log = cfg.Log.With("node", int(r.self))

	jr, err := openJournal(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("start runtime: %w", err)
	}
	durable, last, err := jr.replay()
	if err != nil {
		jr.close()
		return nil, fmt.Errorf("start runtime: %w", err)
	}
	r.jr, r.lsn = jr, last
	execPath := filepath.Join(cfg.DataDir, "executions.jsonl")
	r.execFile, err = os.OpenFile(execPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		jr.close()
		return nil, fmt.Errorf("start runtime: open %s: %w", execPath, err)
	}

	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.outs = make([]*outbox, len(cfg.Peers))
	for i, p := range cfg.Peers {
		if sim.NodeID(i) == r.self {
			continue
		}
		o := &outbox{to: p, q: make(chan []byte, cfg.QueueLen)}
		r.outs[i] = o
		r.wg.Add(1)
		go r.write(o)
	}
	go r.loop(durable)
	cfg.Host.SetStreamHandler(ProtocolID, r.handleStream)
	r.log.Debug("runtime started", "peers", len(cfg.Peers), "records", len(durable), "lsn", last)
	return r, nil
}

// loop is the only goroutine that calls the machine.
func (r *Runtime) loop(durable []any) {
	defer close(r.loopDone)
	r.node.Boot(r, durable)
	r.deliverSelf()
	for {
		select {
		case fn := <-r.in:
			fn()
			r.deliverSelf()
		case <-r.ctx.Done():
			return
		}
	}
}

// post hands fn to the loop; false once the runtime is closed.
func (r *Runtime) post(fn func()) bool {
	select {
	case r.in <- fn:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// deliverSelf hands the machine the messages it sent itself, after the
// event that sent them (a machine is never re-entered).
func (r *Runtime) deliverSelf() {
	for len(r.selfq) > 0 {
		m := r.selfq[0]
		r.selfq = r.selfq[1:]
		r.node.Receive(r, r.self, m)
	}
	r.selfq = nil
}

// Submit starts a workflow at this peer, its origin. The workflow must
// not be changed afterwards.
func (r *Runtime) Submit(w *core.Workflow) {
	r.post(func() { r.node.Submit(w) })
}

// Executions is every step this peer started, in order.
func (r *Runtime) Executions() []sim.Execution {
	r.execMu.Lock()
	defer r.execMu.Unlock()
	return slices.Clone(r.execs)
}

// Self is this peer's index in the mesh.
func (r *Runtime) Self() sim.NodeID { return r.self }

// Close stops the loop, the timers, the writers and the journal. It does
// not close the host. It is safe to call more than once.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		r.cfg.Host.RemoveStreamHandler(ProtocolID)
		r.cancel()
		<-r.loopDone
		for _, t := range r.timers {
			t.t.Stop()
		}
		r.inMu.Lock()
		r.inClosed = true
		for s := range r.inbound {
			s.s.Reset()
		}
		r.inMu.Unlock()
		r.wg.Wait()
		r.closeErr = errors.Join(r.jr.close(), r.execFile.Close())
		r.log.Debug("runtime closed")
	})
	return r.closeErr
}

// ID implements sim.Host.
func (r *Runtime) ID() sim.NodeID { return r.self }

// Nodes implements sim.Host.
func (r *Runtime) Nodes() int { return len(r.cfg.Peers) }

// ZoneOf implements sim.Host.
func (r *Runtime) ZoneOf(id sim.NodeID) int {
	if r.cfg.Zones == nil || id < 0 || int(id) >= len(r.cfg.Zones) {
		return 0
	}
	return r.cfg.Zones[id]
}

// Now implements sim.Host: the monotonic time since the runtime started.
func (r *Runtime) Now() sim.Time { return r.clock.Since(r.start) }

// Rand implements sim.Host.
func (r *Runtime) Rand() *rand.Rand { return r.rand }

// Send implements sim.Host. It never blocks: a message to this peer waits
// for the end of the current event, and one to another peer goes to that
// peer's queue, or is dropped when the queue is full (the protocol
// resends what goes unanswered).
func (r *Runtime) Send(to sim.NodeID, m sim.Message) {
	if to == r.self {
		r.selfq = append(r.selfq, m)
		return
	}
	if to < 0 || int(to) >= len(r.outs) {
		r.log.Warn("send to a node outside the mesh", "to", int(to), "type", fmt.Sprintf("%T", m))
		return
	}
	frame, err := encodeFrame(m)
	if err != nil {
		r.log.Error("send", "to", int(to), "err", err)
		return
	}
	select {
	case r.outs[to].q <- frame:
	default:
		r.log.Debug("outbound queue full: message dropped", "to", int(to), "type", fmt.Sprintf("%T", m))
	}
}

// SetTimer implements sim.Host: the fire is posted to the loop with the
// timer's generation, and a fire whose generation was replaced or
// cancelled meanwhile is ignored.
func (r *Runtime) SetTimer(key sim.TimerKey, d sim.Time) {
	if t := r.timers[key]; t != nil {
		t.t.Stop()
	}
	r.timerGen++
	gen := r.timerGen
	t := &timer{gen: gen}
	t.t = r.clock.AfterFunc(d, func() { r.post(func() { r.fire(key, gen) }) })
	r.timers[key] = t
}

func (r *Runtime) fire(key sim.TimerKey, gen uint64) {
	if t := r.timers[key]; t == nil || t.gen != gen {
		return
	}
	delete(r.timers, key)
	r.node.Timer(r, key)
}

// CancelTimer implements sim.Host.
func (r *Runtime) CancelTimer(key sim.TimerKey) {
	if t := r.timers[key]; t != nil {
		t.t.Stop()
		delete(r.timers, key)
	}
}

// Append implements sim.Host: the record is buffered until a Sync.
func (r *Runtime) Append(rec any) sim.LSN {
	data, err := encodeRecord(rec)
	if err != nil {
		// A record the journal cannot store would still be reported
		// durable by the next Synced, and answers would leave on a lie:
		// stop instead (a core record type this runtime does not know).
		panic(fmt.Sprintf("coreruntime: node %d: %v", r.self, err))
	}
	r.lsn++
	r.pending = append(r.pending, entry{r.lsn, data})
	return r.lsn
}

// Sync implements sim.Host: one commit runs at a time, off the loop, and
// Syncs asked for meanwhile are coalesced into the next commit. Synced
// reaches the machine only after bbolt's commit (and its fsync) returned.
func (r *Runtime) Sync() {
	r.wantSync = true
	r.commit()
}

func (r *Runtime) commit() {
	if r.committing || !r.wantSync {
		return
	}
	batch, last := r.pending, r.lsn
	r.pending, r.wantSync, r.committing = nil, false, true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := r.jr.commit(batch)
		r.post(func() { r.committed(batch, last, err) })
	}()
}

func (r *Runtime) committed(batch []entry, last sim.LSN, err error) {
	r.committing = false
	if err != nil {
		// Nothing of the batch is durable: keep it, and retry. Answers
		// waiting for it stay held meanwhile.
		r.log.Error("journal commit failed; retrying", "err", err)
		r.pending = append(batch, r.pending...)
		r.wantSync = true
		r.clock.AfterFunc(time.Second, func() { r.post(r.commit) })
		return
	}
	r.node.Synced(r, last)
	r.commit()
}

// Execute implements sim.Host: the step's start is recorded (in memory,
// in the executions file, and to OnExecute); its duration is the core's
// own run timer.
func (r *Runtime) Execute(x sim.Execution) {
	x.Node, x.At = r.self, r.Now()
	r.execMu.Lock()
	r.execs = append(r.execs, x)
	r.execMu.Unlock()
	if line, err := json.Marshal(x); err == nil {
		if _, err := r.execFile.Write(append(line, '\n')); err != nil {
			r.log.Error("record execution", "err", err)
		}
	}
	if r.cfg.OnExecute != nil {
		r.cfg.OnExecute(x)
	}
}

// Report implements sim.Host.
func (r *Runtime) Report(rep sim.Report) {
	rep.Node, rep.At = r.self, r.Now()
	r.log.Debug("report", "kind", rep.Kind, "workflow", rep.Workflow)
	if r.cfg.OnReport != nil {
		r.cfg.OnReport(rep)
	}
}
