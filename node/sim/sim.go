package sim

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"
)

// NodeID names a simulated node: 0 to Nodes-1.
type NodeID int

// Time is virtual time since the run started.
type Time = time.Duration

// Message is what nodes send each other. Messages are immutable once sent:
// the simulator hands the same value to the receiver (and to a duplicate's
// receiver), as a real transport would hand it a decoded copy.
type Message interface {
	// Digest sums the message's fields for the trace hash (never a
	// pointer or a map's order).
	Digest() uint64
}

// TimerKey names one of a node's timers; setting a key again replaces it.
type TimerKey uint64

// LSN numbers a node's journal appends, from 1.
type LSN uint64

// Machine is one node's protocol code. Every method runs to completion
// without blocking; its effects go through host. The simulator is one
// Host (Env); a node's runtime over a real transport and journal is
// another, so the same protocol code runs in both.
type Machine interface {
	// Boot starts the node, the first time or after a kill, with the
	// records its journal made durable before (nil the first time).
	Boot(host Host, durable []any)
	// Receive handles a message from another node.
	Receive(host Host, from NodeID, m Message)
	// Timer handles a timer set with host.SetTimer.
	Timer(host Host, key TimerKey)
	// Synced says that every record appended up to lsn is durable.
	Synced(host Host, lsn LSN)
}

// Host is everything a Machine reaches the world through. Calls come from
// one goroutine at a time (the simulator's, or the node's event loop).
type Host interface {
	// ID is the node's own ID; Nodes how many the mesh has; ZoneOf a
	// node's power zone.
	ID() NodeID
	Nodes() int
	ZoneOf(NodeID) int
	// Now is the node's monotonic clock; Rand its seeded random source.
	Now() Time
	Rand() *rand.Rand
	// Send sends a message (it may be lost, delayed, duplicated or
	// reordered: the protocol retries and tolerates all of these).
	Send(to NodeID, m Message)
	// SetTimer fires Timer(key) after d, replacing key's pending timer;
	// CancelTimer cancels it.
	SetTimer(key TimerKey, d Time)
	CancelTimer(key TimerKey)
	// Append buffers a journal record; Sync makes every record appended
	// so far durable and then calls Synced with the last LSN.
	Append(rec any) LSN
	Sync()
	// Execute starts a service invocation and records it; Report tells
	// the node's clients a fact (a submission acknowledged, an end).
	Execute(x Execution)
	Report(r Report)
}

var _ Host = (*Env)(nil)

// NetConfig shapes the simulated network.
type NetConfig struct {
	// MinDelay and MeanDelay: a message takes MinDelay plus an exponential
	// draw of mean MeanDelay (so messages between one pair reorder).
	MinDelay, MeanDelay Time
	// Loss and Dup are the chances that a message is lost or delivered
	// twice (the second copy with its own delay).
	Loss, Dup float64
}

// DiskConfig shapes the simulated journal.
type DiskConfig struct {
	// SyncMin and SyncMean: a sync completes after SyncMin plus an
	// exponential draw of mean SyncMean.
	SyncMin, SyncMean Time
}

// Config is one simulated run.
type Config struct {
	Seed  uint64
	Nodes int
	// Zones assigns node i to zone i % Zones (at least 1).
	Zones int
	Net   NetConfig
	Disk  DiskConfig
	// NewMachine makes node id's protocol code, at the start and at every
	// restart (a restarted node keeps nothing but its durable records).
	NewMachine func(id NodeID) Machine
	// OnDurable, when set, is told of every record that became durable
	// (the checker's view of the journals).
	OnDurable func(node NodeID, rec any)
	// OnEvent, when set, is called after every dispatched event, with its
	// one-line description (for a replay's trace; costly, so off by default).
	OnEvent func(at Time, line string)
}

// Stream numbers split the seed into independent random sources.
const (
	streamNet = iota + 1
	streamDisk
	streamFaults
	streamWorkload
	streamNodes // node i uses streamNodes+i
)

type eventKind uint8

const (
	evDeliver eventKind = iota + 1
	evTimer
	evSynced
	evControl
)

type event struct {
	at   Time
	seq  uint64
	kind eventKind
	node NodeID
	from NodeID
	inc  uint32 // the node's incarnation the event belongs to (timers, syncs)
	key  TimerKey
	gen  uint64 // timer generation: a replaced or cancelled timer is stale
	lsn  LSN
	msg  Message
	fn   func()
}

// Sim is one deterministic run. It is not safe for concurrent use: one
// goroutine drives it, and seeds run in parallel on separate Sims.
type Sim struct {
	cfg   Config
	now   Time
	seq   uint64
	queue []event
	nodes []*nodeState
	// cut[from][to] drops messages from one node to another.
	cut    [][]bool
	net    *rand.Rand
	disk   *rand.Rand
	faults *rand.Rand
	work   *rand.Rand
	hash   *xxhash.Digest
	buf    [48]byte
	events uint64
	World  World
	// drop, when set, loses the messages it picks (a scripted loss);
	// dup delivers the ones it picks a second time, late.
	drop func(from, to NodeID, m Message) bool
	dup  func(from, to NodeID, m Message) (Time, bool)
}

// DupIf delivers every message fn picks a second time, fn's delay after
// it was sent (a scripted duplicate, as a retransmitting network makes).
func (s *Sim) DupIf(fn func(from, to NodeID, m Message) (Time, bool)) { s.dup = fn }

// DropIf loses every message fn picks from now on (nil: none), as a
// network that loses one kind of message would: a scripted loss.
func (s *Sim) DropIf(fn func(from, to NodeID, m Message) bool) { s.drop = fn }

type nodeState struct {
	id       NodeID
	zone     int
	inc      uint32
	alive    bool
	paused   Time // events wait until then
	machine  Machine
	env      *Env
	timers   map[TimerKey]uint64
	timerGen uint64
	durable  []any
	pending  []pendingRec
	lsn      LSN
}

type pendingRec struct {
	lsn LSN
	rec any
}

// splitmix64 derives independent stream seeds from one seed.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func stream(seed uint64, n int) *rand.Rand {
	a := splitmix64(seed ^ uint64(n)*0x9e3779b97f4a7c15)
	return rand.New(rand.NewPCG(a, splitmix64(a)))
}

// New makes a run; nodes boot at time 0.
func New(cfg Config) *Sim {
	if cfg.Zones < 1 {
		cfg.Zones = 1
	}
	s := &Sim{
		cfg:    cfg,
		net:    stream(cfg.Seed, streamNet),
		disk:   stream(cfg.Seed, streamDisk),
		faults: stream(cfg.Seed, streamFaults),
		work:   stream(cfg.Seed, streamWorkload),
		hash:   xxhash.New(),
		queue:  make([]event, 0, 1024),
	}
	s.cut = make([][]bool, cfg.Nodes)
	for i := range cfg.Nodes {
		s.cut[i] = make([]bool, cfg.Nodes)
		n := &nodeState{id: NodeID(i), zone: i % cfg.Zones, timers: map[TimerKey]uint64{}}
		s.nodes = append(s.nodes, n)
	}
	for _, n := range s.nodes {
		s.boot(n)
	}
	return s
}

// Now is the run's virtual time.
func (s *Sim) Now() Time { return s.now }

// Nodes is how many nodes the run has.
func (s *Sim) Nodes() int { return len(s.nodes) }

// Zone is node id's zone.
func (s *Sim) Zone(id NodeID) int { return s.nodes[id].zone }

// Zones is how many zones the run has.
func (s *Sim) Zones() int { return s.cfg.Zones }

// Alive reports whether node id runs (a paused node is alive).
func (s *Sim) Alive(id NodeID) bool { return s.nodes[id].alive }

// Machine is node id's current protocol code (nil while it is down).
func (s *Sim) Machine(id NodeID) Machine {
	if !s.nodes[id].alive {
		return nil
	}
	return s.nodes[id].machine
}

// Env is node id's current environment (nil while it is down), for a
// workload that submits through a node.
func (s *Sim) Env(id NodeID) *Env {
	if !s.nodes[id].alive {
		return nil
	}
	return s.nodes[id].env
}

// Durable is node id's durable journal.
func (s *Sim) Durable(id NodeID) []any { return s.nodes[id].durable }

// FaultRand is the fault schedule's random source.
func (s *Sim) FaultRand() *rand.Rand { return s.faults }

// WorkloadRand is the workload's random source.
func (s *Sim) WorkloadRand() *rand.Rand { return s.work }

// Hash is the trace hash so far: equal for two runs of one seed.
func (s *Sim) Hash() uint64 { return s.hash.Sum64() }

// Events is how many events were dispatched so far.
func (s *Sim) Events() uint64 { return s.events }

// At runs fn at virtual time t (a fault, a submission, a check).
func (s *Sim) At(t Time, fn func()) {
	if t < s.now {
		t = s.now
	}
	s.push(event{at: t, kind: evControl, fn: fn})
}

// Run dispatches events until the queue is empty or the next one is past
// until; the clock then reads until.
func (s *Sim) Run(until Time) {
	for len(s.queue) > 0 && s.queue[0].at <= until {
		e := s.pop()
		s.now = e.at
		s.dispatch(&e)
	}
	if s.now < until {
		s.now = until
	}
}

// Step dispatches the next event, if any; false when the queue is empty.
func (s *Sim) Step() bool {
	if len(s.queue) == 0 {
		return false
	}
	e := s.pop()
	s.now = e.at
	s.dispatch(&e)
	return true
}

func (s *Sim) dispatch(e *event) {
	if e.kind == evControl {
		s.trace(e, 0)
		e.fn()
		return
	}
	n := s.nodes[e.node]
	if !n.alive {
		return // a dead node hears nothing; its timers and syncs died with it
	}
	if e.kind != evDeliver && e.inc != n.inc {
		return
	}
	if n.paused > s.now {
		// A frozen process: the event waits, and every deferred event
		// arrives in a burst when it thaws, in the order it was queued.
		e.at = n.paused
		s.push(*e)
		return
	}
	switch e.kind {
	case evDeliver:
		if s.cut[e.from][e.node] {
			return // the link was cut while the message was on its way
		}
		s.trace(e, e.msg.Digest())
		n.machine.Receive(n.env, e.from, e.msg)
	case evTimer:
		if n.timers[e.key] != e.gen {
			return // replaced or cancelled
		}
		delete(n.timers, e.key)
		s.trace(e, uint64(e.key))
		n.machine.Timer(n.env, e.key)
	case evSynced:
		i := 0
		for ; i < len(n.pending) && n.pending[i].lsn <= e.lsn; i++ {
			n.durable = append(n.durable, n.pending[i].rec)
			if s.cfg.OnDurable != nil {
				s.cfg.OnDurable(n.id, n.pending[i].rec)
			}
		}
		n.pending = n.pending[i:]
		s.trace(e, uint64(e.lsn))
		n.machine.Synced(n.env, e.lsn)
	}
}

func (s *Sim) trace(e *event, digest uint64) {
	s.events++
	b := s.buf[:]
	binary.LittleEndian.PutUint64(b[0:], uint64(e.at))
	binary.LittleEndian.PutUint64(b[8:], e.seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(e.kind)|uint64(e.node)<<8|uint64(e.from)<<32)
	binary.LittleEndian.PutUint64(b[24:], digest)
	s.hash.Write(b[:32])
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e.at, e.String())
	}
}

func (e *event) String() string {
	switch e.kind {
	case evDeliver:
		return fmt.Sprintf("deliver %d->%d %T%+v", e.from, e.node, e.msg, e.msg)
	case evTimer:
		return fmt.Sprintf("timer n%d key %d", e.node, e.key)
	case evSynced:
		return fmt.Sprintf("synced n%d lsn %d", e.node, e.lsn)
	}
	return "control"
}

// exp draws an exponential delay of the given mean.
func exp(r *rand.Rand, mean Time) Time {
	if mean <= 0 {
		return 0
	}
	return Time(r.ExpFloat64() * float64(mean))
}

func (s *Sim) send(from, to NodeID, m Message) {
	if s.cut[from][to] || s.drop != nil && s.drop(from, to, m) {
		return
	}
	if s.cfg.Net.Loss > 0 && s.net.Float64() < s.cfg.Net.Loss {
		return
	}
	copies := 1
	if s.cfg.Net.Dup > 0 && s.net.Float64() < s.cfg.Net.Dup {
		copies = 2
	}
	if s.dup != nil {
		if late, ok := s.dup(from, to, m); ok {
			s.push(event{at: s.now + late, kind: evDeliver, node: to, from: from, msg: m})
		}
	}
	for range copies {
		d := s.cfg.Net.MinDelay + exp(s.net, s.cfg.Net.MeanDelay)
		s.push(event{at: s.now + d, kind: evDeliver, node: to, from: from, msg: m})
	}
}

// boot starts a node with its durable records.
func (s *Sim) boot(n *nodeState) {
	n.alive = true
	n.paused = 0
	n.inc++
	n.timers = map[TimerKey]uint64{}
	n.pending = nil
	n.env = &Env{sim: s, node: n, inc: n.inc, rand: stream(s.cfg.Seed, streamNodes+int(n.id)+int(n.inc)<<16)}
	n.machine = s.cfg.NewMachine(n.id)
	durable := make([]any, len(n.durable))
	copy(durable, n.durable)
	n.machine.Boot(n.env, durable)
}

// Kill stops node id at once, as SIGKILL or a power cut would: what its
// journal had not synced is lost, its timers die, and messages to it are
// dropped until it restarts. Messages it already sent still arrive.
func (s *Sim) Kill(id NodeID) {
	n := s.nodes[id]
	if !n.alive {
		return
	}
	n.alive = false
	n.pending = nil
	n.timers = map[TimerKey]uint64{}
	n.env.dead = true
	s.note("kill", id)
}

// Restart boots a killed node from its durable records.
func (s *Sim) Restart(id NodeID) {
	n := s.nodes[id]
	if n.alive {
		return
	}
	s.note("restart", id)
	s.boot(n)
}

// Pause freezes node id for d: its events wait and then arrive together,
// as for a process stopped with SIGSTOP or starved of CPU.
func (s *Sim) Pause(id NodeID, d Time) {
	n := s.nodes[id]
	if n.alive && n.paused < s.now+d {
		n.paused = s.now + d
		s.note("pause", id)
	}
}

// Cut drops messages from one node to another (one way) until Heal.
func (s *Sim) Cut(from, to NodeID) {
	s.cut[from][to] = true
	s.traceLine(fmt.Sprintf("cut n%d -> n%d", from, to))
}

// Heal restores the link from one node to another.
func (s *Sim) Heal(from, to NodeID) {
	if s.cut[from][to] {
		s.cut[from][to] = false
		s.traceLine(fmt.Sprintf("heal n%d -> n%d", from, to))
	}
}

// note records a fault in the world and the trace.
func (s *Sim) note(kind string, id NodeID) {
	s.World.note(s.now, kind, id)
	s.traceLine(fmt.Sprintf("%s n%d", kind, id))
}

func (s *Sim) traceLine(line string) {
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(s.now, line)
	}
}

// HealAll restores every link.
func (s *Sim) HealAll() {
	for i := range s.cut {
		for j := range s.cut[i] {
			s.cut[i][j] = false
		}
	}
	s.traceLine("heal all")
}

// Isolate cuts node id from every other node, both ways.
func (s *Sim) Isolate(id NodeID) {
	for j := range s.nodes {
		if NodeID(j) != id {
			s.cut[id][j], s.cut[j][id] = true, true
		}
	}
	s.traceLine(fmt.Sprintf("isolate n%d", id))
}

// KillZone kills every node of zone z at the same instant.
func (s *Sim) KillZone(z int) {
	for _, n := range s.nodes {
		if n.zone == z {
			s.Kill(n.id)
		}
	}
}

func (s *Sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.queue = append(s.queue, e)
	i := len(s.queue) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(&s.queue[i], &s.queue[p]) {
			break
		}
		s.queue[i], s.queue[p] = s.queue[p], s.queue[i]
		i = p
	}
}

func (s *Sim) pop() event {
	q := s.queue
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = event{}
	q = q[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && less(&q[l], &q[m]) {
			m = l
		}
		if r < len(q) && less(&q[r], &q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	s.queue = q
	return top
}

func less(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// Env is what a node's Machine reaches the world through. It belongs to
// one incarnation: after a kill its calls do nothing.
type Env struct {
	sim  *Sim
	node *nodeState
	inc  uint32
	rand *rand.Rand
	dead bool
}

// ID is the node's own ID.
func (e *Env) ID() NodeID { return e.node.id }

// Zone is the node's zone.
func (e *Env) Zone() int { return e.node.zone }

// Now is the node's clock.
func (e *Env) Now() Time { return e.sim.now }

// Rand is the node's own random source (a new stream each incarnation).
func (e *Env) Rand() *rand.Rand { return e.rand }

// Nodes is how many nodes the mesh has (the membership every node knows).
func (e *Env) Nodes() int { return len(e.sim.nodes) }

// ZoneOf is a node's zone (from the membership every node knows).
func (e *Env) ZoneOf(id NodeID) int { return e.sim.nodes[id].zone }

// Send sends m to another node (or to itself) through the network.
func (e *Env) Send(to NodeID, m Message) {
	if e.dead {
		return
	}
	e.sim.send(e.node.id, to, m)
}

// SetTimer fires Timer(key) after d, replacing a pending timer of key.
func (e *Env) SetTimer(key TimerKey, d Time) {
	if e.dead {
		return
	}
	n := e.node
	n.timerGen++
	n.timers[key] = n.timerGen
	e.sim.push(event{at: e.sim.now + d, kind: evTimer, node: n.id, inc: e.inc, key: key, gen: n.timerGen})
}

// CancelTimer cancels key's pending timer, if any.
func (e *Env) CancelTimer(key TimerKey) {
	if !e.dead {
		delete(e.node.timers, key)
	}
}

// Append buffers a journal record; it is durable only once a Sync that
// covers its LSN completes.
func (e *Env) Append(rec any) LSN {
	if e.dead {
		return 0
	}
	n := e.node
	n.lsn++
	n.pending = append(n.pending, pendingRec{n.lsn, rec})
	return n.lsn
}

// Sync makes every record appended so far durable after the disk's
// latency, then calls Synced with the last LSN.
func (e *Env) Sync() {
	if e.dead {
		return
	}
	s, n := e.sim, e.node
	d := s.cfg.Disk.SyncMin + exp(s.disk, s.cfg.Disk.SyncMean)
	s.push(event{at: s.now + d, kind: evSynced, node: n.id, inc: e.inc, lsn: n.lsn})
}

// Execute records that the node started a service invocation: the
// world's ledger, which the checker reads and no crash erases.
func (e *Env) Execute(x Execution) {
	if e.dead {
		return
	}
	x.Node, x.At = e.node.id, e.sim.now
	e.sim.World.Executions = append(e.sim.World.Executions, x)
	if e.sim.World.OnExecute != nil {
		e.sim.World.OnExecute(x)
	}
}

// Report records a fact the node tells the outside world (a submission
// acknowledged to its client, a workflow's end), for the checker.
func (e *Env) Report(r Report) {
	if e.dead {
		return
	}
	r.Node, r.At = e.node.id, e.sim.now
	e.sim.World.Reports = append(e.sim.World.Reports, r)
	if e.sim.World.OnReport != nil {
		e.sim.World.OnReport(r)
	}
}

// Execution is one service invocation, as the services themselves would
// record it.
type Execution struct {
	Workflow uint64
	Pos      int
	Service  string
	Once     bool
	// Token is the protocol's ordering token under which it ran.
	Token string
	Node  NodeID
	At    Time
}

// Report is a fact a node told the outside world.
type Report struct {
	Kind     string // "acked", "done", "failed"
	Workflow uint64
	Detail   string
	Node     NodeID
	At       Time
}

// World is what happened outside the nodes: the services' invocation
// records and what nodes reported, which survive every crash.
type World struct {
	Executions []Execution
	Reports    []Report
	Faults     []Fault
	OnExecute  func(Execution)
	OnReport   func(Report)
	OnFault    func(Fault)
}

// Fault is one injected fault, for the run's summary.
type Fault struct {
	At   Time
	Kind string
	Node NodeID
}

func (w *World) note(at Time, kind string, id NodeID) {
	w.Faults = append(w.Faults, Fault{at, kind, id})
	if w.OnFault != nil {
		w.OnFault(Fault{at, kind, id})
	}
}

// Mix folds values into a digest for Message.Digest.
func Mix(vs ...uint64) uint64 {
	h := uint64(1469598103934665603)
	for _, v := range vs {
		h ^= v
		h *= 1099511628211
		h ^= h >> 29
	}
	return h
}

// MixString folds a string into a digest.
func MixString(s string) uint64 { return xxhash.Sum64String(s) }
