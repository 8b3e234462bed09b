package explore

import (
	"fmt"
	"time"

	"github.com/bedwe/bedwe/node/core"
	"github.com/bedwe/bedwe/node/sim"
)

// Scenario is a named fault shape, scripted against one workflow: the
// faults hit at a point of the workflow's run (a step starting at its
// holder), not at a drawn time, so the shape is the same on every replay.
type Scenario struct {
	Name string
	// Shape says in words who fails, when, and what must happen.
	Shape string
	// Once marks the workflow's steps that must never run twice.
	Once []int
	// Fork makes step 3 a FORK of two branches (b0.0 b0.1 and b1.0);
	// BranchOnce marks branch steps that must never run twice.
	Fork       bool
	BranchOnce [][2]int
	// Script places the faults.
	Script func(x *Script)
	// Want checks the outcome beyond the invariants every run is held to.
	Want func(r Result) error
}

// Script is what a scenario's faults are placed with.
type Script struct {
	s   *sim.Sim
	chk *checker
	on  map[triggerKey]func(holder sim.NodeID)
}

// Sim is the simulated mesh.
func (x *Script) Sim() *sim.Sim { return x.s }

// OnStart runs fn right after step pos of the workflow first starts, with
// the node that runs it.
func (x *Script) OnStart(pos int, fn func(holder sim.NodeID)) {
	x.on[triggerKey{core.RootChain(1), pos}] = fn
}

// OnBranchStart runs fn right after step pos of branch b of the FORK (a
// Fork scenario's step 3) first starts.
func (x *Script) OnBranchStart(b, pos int, fn func(holder sim.NodeID)) {
	x.on[triggerKey{core.BranchChain(1, 3, b), pos}] = fn
}

type triggerKey struct {
	chain core.ChainID
	pos   int
}

// Blackout kills every node at once and restarts them all d later.
func (x *Script) Blackout(d sim.Time) {
	for i := range x.s.Nodes() {
		x.s.Kill(sim.NodeID(i))
	}
	x.After(d, func() {
		for i := range x.s.Nodes() {
			x.s.Restart(sim.NodeID(i))
		}
	})
}

// After runs fn d from now.
func (x *Script) After(d sim.Time, fn func()) { x.s.At(x.s.Now()+d, fn) }

// Group is the workflow's acceptors (known once its submission is
// durable).
func (x *Script) Group() []sim.NodeID { return x.chk.groups[core.RootChain(1)] }

// scenarioSteps is the scripted workflow's length: every scenario runs a
// chain of six 100 ms steps.
const scenarioSteps = 6

// RunScenario runs one scenario on a 12-node, 3-zone mesh; the seed draws
// everything the script does not fix (delays, receivers, acceptors).
// trace, when set, receives every event.
func RunScenario(sc Scenario, seed uint64, trace func(at sim.Time, line string)) Result {
	return RunScenarioWith(sc, seed, Options{Trace: trace})
}

// RunScenarioWith runs one scenario with o's group size, network and
// trace (its mesh is always 12 nodes in 3 zones).
func RunScenarioWith(sc Scenario, seed uint64, o Options) Result {
	o.Nodes, o.Zones, o.FaultWindow, o.Converge = 12, 3, 20*time.Second, 40*time.Second
	return run(seed, o, func(s *sim.Sim, chk *checker) {
		x := &Script{s: s, chk: chk, on: map[triggerKey]func(sim.NodeID){}}
		wf := &core.Workflow{ID: 1}
		step := func(name string) core.Step { return core.Step{Service: name, Duration: 100 * time.Millisecond} }
		for i := range scenarioSteps {
			wf.Steps = append(wf.Steps, step(fmt.Sprintf("s%d", i)))
		}
		if sc.Fork {
			wf.Steps[3] = core.Step{Service: "FORK", Branches: [][]core.Step{{step("b0.0"), step("b0.1")}, {step("b1.0")}}}
			for _, bp := range sc.BranchOnce {
				wf.Steps[3].Branches[bp[0]][bp[1]].Once = true
			}
		}
		for _, p := range sc.Once {
			wf.Steps[p].Once = true
		}
		submit(s, chk, wf, 0, 0)
		chk.onExecute = func(e sim.Execution) {
			k := triggerKey{e.Workflow, e.Pos}
			if fn := x.on[k]; fn != nil {
				delete(x.on, k)
				s.At(s.Now(), func() { fn(e.Node) })
			}
		}
		sc.Script(x)
	})
}

func wantDone(r Result) error {
	if r.Done != 1 {
		return fmt.Errorf("the workflow did not complete (%d acknowledged, %d done, %d failed)", r.Acked, r.Done, r.Failed)
	}
	return nil
}

func wantRerun(r Result) error {
	if err := wantDone(r); err != nil {
		return err
	}
	if r.Reruns == 0 {
		return fmt.Errorf("no step ran again: the fault did not hit a running step")
	}
	return nil
}

func wantFailedOnce(r Result) error {
	if r.Failed != 1 {
		return fmt.Errorf("want the workflow failed at its once step, got %d done, %d failed", r.Done, r.Failed)
	}
	return nil
}

// Scenarios are the named fault shapes, each a regression test (go test
// ./node/explore) and a replay (bedwe sim --scenario NAME --trace).
var Scenarios = []Scenario{
	{
		Name:  "holder-killed",
		Shape: "the holder of step 2 is killed as the step starts and restarts 5 s later: an acceptor re-routes step 2 under a higher ballot",
		Script: func(x *Script) {
			x.OnStart(2, func(h sim.NodeID) {
				x.Sim().Kill(h)
				x.After(5*time.Second, func() { x.Sim().Restart(h) })
			})
		},
		Want: wantRerun,
	},
	{
		Name:  "holder-killed-once-step",
		Shape: "step 2 is a once step and its holder is killed as it starts: the re-route fails the workflow rather than run it twice",
		Once:  []int{2},
		Script: func(x *Script) {
			x.OnStart(2, func(h sim.NodeID) { x.Sim().Kill(h) })
		},
		Want: wantFailedOnce,
	},
	{
		Name:  "consecutive-holders-killed",
		Shape: "as step 3 starts, its holder and the holder of step 2 (its sender) are both killed for good",
		Script: func(x *Script) {
			var sender sim.NodeID
			x.OnStart(2, func(h sim.NodeID) { sender = h })
			x.OnStart(3, func(h sim.NodeID) {
				x.Sim().Kill(h)
				x.Sim().Kill(sender)
			})
		},
		Want: wantRerun,
	},
	{
		Name:  "holder-isolated",
		Shape: "the holder of step 2 is cut off both ways for 6 s (past detection) and then comes back: its chain is re-routed, and its own hand-over, refused under the old ballot, goes no further",
		Script: func(x *Script) {
			x.OnStart(2, func(h sim.NodeID) {
				x.Sim().Isolate(h)
				x.After(6*time.Second, func() { x.Sim().HealAll() })
			})
		},
		Want: wantRerun,
	},
	{
		Name:  "holder-paused",
		Shape: "the holder of step 2 is frozen for 5 s (SIGSTOP, or starved of CPU): it wakes after the re-route and its late hand-over is refused",
		Script: func(x *Script) {
			x.OnStart(2, func(h sim.NodeID) { x.Sim().Pause(h, 5*time.Second) })
		},
		Want: wantRerun,
	},
	{
		Name:  "holder-one-way-cut",
		Shape: "the holder of step 2 can hear the acceptors but nothing it sends reaches them, for 6 s: its receiver completes the hand-over's write itself, or the acceptors re-route and its later words are refused",
		Script: func(x *Script) {
			x.OnStart(2, func(h sim.NodeID) {
				for _, a := range x.Group() {
					if a != h {
						x.Sim().Cut(h, a)
					}
				}
				x.After(6*time.Second, func() { x.Sim().HealAll() })
			})
		},
		Want: wantDone,
	},
	{
		Name:  "acceptor-killed",
		Shape: "one acceptor of the workflow, not the holder, is killed for good as step 1 starts: a majority still decides, nothing is re-run",
		Script: func(x *Script) {
			x.OnStart(1, func(h sim.NodeID) {
				for _, a := range x.Group() {
					if a != h {
						x.Sim().Kill(a)
						return
					}
				}
			})
		},
		Want: func(r Result) error {
			if err := wantDone(r); err != nil {
				return err
			}
			if r.Reruns != 0 {
				return fmt.Errorf("%d steps ran again though no holder failed", r.Reruns)
			}
			return nil
		},
	},
	{
		Name:  "acceptor-majority-killed",
		Shape: "two of the three acceptors are killed as step 1 starts and restart 8 s later: the workflow stalls (beyond the model) and ends once they are back",
		Script: func(x *Script) {
			x.OnStart(1, func(sim.NodeID) {
				g := x.Group()
				x.Sim().Kill(g[0])
				x.Sim().Kill(g[1])
				x.After(8*time.Second, func() {
					x.Sim().Restart(g[0])
					x.Sim().Restart(g[1])
				})
			})
		},
		Want: wantDone,
	},
	{
		Name:  "zone-cut",
		Shape: "the zone of step 2's holder loses power as the step starts (every node in it killed at once) and comes back 6 s later",
		Script: func(x *Script) {
			x.OnStart(2, func(h sim.NodeID) {
				z := x.Sim().Zone(h)
				x.Sim().KillZone(z)
				x.After(6*time.Second, func() {
					for i := range x.Sim().Nodes() {
						if x.Sim().Zone(sim.NodeID(i)) == z {
							x.Sim().Restart(sim.NodeID(i))
						}
					}
				})
			})
		},
		Want: wantRerun,
	},
	{
		Name:  "blackout",
		Shape: "every node is killed as step 3 starts and all restart 3 s later: the registers come back from the journals and the position is re-routed",
		Script: func(x *Script) {
			x.OnStart(3, func(sim.NodeID) { x.Blackout(3 * time.Second) })
		},
		Want: wantRerun,
	},
	{
		Name:  "origin-killed",
		Shape: "the node the workflow was submitted to is killed for good once step 1 starts (after it acknowledged the submission): the register, not the origin, carries the workflow",
		Script: func(x *Script) {
			x.OnStart(1, func(sim.NodeID) { x.Sim().Kill(0) })
		},
		Want: wantDone,
	},
	{
		Name:  "last-holder-paused-past-the-end",
		Shape: "the holder of the last step is frozen for 10 s; the step is re-routed and the workflow ends; the frozen holder then wakes and proposes the end again under the old ballot, which is refused",
		Script: func(x *Script) {
			x.OnStart(scenarioSteps-1, func(h sim.NodeID) { x.Sim().Pause(h, 10*time.Second) })
		},
		Want: wantRerun,
	},
}

// onceScenarios are the fault shapes around a once step's own journal.
var onceScenarios = []Scenario{
	{
		Name:  "once-holder-restarted-quickly",
		Shape: "step 2 is a once step; its hand-over's Take is delivered a second time 0.3 s late; the receiver is killed as the step starts and restarts 0.1 s later, so it is handed the pack again: it must not run the step twice (it journaled the start), and the workflow fails",
		Once:  []int{2},
		Script: func(x *Script) {
			x.Sim().DupIf(func(_, _ sim.NodeID, m sim.Message) (sim.Time, bool) {
				t, ok := m.(*core.Take)
				return 300 * time.Millisecond, ok && t.Token.Pos == 2
			})
			x.OnStart(2, func(h sim.NodeID) {
				x.Sim().Kill(h)
				x.After(100*time.Millisecond, func() { x.Sim().Restart(h) })
			})
		},
		Want: wantFailedOnce,
	},
}

// forkScenarios are the fault shapes around a FORK (step 3 of the
// scripted workflow: branches b0.0 b0.1 and b1.0).
var forkScenarios = []Scenario{
	{
		Name:  "fork-holder-killed",
		Shape: "the holder of the FORK is killed for good as branch 0 starts: the FORK position is re-routed, its new holder starts the branches again (refused: they run already) and joins them",
		Fork:  true,
		Script: func(x *Script) {
			var forker sim.NodeID
			x.OnStart(3, func(h sim.NodeID) { forker = h })
			x.OnBranchStart(0, 0, func(sim.NodeID) { x.Sim().Kill(forker) })
		},
		Want: wantRerun,
	},
	{
		Name:  "branch-holder-killed",
		Shape: "the holder of branch 0's second step is killed for good as it starts: the branch is re-routed and the FORK still joins both branches",
		Fork:  true,
		Script: func(x *Script) {
			x.OnBranchStart(0, 1, func(h sim.NodeID) { x.Sim().Kill(h) })
		},
		Want: wantRerun,
	},
	{
		Name:       "branch-once-step-killed",
		Shape:      "branch 1's only step is a once step and its holder is killed as it starts: the branch fails, so the FORK and the workflow fail, and the step never runs twice",
		Fork:       true,
		BranchOnce: [][2]int{{1, 0}},
		Script: func(x *Script) {
			x.OnBranchStart(1, 0, func(h sim.NodeID) { x.Sim().Kill(h) })
		},
		Want: wantFailedOnce,
	},
	{
		Name:  "fork-blackout",
		Shape: "every node is killed as branch 0's second step starts and all restart 3 s later: both branches and the FORK come back from the acceptors' journals",
		Fork:  true,
		Script: func(x *Script) {
			x.OnBranchStart(0, 1, func(sim.NodeID) { x.Blackout(3 * time.Second) })
		},
		Want: wantRerun,
	},
}

func init() {
	Scenarios = append(Scenarios, onceScenarios...)
	Scenarios = append(Scenarios, forkScenarios...)
}

// ScenarioNamed finds a scenario by name.
func ScenarioNamed(name string) (Scenario, bool) {
	for _, sc := range Scenarios {
		if sc.Name == name {
			return sc, true
		}
	}
	return Scenario{}, false
}
