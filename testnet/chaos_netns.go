package testnet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bedwe/bedwe/node/events"
)

// NetnsScenarios are the chaos scenarios that cut or degrade links rather
// than kill processes; they need a testnet started with Options.Netns:
//
//   - isolate-holder: a peer (not the entry) running the first step is cut off
//     from every other node, both ways, for IsolateFor (longer than
//     detection), then healed while the step still runs; its guardian
//     re-routes the step, and the isolated chain must stop at its next hop
//     (invariant I1: a superseded event for the step, or no hand-on of it
//     from the isolated peer)
//   - isolate-join-holder: a peer (not the entry) acting for a join is cut
//     off for IsolateFor, then healed (a replica takes the join over; the
//     fence must stop one of the two copies)
//   - split-zones: the zone of a peer running a step (not the entry's) and
//     the entry's zone are cut from each other for IsolateFor; both still
//     see the third zone
//   - lossy: 5 % of the packets every node receives are dropped (every
//     link, both ways) until every workflow has ended
//   - flapping-link: a peer (not the entry) running a step has its link
//     cut and healed again and again (FlapCuts: cuts shorter and longer
//     than detection, 1.5 s healed between), as a mesh radio at the edge
//     of its range does
//
// The first step (sleepA) of isolate-holder lasts the cut plus 1.5 s, so
// that the heal lands while the isolated peer still runs it.
var NetnsScenarios = []string{"isolate-holder", "isolate-join-holder", "split-zones", "lossy", "flapping-link"}

// FlapCuts are the cuts of the flapping-link scenario, in order, each
// followed by FlapHealed of connectivity: some shorter than a cut's
// detection (3–4 s), some longer.
var FlapCuts = []time.Duration{time.Second, 4500 * time.Millisecond, 1500 * time.Millisecond, 5 * time.Second, time.Second}

// FlapHealed is how long the flapping link stays up between cuts.
const FlapHealed = 1500 * time.Millisecond

// flapStepMillis is the least sleep step of the flapping-link scenario.
const flapStepMillis = 1500

// IsolateFor is how long the partition scenarios keep their cut unless
// ChaosOptions.CutFor says otherwise.
const IsolateFor = 8 * time.Second

// LossyPct is the loss of the lossy scenario on every link.
const LossyPct = 5

// isolation is one cut of a chaos run, for the checks after the run.
type isolation struct {
	nodes    []int
	workflow string
	step     string
	attempt  int
	from     time.Time
	healed   time.Time
}

// strikeNetns carries out a NetnsScenarios scenario. Nothing is left down.
func (r *chaosRun) strikeNetns(ctx context.Context) error {
	m, entry := r.m, r.entry
	running := func(na nodeActivity) bool { return r.holds(na.a) && na.i != entry }
	switch r.opts.Scenario {
	case "lossy":
		for i := range m.Nodes {
			if err := m.Link(i, LinkOptions{LossPct: LossyPct}); err != nil {
				return fmt.Errorf("chaos lossy: %w", err)
			}
		}
		r.lossy = true
		r.notef("%d %% loss on what every node receives until every workflow ended", LossyPct)
		return nil
	case "isolate-holder":
		var iso isolation
		idx, err := r.await(ctx, targetWait, "peer (not the entry) running the first step", func(snap []nodeActivity) []int {
			for _, na := range snap {
				if !running(na) {
					continue
				}
				for _, h := range na.a.Held {
					if r.wf[h.Workflow] && h.Path == "0" {
						iso = isolation{workflow: h.Workflow, step: h.Path, attempt: h.Attempt}
						return []int{na.i}
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		iso.nodes = idx
		return r.isolate(ctx, iso, nil)
	case "isolate-join-holder":
		idx, wf, _, err := r.awaitJoinHolder(ctx)
		if err != nil {
			return err
		}
		return r.isolate(ctx, isolation{nodes: idx, workflow: wf}, nil)
	case "split-zones":
		idx, err := r.await(ctx, targetWait, "peer running a step outside the entry's zone", first(func(na nodeActivity) bool {
			return running(na) && m.Nodes[na.i].Zone != m.Nodes[entry].Zone
		}))
		if err != nil {
			return err
		}
		if len(m.Zones) < 3 {
			r.notef("split-zones with %d zones: no middle zone sees both halves", len(m.Zones))
		}
		return r.isolate(ctx, isolation{nodes: m.zoneOf(idx[0])}, m.zoneOf(entry))
	case "flapping-link":
		idx, err := r.await(ctx, targetWait, "peer (not the entry) running a step", first(running))
		if err != nil {
			return err
		}
		return r.flap(ctx, idx[0])
	}
	return fmt.Errorf("chaos: unknown network scenario %q", r.opts.Scenario)
}

// isolate cuts iso.nodes off from the nodes in from (every other node when
// empty) for IsolateFor, then heals. The cut counts as a kill of each
// isolated node for detection times.
func (r *chaosRun) isolate(ctx context.Context, iso isolation, from []int) error {
	m := r.m
	iso.from = time.Now()
	if err := m.Partition(iso.nodes, from); err != nil {
		return fmt.Errorf("chaos %s: %w", r.opts.Scenario, err)
	}
	for _, i := range iso.nodes {
		r.kills = append(r.kills, kill{peer: m.Nodes[i].PeerID, at: iso.from})
	}
	r.sum.IsolatedNodes = append(r.sum.IsolatedNodes, iso.nodes...)
	fmt.Fprintf(r.opts.Progress, "cut nodes %v off from %s at %s\n", iso.nodes, orEvery(from), time.Since(r.start).Round(time.Millisecond))
	slept := sleepCtx(ctx, r.opts.CutFor)
	still := iso.step != "" && r.stillHolds(iso.nodes[0], iso.workflow, iso.step)
	if err := m.Heal(); err != nil {
		return fmt.Errorf("chaos %s: %w", r.opts.Scenario, err)
	}
	iso.healed = time.Now()
	if !slept {
		return ctx.Err()
	}
	switch {
	case iso.step == "":
		r.notef("cut nodes %v off from %s for %s, then healed", iso.nodes, orEvery(from), r.opts.CutFor)
	case still:
		r.notef("cut node %d off while it ran %s step %s (attempt %d) for %s; healed while it still held the step", iso.nodes[0], iso.workflow, iso.step, iso.attempt, r.opts.CutFor)
	default:
		r.notef("cut node %d off while it ran %s step %s (attempt %d) for %s; it no longer held the step at the heal", iso.nodes[0], iso.workflow, iso.step, iso.attempt, r.opts.CutFor)
	}
	r.isolations = append(r.isolations, iso)
	return nil
}

// flap cuts node i off from every other node for each of FlapCuts in
// turn, healing for FlapHealed after each. The I1 checks treat node i as
// isolated for the whole run.
func (r *chaosRun) flap(ctx context.Context, i int) error {
	m := r.m
	iso := isolation{nodes: []int{i}, from: time.Now()}
	r.sum.IsolatedNodes = append(r.sum.IsolatedNodes, i)
	for k, cut := range FlapCuts {
		if err := m.Partition(iso.nodes, nil); err != nil {
			return fmt.Errorf("chaos %s: %w", r.opts.Scenario, err)
		}
		fmt.Fprintf(r.opts.Progress, "flap %d: cut node %d off for %s at %s\n", k+1, i, cut, time.Since(r.start).Round(time.Millisecond))
		slept := sleepCtx(ctx, cut)
		healing := time.Now()
		if err := m.Heal(); err != nil {
			return fmt.Errorf("chaos %s: %w", r.opts.Scenario, err)
		}
		if took := time.Since(healing); took > time.Second {
			fmt.Fprintf(r.opts.Progress, "flap %d: the heal took %s\n", k+1, took.Round(time.Millisecond))
		}
		if !slept || !sleepCtx(ctx, FlapHealed) {
			return ctx.Err()
		}
		if k%2 == 1 {
			// New work handed on across the flapping link.
			if err := r.submit(ctx); err != nil {
				return err
			}
		}
	}
	iso.healed = time.Now()
	r.notef("flapped node %d's link %d times (cuts %v, %s up between)", i, len(FlapCuts), FlapCuts, FlapHealed)
	r.isolations = append(r.isolations, iso)
	return nil
}

// stillHolds reports whether node i's activity lists the step.
func (r *chaosRun) stillHolds(i int, workflow, step string) bool {
	for _, na := range r.snapshot() {
		if na.i != i {
			continue
		}
		for _, h := range na.a.Held {
			if h.Workflow == workflow && h.Path == step {
				return true
			}
		}
	}
	return false
}

// healNetns removes what a network scenario left in place (lossy's loss)
// once every workflow has ended.
func (r *chaosRun) healNetns() error {
	if !r.lossy {
		return nil
	}
	for i := range r.m.Nodes {
		if err := r.m.Link(i, LinkOptions{LossPct: 0}); err != nil {
			return fmt.Errorf("chaos %s: remove loss: %w", r.opts.Scenario, err)
		}
	}
	return nil
}

// checkIsolations fills the summary's isolation counts from the events.
// For each isolated peer, a reroute naming it as the silent holder of a
// step supersedes the attempt it held; a hand-on of that step by the
// isolated peer at a lower attempt after the reroute is a stale hand-on.
// I1 (a superseded chain stops at its next hop) holds when the receiver of
// every stale hand-on (To, or the isolated peer itself when it handed the
// next step to itself) dropped what it got: a superseded event there for
// a later step of the workflow.
func (r *chaosRun) checkIsolations(evs []events.Event) {
	type key struct{ peer, wf, step string }
	isolated := map[string]int{}
	for _, iso := range r.isolations {
		for _, i := range iso.nodes {
			isolated[r.m.Nodes[i].PeerID] = i
		}
		if iso.step != "" {
			r.sum.IsolatedStep = fmt.Sprintf("%s %s attempt %d", iso.workflow, iso.step, iso.attempt)
		}
	}
	if len(isolated) == 0 {
		return
	}
	rerouted := map[key]events.Event{}
	for _, e := range evs {
		if e.Type != events.Reroute || !r.wf[e.Workflow] {
			continue
		}
		if _, ok := isolated[e.Peer]; ok {
			r.sum.IsolatedRerouted = true
			k := key{e.Peer, e.Workflow, e.Step}
			if _, seen := rerouted[k]; !seen {
				rerouted[k] = e
			}
		}
	}
	r.sum.IsolatedChainStopped = true
	for _, e := range evs {
		switch e.Type {
		case events.Superseded:
			if _, ok := isolated[e.Node]; ok && r.wf[e.Workflow] {
				r.sum.IsolatedSuperseded++
			}
		case events.HandedOn:
			re, ok := rerouted[key{e.Node, e.Workflow, e.Step}]
			if !ok || e.Attempt >= re.Attempt || e.At.Before(re.At) {
				continue
			}
			r.sum.IsolatedHandOns++
			to := e.To
			if to == "" {
				to = e.Node
			}
			stopped := false
			for _, s := range evs {
				if s.Type == events.Superseded && s.Node == to && s.Workflow == e.Workflow && s.Step != e.Step {
					stopped = true
				}
			}
			r.sum.IsolatedChainStopped = r.sum.IsolatedChainStopped && stopped
			r.sum.Notes = append(r.sum.Notes, fmt.Sprintf("isolated node %d handed on %s step %s attempt %d to %s at %s, after %s re-routed it at attempt %d (%s); the receiver dropped the chain: %v",
				isolated[e.Node], e.Workflow, e.Step, e.Attempt, shortPeer(to), e.At.Sub(r.start).Round(time.Millisecond),
				shortPeer(re.Node), re.Attempt, re.Reason, stopped))
		}
	}
}

// isNetnsScenario reports whether a scenario needs a namespace testnet.
func isNetnsScenario(s string) bool { return slices.Contains(NetnsScenarios, s) }

func orEvery(idx []int) string {
	if len(idx) == 0 {
		return "every other node"
	}
	return fmt.Sprintf("nodes %v", idx)
}
