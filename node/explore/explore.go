// Package explore runs the protocol core (node/core) on the deterministic
// simulator (node/sim) under a seeded workload and fault schedule, and
// checks every run.
//
// A run has two phases. In the fault phase, workflows are submitted while
// nodes are killed, restarted, paused, cut off one way or both, and whole
// zones lose power. Then faults stop: every link heals, every node that is
// down restarts, and the run goes on for a convergence window.
//
// What the checker holds every run to, counted from what happened (the
// services' own invocation records and the durable journals), not from
// what nodes say:
//   - once: a step marked once runs at most once, ever.
//   - one holder a token: no two executions share a workflow and token.
//   - durable before start: a step starts only under a token that a
//     majority of its workflow's acceptors had durably accepted.
//   - a superseded chain stops: no execution under a ballot after a higher
//     ballot was chosen for an earlier position of that workflow.
//   - nothing after the end: once a workflow's end is chosen, no running
//     position is chosen after it, and every end chosen agrees (the same
//     end and the fault-free result).
//   - ended (liveness): every workflow acknowledged to its client ends
//     (done, or failed because a once step's holder was lost) within the
//     convergence window after faults stop.
//
// The same seed gives the same run: Result.Hash is the trace hash.
package explore

import (
	"fmt"
	"strings"
	"time"

	"github.com/bedwe/bedwe/node/core"
	"github.com/bedwe/bedwe/node/sim"
)

// Options shape the runs; the zero value of a field takes its default.
type Options struct {
	Nodes, Zones int
	// Workflows is how many workflows a seed submits.
	Workflows int
	// Faults is how many faults a seed injects.
	Faults int
	// FaultWindow is how long faults go on; Converge how long the run goes
	// on after they stop.
	FaultWindow, Converge sim.Time
	// Loss and Dup are the network's loss and duplication rates.
	Loss, Dup float64
	// Group is how many acceptors keep each chain's register (0: the
	// core's default, three).
	Group int
	// Trace, when set, receives one line per dispatched event.
	Trace func(at sim.Time, line string)
}

func (o *Options) defaults() {
	if o.Nodes == 0 {
		o.Nodes = 12
	}
	if o.Zones == 0 {
		o.Zones = 3
	}
	if o.Workflows == 0 {
		o.Workflows = 6
	}
	if o.Faults == 0 {
		o.Faults = 4
	}
	if o.FaultWindow == 0 {
		o.FaultWindow = 15 * time.Second
	}
	if o.Converge == 0 {
		o.Converge = 30 * time.Second
	}
}

// Result is one seed's run.
type Result struct {
	Seed       uint64 `json:"seed"`
	Hash       string `json:"hash"`
	Events     uint64 `json:"events"`
	Workflows  int    `json:"workflows"`
	Acked      int    `json:"acked"`
	Done       int    `json:"done"`
	Failed     int    `json:"failed_once"`
	Executions int    `json:"executions"`
	Reruns     int    `json:"reruns"`
	Faults     int    `json:"faults"`
	// Reroutes are how long each position whose holder was killed waited
	// for a live holder to start it again (or for its workflow to fail at
	// a once step): detection, the promise round and the new write.
	Reroutes []sim.Time `json:"-"`
	// LastEnd is when the last acknowledged workflow ended (a scenario's
	// makespan: its one workflow is submitted at 0).
	LastEnd    sim.Time `json:"last_end_ns"`
	Violations []string `json:"violations,omitempty"`
}

// Run runs one seed: its drawn workload and fault schedule.
func Run(seed uint64, o Options) Result {
	o.defaults()
	return run(seed, o, func(s *sim.Sim, chk *checker) {
		w := s.WorkloadRand()
		for i := range o.Workflows {
			wf := &core.Workflow{ID: uint64(i + 1)}
			step := func(name string) core.Step {
				return core.Step{Service: name, Once: w.IntN(4) == 0, Duration: time.Duration(20+w.IntN(280)) * time.Millisecond}
			}
			n := 3 + w.IntN(6)
			fork, choice := -1, -1
			if w.IntN(2) == 0 { // half the workflows FORK once
				fork = w.IntN(n)
			}
			if w.IntN(3) == 0 { // a third take a CHOICE
				choice = w.IntN(n)
			}
			for j := range n {
				if j != fork && j != choice {
					wf.Steps = append(wf.Steps, step(fmt.Sprintf("s%d", j)))
					continue
				}
				f := core.Step{Service: "FORK"}
				if j == choice {
					f = core.Step{Service: "CHOICE", Choice: true}
				}
				for b := range 2 + w.IntN(2) {
					var branch []core.Step
					for k := range 1 + w.IntN(3) {
						branch = append(branch, step(fmt.Sprintf("b%d.%d", b, k)))
					}
					f.Branches = append(f.Branches, branch)
				}
				wf.Steps = append(wf.Steps, f)
			}
			at := time.Duration(w.Int64N(int64(o.FaultWindow)))
			submit(s, chk, wf, sim.NodeID(w.IntN(o.Nodes)), at)
		}
		scheduleFaults(s, o)
	})
}

// run sets up a simulated mesh with its checker, lets setup place the
// workload and the faults, heals everything when the fault window ends,
// and checks the run once it has converged.
func run(seed uint64, o Options, setup func(*sim.Sim, *checker)) Result {
	chk := newChecker()
	cfg := core.DefaultConfig()
	if o.Group > 0 {
		cfg.GroupSize = o.Group
	}
	s := sim.New(sim.Config{
		Seed: seed, Nodes: o.Nodes, Zones: o.Zones,
		Net:        sim.NetConfig{MinDelay: 200 * time.Microsecond, MeanDelay: 2 * time.Millisecond, Loss: o.Loss, Dup: o.Dup},
		Disk:       sim.DiskConfig{SyncMin: 300 * time.Microsecond, SyncMean: 1 * time.Millisecond},
		NewMachine: func(sim.NodeID) sim.Machine { return core.New(cfg) },
		OnDurable: func(node sim.NodeID, rec any) {
			if r, ok := rec.(core.Record); ok {
				chk.durable(node, r)
			}
		},
		OnEvent: o.Trace,
	})
	s.World.OnExecute = chk.execute
	s.World.OnReport = chk.report
	s.World.OnFault = chk.fault
	setup(s, chk)
	s.At(o.FaultWindow, func() {
		s.HealAll()
		for i := range o.Nodes {
			s.Restart(sim.NodeID(i))
		}
	})
	s.Run(o.FaultWindow + o.Converge)
	chk.end()
	r := Result{
		Seed: seed, Hash: fmt.Sprintf("%016x", s.Hash()), Events: s.Events(),
		Workflows: len(chk.workflows), Acked: len(chk.acked), Executions: len(s.World.Executions),
		Faults: len(s.World.Faults), Violations: chk.violations, Reroutes: chk.reroutes, LastEnd: chk.lastEnd,
	}
	for id := range chk.acked {
		switch chk.ended[core.RootChain(id)] {
		case core.Done:
			r.Done++
		case core.Failed:
			r.Failed++
		}
	}
	seen := map[string]bool{}
	for _, x := range s.World.Executions {
		k := fmt.Sprintf("%d/%d", x.Workflow, x.Pos)
		if seen[k] {
			r.Reruns++
		}
		seen[k] = true
	}
	return r
}

// submit has a client submit wf at time at through origin, or through the
// next node that is up (a client tries another node when one is down).
func submit(s *sim.Sim, chk *checker, wf *core.Workflow, origin sim.NodeID, at sim.Time) {
	chk.workflows[wf.ID] = wf
	s.At(at, func() {
		for k := range s.Nodes() {
			id := sim.NodeID((int(origin) + k) % s.Nodes())
			if m := s.Machine(id); m != nil {
				m.(*core.Node).Submit(wf)
				return
			}
		}
	})
}

// scheduleFaults draws o.Faults faults inside the fault window.
func scheduleFaults(s *sim.Sim, o Options) {
	f := s.FaultRand()
	ms := func(lo, hi int) sim.Time { return time.Duration(lo+f.IntN(hi-lo)) * time.Millisecond }
	for range o.Faults {
		at := time.Duration(f.Int64N(int64(o.FaultWindow)))
		id := sim.NodeID(f.IntN(o.Nodes))
		switch k := f.IntN(10); {
		case k < 4: // a kill, restarted later
			back := at + ms(200, 8000)
			s.At(at, func() { s.Kill(id) })
			s.At(back, func() { s.Restart(id) })
		case k < 6: // a pause
			d := ms(500, 4000)
			s.At(at, func() { s.Pause(id, d) })
		case k < 7: // a one-way cut between two nodes
			to := sim.NodeID(f.IntN(o.Nodes))
			heal := at + ms(500, 8000)
			s.At(at, func() { s.Cut(id, to) })
			s.At(heal, func() { s.Heal(id, to) })
		case k < 9: // a node cut off both ways
			heal := at + ms(500, 8000)
			s.At(at, func() { s.Isolate(id) })
			s.At(heal, func() {
				for j := range o.Nodes {
					s.Heal(id, sim.NodeID(j))
					s.Heal(sim.NodeID(j), id)
				}
			})
		default: // a zone's power cut, every node of it at once
			z := f.IntN(o.Zones)
			back := at + ms(1000, 10000)
			s.At(at, func() { s.KillZone(z) })
			s.At(back, func() {
				for j := range o.Nodes {
					if s.Zone(sim.NodeID(j)) == z {
						s.Restart(sim.NodeID(j))
					}
				}
			})
		}
	}
}

// checker holds a run to the package's invariants.
type checker struct {
	workflows map[uint64]*core.Workflow
	// accepted[wf][token] is the set of acceptors that ever durably held
	// that token; chosenAt is when it reached a majority.
	accepted map[uint64]map[core.Token]map[sim.NodeID]bool
	chosen   map[uint64]map[core.Token]core.Value
	groups   map[uint64][]sim.NodeID
	// ran[wf][token] counts executions; once[wf][pos] those of once steps.
	ran        map[uint64]map[string]int
	once       map[uint64]map[int]int
	acked      map[uint64]bool
	ended      map[uint64]core.End
	endTok     map[uint64]core.Token
	violations []string
	// onExecute, when set, is told of every execution (a scenario's
	// triggers).
	onExecute func(sim.Execution)
	// running[wf] is the workflow's latest started position and its node;
	// orphaned[wf] is when that node was killed while running it.
	running  map[uint64]sim.Execution
	orphaned map[uint64]sim.Time
	reroutes []sim.Time
	lastEnd  sim.Time
	reported map[uint64]bool
}

func newChecker() *checker {
	return &checker{
		workflows: map[uint64]*core.Workflow{},
		accepted:  map[uint64]map[core.Token]map[sim.NodeID]bool{},
		chosen:    map[uint64]map[core.Token]core.Value{},
		groups:    map[uint64][]sim.NodeID{},
		ran:       map[uint64]map[string]int{},
		once:      map[uint64]map[int]int{},
		acked:     map[uint64]bool{},
		ended:     map[uint64]core.End{},
		endTok:    map[uint64]core.Token{},
		running:   map[uint64]sim.Execution{},
		orphaned:  map[uint64]sim.Time{},
		reported:  map[uint64]bool{},
	}
}

func (c *checker) violate(format string, args ...any) {
	if len(c.violations) < 20 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

func (c *checker) durable(node sim.NodeID, rec core.Record) {
	if !rec.Has {
		return
	}
	wf, tok := rec.Workflow, rec.Value.Token
	c.groups[wf] = rec.Group
	if c.accepted[wf] == nil {
		c.accepted[wf] = map[core.Token]map[sim.NodeID]bool{}
		c.chosen[wf] = map[core.Token]core.Value{}
	}
	set := c.accepted[wf][tok]
	if set == nil {
		set = map[sim.NodeID]bool{}
		c.accepted[wf][tok] = set
	}
	set[node] = true
	if _, done := c.chosen[wf][tok]; done || len(set) < len(rec.Group)/2+1 {
		return
	}
	v := rec.Value
	c.chosen[wf][tok] = v
	if end, ok := c.ended[wf]; ok {
		if v.End == core.Running && tok.Compare(c.endTok[wf]) > 0 {
			c.violate("%s: position %d chosen under %s after its end was chosen under %s", chainName(wf), tok.Pos, tok, c.endTok[wf])
		}
		if v.End != core.Running && v.End != end {
			c.violate("%s: two different ends chosen (%d under %s, %d under %s)", chainName(wf), end, c.endTok[wf], v.End, tok)
		}
	}
	if v.End != core.Running {
		if _, ok := c.ended[wf]; !ok {
			c.ended[wf], c.endTok[wf] = v.End, tok
		}
		if v.End == core.Done {
			if got, want := strings.Join(v.Pack.Outputs, " "), c.expected(wf); got != want {
				c.violate("%s: result %q, want %q", chainName(wf), got, want)
			}
		}
	}
}

func (c *checker) expected(chain uint64) string {
	return strings.Join(core.Expected(c.workflows[core.WorkflowOf(chain)], chain), " ")
}

// fault notes a kill of a node that was running a workflow's position.
func (c *checker) fault(f sim.Fault) {
	if f.Kind != "kill" {
		return
	}
	for wf, x := range c.running {
		if x.Node == f.Node {
			if _, ok := c.orphaned[wf]; !ok {
				c.orphaned[wf] = f.At
			}
		}
	}
}

// reprotected ends a workflow's wait for a live holder.
func (c *checker) reprotected(wf uint64, at sim.Time) {
	if t, ok := c.orphaned[wf]; ok {
		c.reroutes = append(c.reroutes, at-t)
		delete(c.orphaned, wf)
	}
}

func (c *checker) execute(x sim.Execution) {
	if c.onExecute != nil {
		defer c.onExecute(x)
	}
	if prev, ok := c.running[x.Workflow]; !ok || x.Pos >= prev.Pos {
		c.running[x.Workflow] = x
		c.reprotected(x.Workflow, x.At)
	}
	if c.ran[x.Workflow] == nil {
		c.ran[x.Workflow] = map[string]int{}
		c.once[x.Workflow] = map[int]int{}
	}
	// Two holders of one token: a holder that restarts may run its
	// position again (not a once step: the once count catches that), but
	// no other node may.
	k := fmt.Sprintf("%s@%d", x.Token, x.Node)
	c.ran[x.Workflow][k]++
	if c.ran[x.Workflow][k] == 1 {
		c.ran[x.Workflow][x.Token]++
		if n := c.ran[x.Workflow][x.Token]; n > 1 {
			c.violate("%s: token %s ran at %d nodes (node %d at %v)", chainName(x.Workflow), x.Token, n, x.Node, x.At)
		}
	}
	if x.Once {
		c.once[x.Workflow][x.Pos]++
		if n := c.once[x.Workflow][x.Pos]; n > 1 {
			c.violate("%s: once step %d (%s) ran %d times (node %d at %v)", chainName(x.Workflow), x.Pos, x.Service, n, x.Node, x.At)
		}
	}
	var tok core.Token
	for t := range c.chosen[x.Workflow] {
		if t.String() == x.Token {
			tok = t
			goto found
		}
	}
	c.violate("%s: step %d started at node %d at %v under %s, which no majority had durably accepted", chainName(x.Workflow), x.Pos, x.Node, x.At, x.Token)
	return
found:
	for t, v := range c.chosen[x.Workflow] {
		if t.Ballot.Compare(tok.Ballot) > 0 && t.Pos < tok.Pos && v.End == core.Running {
			c.violate("%s: superseded chain went on: step %d ran under %s after %s was chosen", chainName(x.Workflow), x.Pos, tok, t)
		}
	}
}

func (c *checker) report(r sim.Report) {
	switch r.Kind {
	case "acked":
		c.acked[r.Workflow] = true
	case "done", "failed":
		c.reprotected(r.Workflow, r.At)
		if !c.reported[r.Workflow] { // the first word of an end is when it ended
			c.reported[r.Workflow] = true
			c.lastEnd = max(c.lastEnd, r.At)
		}
		delete(c.running, r.Workflow)
	}
}

// end checks liveness once the convergence window is over.
func (c *checker) end() {
	for id := range c.acked {
		if _, ok := c.ended[core.RootChain(id)]; !ok {
			c.violate("workflow %d: acknowledged but not ended %s after faults stopped", id, "within the convergence window")
		}
		if c.ended[core.RootChain(id)] == core.Failed && !hasOnce(c.workflows[id].Steps) {
			c.violate("workflow %d: failed without a once step", id)
		}
	}
}

func hasOnce(steps []core.Step) bool {
	for _, s := range steps {
		if s.Once {
			return true
		}
		for _, b := range s.Branches {
			if hasOnce(b) {
				return true
			}
		}
	}
	return false
}

// chainName names a chain for a violation: its workflow, and for a
// branch the FORK's position and the branch.
func chainName(c core.ChainID) string {
	wf := core.WorkflowOf(c)
	if core.IsRoot(c) {
		return fmt.Sprintf("workflow %d", wf)
	}
	return fmt.Sprintf("workflow %d branch %d of the FORK at %d", wf, c&0xff-1, c>>8&0xff-1)
}
