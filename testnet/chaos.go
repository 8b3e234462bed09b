package testnet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/pack"
)

// Scenarios are the chaos scenarios, each killing real processes with
// SIGKILL at a moment chosen from what the nodes report in activity.json
// and in their events files:
//
//   - executor: the peer running a step
//   - consecutive: that peer and the peer that handed it the work
//   - join-holder: a peer holding a FORK's join record
//   - origin: the peer the workflows were submitted to
//   - zone: every node of the zone of a peer running a step
//   - blackout: every node, then all restart
//   - flap: random kills and restarts for FlapFor
//   - sender-after-ack: the sender of the first pack a peer other than
//     the entry accepted, at once (it has handed on, and may not have
//     released its guardians yet)
//   - join-and-branch: a peer (not the entry) acting for a join, then 50 ms
//     later the peer running branch 0 of that join's workflow
//   - pair-random: two random peers (not the entry) holding work, at two
//     random instants within the first three step durations
//   - zone-plus-one: the whole zone of a peer holding work (not the
//     entry's zone) plus one more peer holding work in another zone
//   - join-paused: a false suspicion, not a kill: a peer (not the entry)
//     acting for a join is frozen with SIGSTOP for PausedFor, long enough
//     for a replica to take the join over, then resumed with SIGCONT
//     (both copies believe they act until the fence, join J7, stops one)
var Scenarios = []string{
	"executor", "consecutive", "join-holder", "origin", "zone", "blackout", "flap",
	"sender-after-ack", "join-and-branch", "pair-random", "zone-plus-one", "join-paused",
}

// PausedFor is how long join-paused keeps its victim frozen: several
// detection thresholds, so its replicas suspect it and one takes over.
const PausedFor = 6 * time.Second

// ChaosOptions configure one chaos run.
type ChaosOptions struct {
	Scenario  string
	Workflows int
	// StepMillis is how long every sleep step takes; kills land inside steps.
	StepMillis int
	// Seed makes victim choice repeatable.
	Seed uint64
	// Timeout bounds the wait for every workflow to finish.
	Timeout time.Duration
	// FlapFor is how long the flap scenario keeps killing and restarting.
	FlapFor time.Duration
	// CutFor is how long the network scenarios keep a cut (default
	// IsolateFor).
	CutFor time.Duration
	// Reads runs chaosWorkflowReads instead of chaosWorkflow: every step
	// declares reads=(), so on nodes started with a low --stash-min the
	// holders have the origin copies keep the outputs and drop them from
	// the packs they hand on (node/origin O6), and every result must still
	// equal the fault-free one.
	Reads    bool
	Progress io.Writer
}

// workflow is the text the run submits.
func (o *ChaosOptions) workflow() string {
	if o.Reads {
		return chaosWorkflowReads
	}
	return chaosWorkflow
}

// ChaosSummary is what a chaos run measured. Outputs are counted from the
// workflows' results; executions from the invocation record file every
// service invocation appends to before it runs (Manifest.Record) and from
// the nodes' events files (package node/events), so a step silently run
// again, or an at-most-once step run twice, shows even when the result
// looks right.
type ChaosSummary struct {
	Scenario string `json:"scenario"`
	Nodes    int    `json:"nodes"`
	// Seed is the seed of the run (victim choice): run again with it to
	// aim at the same moments.
	Seed      uint64 `json:"seed"`
	Submitted int    `json:"submitted"`
	Completed int    `json:"completed"`
	// Failed counts workflows that ended failed or cancelled, including
	// FailedAtMostOnce.
	Failed int `json:"failed"`
	// FailedAtMostOnce counts workflows that failed with the documented
	// at-most-once refusal (an at-most-once step whose holder vanished is
	// not re-run; the error says "at-most-once"). They ended as designed:
	// not lost, and not compared with the fault-free result.
	FailedAtMostOnce int `json:"failed_at_most_once"`
	// Lost counts workflows still running (or unknown) at the deadline.
	Lost int `json:"lost"`
	// DuplicateOutputs counts step paths that succeeded more than once in
	// a completed workflow's trace.
	DuplicateOutputs int `json:"duplicate_outputs"`
	// ResultMismatches counts completed workflows whose result differs
	// from the fault-free run's (see normalResult).
	ResultMismatches int `json:"result_mismatches"`
	// StepsRerun counts superseded attempts in the results' traces.
	StepsRerun int `json:"steps_rerun"`
	// Executions is the number of invocation records of the run's
	// workflows.
	Executions int `json:"executions"`
	// ExecutionsDuplicated counts invocations of a (workflow, step) that
	// started after that step had finished and been handed on. Handed on
	// at = the earliest of a handed-on event for (workflow, step) and an
	// accepted, delivery or completed event of the workflow whose after is
	// the step. A step re-run because its holder died before handing it on
	// is not counted: that is the at-least-once re-route working.
	ExecutionsDuplicated int `json:"executions_duplicated"`
	// OnceViolations counts, for each (workflow, step) whose records say
	// once=true, the invocations beyond the first (summed).
	OnceViolations int `json:"once_violations"`
	// ChainsSuperseded is the number of reroute events of the run's
	// workflows (a guardian re-sent a step with a new attempt).
	ChainsSuperseded int `json:"chains_superseded"`
	// Stashes counts the times a holder dropped outputs from the pack it
	// handed on after the origin copies stored them (events.Stashed, ok;
	// only with Reads and a low --stash-min).
	Stashes int `json:"stashes,omitempty"`
	// StashesKept counts the times it kept them because an origin copy
	// did not store them (it was down).
	StashesKept int `json:"stashes_kept,omitempty"`
	// JoinTakeovers counts join copies that started acting in another's
	// place (join-takeover events of the run's workflows).
	JoinTakeovers int `json:"join_takeovers"`
	// PausedNodes are the nodes frozen with SIGSTOP and resumed
	// (join-paused).
	PausedNodes []int `json:"paused_nodes,omitempty"`
	// IsolatedNodes are the nodes a network scenario cut off (and healed).
	IsolatedNodes []int `json:"isolated_nodes,omitempty"`
	// IsolatedStep is the step isolate-holder's victim ran when it was
	// cut off (workflow, path, attempt).
	IsolatedStep string `json:"isolated_step,omitempty"`
	// IsolatedRerouted says a guardian re-routed the isolated step.
	IsolatedRerouted bool `json:"isolated_rerouted,omitempty"`
	// IsolatedSuperseded counts superseded events naming the isolated
	// step, and IsolatedHandOns the hand-ons of its isolated attempt by
	// the isolated peer.
	IsolatedSuperseded int `json:"isolated_superseded,omitempty"`
	IsolatedHandOns    int `json:"isolated_hand_ons,omitempty"`
	// IsolatedChainStopped (isolate-holder) is invariant I1 for the
	// isolated chain: the step was not re-routed, or the isolated peer
	// did not hand its attempt on, or its next hop dropped what it got
	// (a superseded event there).
	IsolatedChainStopped bool `json:"isolated_chain_stopped,omitempty"`
	// KilledPIDs and KilledNodes are the processes SIGKILLed (and their
	// node indexes), in kill order.
	KilledPIDs  []int `json:"killed_pids"`
	KilledNodes []int `json:"killed_nodes"`
	// DetectionMsP50 and DetectionMsP99 are, over the kills some node
	// suspected (Detections of them), the time from the SIGKILL to the
	// first suspect event naming the killed peer.
	DetectionMsP50 float64 `json:"detection_ms_p50"`
	DetectionMsP99 float64 `json:"detection_ms_p99"`
	Detections     int     `json:"detections"`
	// MakespanMs is from the first submission to the last completion.
	MakespanMs int64 `json:"makespan_ms"`
	// Errors lists the failed workflows' errors.
	Errors []string `json:"errors,omitempty"`
	// ExecutionDetails describes duplicated executions and once
	// violations (at most 20 lines).
	ExecutionDetails []string `json:"execution_details,omitempty"`
	// Notes say how the scenario picked its victims and anything the
	// counts cannot show (a victim that was already down, records that do
	// not mark at-most-once steps).
	Notes []string `json:"notes,omitempty"`
}

// chaosWorkflow has sequential steps, a FORK whose join holder is a target,
// sleeps long enough for a kill to land inside a step, at-most-once steps
// (once=true), so that once_violations means something, and a quick step
// that may run again (quickI), whose outcome is journaled only with its
// hand-on (node/held H4). one* and quickI are echo builtins of
// DefaultServices.
const chaosWorkflow = `sleepA oneB[once=true] FORK(sleepC sleepD, sleepE oneF[once=true]) SYNC oneG[once=true] quickI sleepH`

// chaosWorkflowReads is chaosWorkflow with reads=() on every step (the same
// paths, labels and services).
const chaosWorkflowReads = `sleepA[reads=()] oneB[once=true, reads=()] FORK(sleepC[reads=()] sleepD[reads=()], sleepE[reads=()] oneF[once=true, reads=()]) SYNC oneG[once=true, reads=()] quickI[reads=()] sleepH[reads=()]`

// chaosOnceSteps are the paths of chaosWorkflow's at-most-once steps, and
// chaosBranch0 the path prefix of its FORK's first branch.
var chaosOnceSteps = []string{"1", "2.1/1", "3"}

const chaosBranch0 = "2.0/"

// atMostOnceText is in the error of a workflow failed by the at-most-once
// refusal (node/guard.go).
const atMostOnceText = "at-most-once"

func (o *ChaosOptions) fill() error {
	if !slices.Contains(Scenarios, o.Scenario) && !isNetnsScenario(o.Scenario) {
		return fmt.Errorf("unknown chaos scenario %q (choose from %s; with --netns: %s)", o.Scenario, strings.Join(Scenarios, ", "), strings.Join(NetnsScenarios, ", "))
	}
	if o.Workflows < 1 {
		o.Workflows = 1
	}
	if o.StepMillis <= 0 {
		o.StepMillis = 600
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.FlapFor <= 0 {
		o.FlapFor = 10 * time.Second
	}
	if o.CutFor <= 0 {
		o.CutFor = IsolateFor
	}
	if o.Seed == 0 {
		o.Seed = RandomSeed()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// RandomSeed returns a random seed below 2^53, so that it survives a trip
// through JSON readers that hold numbers as float64 (jq, JavaScript).
func RandomSeed() uint64 { return rand.Uint64N(1 << 53) }

type submitted struct {
	id      string
	origins []string
	final   *api.Status
	// unanswered says why no origin answered the last status round.
	unanswered []string
}

// Chaos runs workflows on the testnet while killing nodes as the scenario
// says, restarts them, waits for every workflow and reports what happened.
//
// Before any fault it runs the chaos workflow once and keeps that run's
// result as the one every workflow must produce: the echo steps' outputs
// name their workflow and attempt, so the expected result is measured
// rather than written down, and compared after taking out what legitimately
// differs between runs (normalResult).
func (m *Manifest) Chaos(ctx context.Context, opts ChaosOptions) (*ChaosSummary, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if isNetnsScenario(opts.Scenario) {
		if err := m.requireNetns(); err != nil {
			return nil, fmt.Errorf("chaos %s: %w", opts.Scenario, err)
		}
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	input := json.RawMessage(fmt.Sprintf(`{"sleep_ms": %d}`, opts.StepMillis))
	sum := &ChaosSummary{Scenario: opts.Scenario, Nodes: len(m.Nodes), Seed: opts.Seed, KilledPIDs: []int{}, KilledNodes: []int{}}
	if opts.Scenario == "isolate-holder" {
		// The first step outlasts the cut, so the heal lands inside it.
		first := opts.CutFor.Milliseconds() + 1500
		input = json.RawMessage(fmt.Sprintf(`{"sleep_ms": {"sleepA": %d, "sleepC": %d, "sleepD": %d, "sleepE": %d, "sleepH": %d}}`,
			first, opts.StepMillis, opts.StepMillis, opts.StepMillis, opts.StepMillis))
		sum.Notes = append(sum.Notes, fmt.Sprintf("sleepA lasts %d ms (the cut plus 1.5 s, so the heal lands inside it)", first))
	}
	if opts.Scenario == "flapping-link" && opts.StepMillis < flapStepMillis {
		// Steps long enough that work is held across the flaps.
		input = json.RawMessage(fmt.Sprintf(`{"sleep_ms": %d}`, flapStepMillis))
		sum.Notes = append(sum.Notes, fmt.Sprintf("every sleep step lasts %d ms, so work is held across the flaps", flapStepMillis))
	}
	if len(m.RecordFiles()) == 0 {
		sum.Notes = append(sum.Notes, "the services file names no record file: executions were not counted")
	}

	entry := m.liveIndex(rng)
	cl, err := client.DialDataDir(ctx, m.Nodes[entry].DataDir)
	if err != nil {
		return nil, fmt.Errorf("chaos: dial node %d: %w", entry, err)
	}
	expected, err := faultFree(ctx, cl, opts.workflow(), input, time.Minute)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("chaos: %w", err)
	}
	tail := newEventTail(m)
	r := &chaosRun{m: m, opts: opts, rng: rng, entry: entry, start: time.Now(), tail: tail, sum: sum, wf: map[string]bool{}, cl: cl, input: input}
	for range opts.Workflows {
		if err := r.submit(ctx); err != nil {
			cl.Close()
			return nil, err
		}
	}
	fmt.Fprintf(opts.Progress, "submitted %d workflows to node %d\n", len(r.runs), entry)
	down, err := r.strike(ctx)
	cl.Close()
	if err != nil {
		return nil, err
	}
	runs, start := r.runs, r.start
	sum.Submitted = len(runs)
	// Wait for every workflow, asking its origins in turn.
	deadline := time.Now().Add(opts.Timeout)
	polls := &statusClients{m: m}
	for _, run := range runs {
		run.final = m.await(ctx, polls, run, deadline)
	}
	polls.close()
	if err := r.healNetns(); err != nil {
		return nil, err
	}
	// Victims stay down until every workflow ended, so completion proves the
	// takeover (re-route, join replica, origin replica), not a restart.
	restarted := time.Now()
	for _, i := range down {
		if err := m.Restart(ctx, i); err != nil {
			return nil, fmt.Errorf("chaos: restart node %d after the run: %w", i, err)
		}
	}
	// A restarted victim reloads its journal: whatever it runs again now
	// must be counted too.
	r.settle(ctx, down, restarted)

	var last time.Time
	for _, run := range runs {
		switch {
		case run.final == nil || run.final.State == api.StateRunning:
			sum.Lost++
			detail := lostDetail(run.final, opts.Timeout)
			if run.final == nil && len(run.unanswered) > 0 {
				detail += " (" + strings.Join(run.unanswered, "; ") + ")"
			}
			sum.Errors = append(sum.Errors, run.id+": lost: "+detail)
		case run.final.State == api.StateSucceeded:
			sum.Completed++
			if run.final.Finished.After(last) {
				last = run.final.Finished
			}
			if got, ok := normalResult(run.final.Result, run.id); !ok || !maps.Equal(got, expected) {
				sum.ResultMismatches++
			}
			sum.DuplicateOutputs += duplicates(run.final.Trace)
		default:
			sum.Failed++
			if strings.Contains(run.final.Error, atMostOnceText) {
				sum.FailedAtMostOnce++
			}
			sum.Errors = append(sum.Errors, run.id+": "+run.final.Error)
		}
		if run.final != nil {
			for _, e := range run.final.Trace {
				if e.Outcome == "superseded" {
					sum.StepsRerun++
				}
			}
		}
	}
	if !last.IsZero() {
		sum.MakespanMs = last.Sub(start).Milliseconds()
	}

	tail.poll()
	recs, err := m.invocations()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	ids := make([]string, 0, len(runs))
	for _, run := range runs {
		ids = append(ids, run.id)
	}
	c := CountExecutions(recs, tail.all, ids)
	sum.Executions, sum.ExecutionsDuplicated, sum.OnceViolations, sum.ChainsSuperseded = c.Executions, c.Duplicated, c.OnceViolations, c.ChainsSuperseded
	sum.JoinTakeovers = c.JoinTakeovers
	sum.Stashes, sum.StashesKept = c.Stashes, c.StashesKept
	sum.ExecutionDetails = c.Details
	if n := unmarkedOnce(recs, r.wf); n > 0 {
		sum.Notes = append(sum.Notes, fmt.Sprintf("%d invocations of at-most-once steps (paths %s) are recorded with once=false: once_violations cannot see them", n, strings.Join(chaosOnceSteps, ", ")))
	}
	if tail.bad > 0 {
		sum.Notes = append(sum.Notes, fmt.Sprintf("%d events lines did not parse", tail.bad))
	}
	r.checkIsolations(tail.all)
	det := detectionTimes(r.kills, tail.all)
	sum.Detections = len(det)
	sum.DetectionMsP50, sum.DetectionMsP99 = percentile(det, 50), percentile(det, 99)
	return sum, nil
}

// lostDetail says how far a lost workflow got.
func lostDetail(st *api.Status, timeout time.Duration) string {
	if st == nil {
		return "no origin answered"
	}
	msg := fmt.Sprintf("still running after %s, %d of %d steps done", timeout, st.StepsDone, st.StepsTotal)
	if n := len(st.Recent); n > 0 {
		e := st.Recent[n-1]
		msg += fmt.Sprintf("; last: %s (%s) attempt %d %s on %s", e.Path, e.Service, e.Attempt, e.Outcome, shortPeer(e.Peer))
	}
	return msg
}

// faultFree runs the chaos workflow once, before any fault, and returns its
// normalised result: what every chaos run must produce.
func faultFree(ctx context.Context, cl *client.Client, workflow string, input json.RawMessage, limit time.Duration) (map[string]string, error) {
	st, err := cl.Submit(ctx, "chaos-fault-free.bedwe", workflow, input)
	if err != nil {
		return nil, fmt.Errorf("submit the fault-free run: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	final, err := cl.Wait(wctx, st.ID, 100*time.Millisecond, nil)
	if err != nil {
		return nil, fmt.Errorf("fault-free run %s: %w", st.ID, err)
	}
	if final.State != api.StateSucceeded {
		return nil, fmt.Errorf("fault-free run %s ended %s: %s", st.ID, final.State, final.Error)
	}
	norm, ok := normalResult(final.Result, st.ID)
	if !ok {
		return nil, fmt.Errorf("fault-free run %s: result does not parse or names another workflow", st.ID)
	}
	return norm, nil
}

// normalResult returns a result with what legitimately differs between runs
// of the same workflow taken out, each output as canonical JSON by label.
// An echo step's output names its workflow, attempt and idempotency key:
// the workflow must be id (else ok is false), and the attempt and key are
// dropped (a re-routed step runs with a new attempt and still produces the
// right output). Everything else (sleep outputs, the echo's step path,
// service, input and the labels of the outputs it saw) must match exactly.
func normalResult(res map[string]json.RawMessage, id string) (map[string]string, bool) {
	out := make(map[string]string, len(res))
	ok := true
	for label, raw := range res {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, false
		}
		if obj, isObj := v.(map[string]any); isObj {
			if echo, isEcho := obj["echo"].(map[string]any); isEcho {
				if wf, _ := echo["workflow_id"].(string); wf != id {
					ok = false
				}
				delete(echo, "workflow_id")
				delete(echo, "attempt")
				delete(echo, "idempotency_key")
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		out[label] = string(b)
	}
	return out, ok
}

// unmarkedOnce counts the invocations of chaosWorkflow's at-most-once steps
// among the workflows in wf that are recorded with once=false.
func unmarkedOnce(recs []Invocation, wf map[string]bool) int {
	n := 0
	for _, r := range recs {
		if wf[r.Workflow] && !r.Once && slices.Contains(chaosOnceSteps, r.Step) {
			n++
		}
	}
	return n
}

// invocations reads every invocation record file of the testnet.
func (m *Manifest) invocations() ([]Invocation, error) {
	var all []Invocation
	for _, p := range m.RecordFiles() {
		recs, err := ReadInvocations(p)
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	return all, nil
}

// liveIndex picks a running node.
func (m *Manifest) liveIndex(rng *rand.Rand) int {
	var live []int
	for i := range m.Nodes {
		if m.alive(&m.Nodes[i]) {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return 0
	}
	return live[rng.IntN(len(live))]
}

// kill is one SIGKILL with its time, for detection measurements.
type kill struct {
	peer string
	at   time.Time
}

// chaosRun is one chaos run's state while it strikes.
type chaosRun struct {
	m     *Manifest
	opts  ChaosOptions
	rng   *rand.Rand
	entry int
	start time.Time
	// wf holds the IDs of the run's workflows.
	wf    map[string]bool
	tail  *eventTail
	sum   *ChaosSummary
	kills []kill
	// cl is a client of the entry node, open while the run strikes, for
	// the workflows a scenario submits besides opts.Workflows.
	cl    *client.Client
	input json.RawMessage
	runs  []*submitted
	// isolations are the cuts of a network scenario, and lossy whether it
	// put loss on every link.
	isolations []isolation
	lossy      bool
}

// submit submits one more chaos workflow to the entry node.
func (r *chaosRun) submit(ctx context.Context) error {
	began := time.Now()
	st, err := r.cl.Submit(ctx, "chaos.bedwe", r.opts.workflow(), r.input)
	if err != nil {
		return fmt.Errorf("chaos: submit at %s (answered after %s): %w", began.Sub(r.start).Round(time.Millisecond), time.Since(began).Round(time.Millisecond), err)
	}
	r.runs = append(r.runs, &submitted{id: st.ID, origins: st.Origins})
	r.wf[st.ID] = true
	return nil
}

// ended reports whether every workflow of the run has a completed event
// (or, failed, a final status at its first origin): then no target a
// scenario waits for can appear any more.
func (r *chaosRun) ended(ctx context.Context) bool {
	r.tail.poll()
	done := map[string]bool{}
	for _, e := range r.tail.all {
		if e.Type == events.Completed {
			done[e.Workflow] = true
		}
	}
	for _, run := range r.runs {
		if done[run.id] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := r.cl.Status(cctx, run.id)
		cancel()
		if err != nil || st.State == api.StateRunning {
			return false
		}
	}
	return true
}

// nodeActivity is a live node's activity.json.
type nodeActivity struct {
	i int
	a activityFile
}

// activityFile is the part of DATA/activity.json chaos reads.
type activityFile struct {
	Updated time.Time `json:"updated"`
	Held    []struct {
		Workflow string `json:"workflow"`
		Step     string `json:"step"`
		Path     string `json:"path"`
		Attempt  int    `json:"attempt"`
		Sender   string `json:"sender"`
	} `json:"held"`
	Joins    []string `json:"joins"`
	JoinInfo []struct {
		ID       string   `json:"id"`
		Workflow string   `json:"workflow"`
		Replicas []string `json:"replicas"`
	} `json:"join_info"`
	Origins []string `json:"origins"`
}

// notef records a note in the summary and prints it.
func (r *chaosRun) notef(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.sum.Notes = append(r.sum.Notes, msg)
	fmt.Fprintln(r.opts.Progress, msg)
}

// killNodes SIGKILLs the live nodes among idx.
func (r *chaosRun) killNodes(idx []int) error {
	m := r.m
	for _, i := range idx {
		if !m.alive(&m.Nodes[i]) {
			continue
		}
		pid := m.Nodes[i].PID
		r.kills = append(r.kills, kill{peer: m.Nodes[i].PeerID, at: time.Now()})
		if err := m.Kill(i, syscall.SIGKILL); err != nil {
			return fmt.Errorf("chaos %s: %w", r.opts.Scenario, err)
		}
		r.sum.KilledPIDs = append(r.sum.KilledPIDs, pid)
		r.sum.KilledNodes = append(r.sum.KilledNodes, i)
		fmt.Fprintf(r.opts.Progress, "SIGKILL node %d (pid %d, zone %s) at %s\n", i, pid, m.Nodes[i].Zone, time.Since(r.start).Round(time.Millisecond))
	}
	return nil
}

// restart starts the nodes in idx again, after a pause.
func (r *chaosRun) restart(ctx context.Context, idx []int, after time.Duration) error {
	if !sleepCtx(ctx, after) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(idx))
	for k, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = r.m.Restart(ctx, i)
		}()
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			return fmt.Errorf("chaos %s: restart node %d: %w", r.opts.Scenario, idx[k], err)
		}
	}
	fmt.Fprintf(r.opts.Progress, "restarted nodes %v\n", idx)
	return nil
}

// snapshot reads the activity of every live node, in random order.
func (r *chaosRun) snapshot() []nodeActivity {
	var out []nodeActivity
	for _, i := range r.rng.Perm(len(r.m.Nodes)) {
		nd := &r.m.Nodes[i]
		if !r.m.alive(nd) {
			continue
		}
		var a activityFile
		if readJSON(filepath.Join(nd.DataDir, "activity.json"), &a) == nil {
			out = append(out, nodeActivity{i: i, a: a})
		}
	}
	return out
}

// holds reports whether a holds a pack of one of the run's workflows.
func (r *chaosRun) holds(a activityFile) bool {
	for _, h := range a.Held {
		if r.wf[h.Workflow] {
			return true
		}
	}
	return false
}

// await polls the live nodes' activity every 20 ms until pick chooses
// victims from it, for at most limit, or until every workflow of the run
// has ended.
func (r *chaosRun) await(ctx context.Context, limit time.Duration, what string, pick func([]nodeActivity) []int) ([]int, error) {
	deadline := time.Now().Add(limit)
	nextEndCheck := time.Now().Add(time.Second)
	for {
		if idx := pick(r.snapshot()); len(idx) > 0 {
			return idx, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("chaos %s: no %s within %s", r.opts.Scenario, what, limit)
		}
		if time.Now().After(nextEndCheck) {
			if r.ended(ctx) {
				return nil, fmt.Errorf("chaos %s: every workflow ended before a %s showed", r.opts.Scenario, what)
			}
			nextEndCheck = time.Now().Add(time.Second)
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

// first returns a picker choosing the first node pred accepts.
func first(pred func(nodeActivity) bool) func([]nodeActivity) []int {
	return func(snap []nodeActivity) []int {
		for _, na := range snap {
			if pred(na) {
				return []int{na.i}
			}
		}
		return nil
	}
}

// targetWait is how long a scenario waits for its target to appear.
const targetWait = 30 * time.Second

// strike carries out the scenario's kills (and, for blackout and flap, the
// restarts). It returns the nodes left down for the caller to restart once
// every workflow has ended.
func (r *chaosRun) strike(ctx context.Context) ([]int, error) {
	m, entry := r.m, r.entry
	running := func(na nodeActivity) bool { return r.holds(na.a) && na.i != entry }
	killAndKeep := func(idx []int) ([]int, error) {
		if err := r.killNodes(idx); err != nil {
			return nil, err
		}
		return idx, nil
	}
	switch r.opts.Scenario {
	case "executor":
		idx, err := r.await(ctx, targetWait, "peer running a step", first(running))
		if err != nil {
			return nil, err
		}
		return killAndKeep(idx)
	case "consecutive":
		idx, err := r.await(ctx, targetWait, "peer running a step handed over by a peer other than the entry", func(snap []nodeActivity) []int {
			for _, na := range snap {
				if !running(na) {
					continue
				}
				for _, h := range na.a.Held {
					if s := m.index(h.Sender); r.wf[h.Workflow] && s >= 0 && s != entry && s != na.i {
						return []int{s, na.i}
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return killAndKeep(idx)
	case "join-holder":
		idx, err := r.await(ctx, targetWait, "join holder", first(func(na nodeActivity) bool { return len(na.a.Joins) > 0 }))
		if err != nil {
			return nil, err
		}
		return killAndKeep(idx)
	case "origin":
		if _, err := r.await(ctx, targetWait, "peer running a step", first(func(na nodeActivity) bool { return r.holds(na.a) })); err != nil {
			return nil, err
		}
		return killAndKeep([]int{entry})
	case "zone":
		idx, err := r.await(ctx, targetWait, "peer running a step", first(running))
		if err != nil {
			return nil, err
		}
		return killAndKeep(m.zoneOf(idx[0]))
	case "blackout":
		if _, err := r.await(ctx, targetWait, "peer running a step", first(running)); err != nil {
			return nil, err
		}
		all := make([]int, len(m.Nodes))
		for k := range all {
			all[k] = k
		}
		if err := r.killNodes(all); err != nil {
			return nil, err
		}
		if err := r.restart(ctx, all, time.Second); err != nil {
			return nil, err
		}
		return nil, m.WaitConnected(ctx, time.Minute)
	case "flap":
		end := time.Now().Add(r.opts.FlapFor)
		for time.Now().Before(end) {
			i := r.rng.IntN(len(m.Nodes))
			if err := r.killNodes([]int{i}); err != nil {
				return nil, err
			}
			if err := r.restart(ctx, []int{i}, time.Duration(1500+r.rng.IntN(1500))*time.Millisecond); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "sender-after-ack":
		return r.senderAfterAck(ctx)
	case "join-and-branch":
		return r.joinAndBranch(ctx)
	case "pair-random":
		return r.pairRandom(ctx)
	case "join-paused":
		return nil, r.joinPaused(ctx)
	case "isolate-holder", "isolate-join-holder", "split-zones", "lossy", "flapping-link":
		return nil, r.strikeNetns(ctx)
	case "zone-plus-one":
		idx, err := r.await(ctx, targetWait, "zone holding work besides the entry's, and a peer holding work in another zone", func(snap []nodeActivity) []int {
			for _, na := range snap {
				z := m.Nodes[na.i].Zone
				if !running(na) || z == m.Nodes[entry].Zone {
					continue
				}
				for _, other := range snap {
					if running(other) && m.Nodes[other.i].Zone != z {
						return append(m.zoneOf(na.i), other.i)
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		r.notef("zone %s (nodes %v) plus node %d of zone %s", m.Nodes[idx[0]].Zone, idx[:len(idx)-1], idx[len(idx)-1], m.Nodes[idx[len(idx)-1]].Zone)
		return killAndKeep(idx)
	}
	return nil, fmt.Errorf("chaos: no strike for scenario %q", r.opts.Scenario)
}

// zoneOf lists the nodes of node i's zone.
func (m *Manifest) zoneOf(i int) []int {
	var idx []int
	for k := range m.Nodes {
		if m.Nodes[k].Zone == m.Nodes[i].Zone {
			idx = append(idx, k)
		}
	}
	return idx
}

// joinPaused freezes a node (not the entry) acting for a join of the run
// with SIGSTOP and resumes it PausedFor later. Nothing is left down.
func (r *chaosRun) joinPaused(ctx context.Context) error {
	m := r.m
	idx, _, _, err := r.awaitJoinHolder(ctx)
	if err != nil {
		return err
	}
	i := idx[0]
	pid := m.Nodes[i].PID
	// Counted as a kill for detection times: its peers should suspect it.
	r.kills = append(r.kills, kill{peer: m.Nodes[i].PeerID, at: time.Now()})
	if err := m.Kill(i, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("chaos %s: %w", r.opts.Scenario, err)
	}
	r.sum.PausedNodes = append(r.sum.PausedNodes, i)
	fmt.Fprintf(r.opts.Progress, "SIGSTOP node %d (pid %d, zone %s) at %s\n", i, pid, m.Nodes[i].Zone, time.Since(r.start).Round(time.Millisecond))
	paused := sleepCtx(ctx, PausedFor)
	if err := m.Kill(i, syscall.SIGCONT); err != nil {
		return fmt.Errorf("chaos %s: %w", r.opts.Scenario, err)
	}
	if !paused {
		return ctx.Err()
	}
	fmt.Fprintf(r.opts.Progress, "SIGCONT node %d at %s\n", i, time.Since(r.start).Round(time.Millisecond))
	r.notef("froze join holder node %d for %s (a false suspicion), then resumed it", i, PausedFor)
	return nil
}

// tailEvery is how often sender-after-ack reads the events files.
const tailEvery = 5 * time.Millisecond

// senderAfterAck kills, as soon as it shows in the events, the sender of
// the first pack of the run that a node accepted from a live node other
// than the entry and itself: that sender has just been acknowledged and
// may not have released its guardians yet.
func (r *chaosRun) senderAfterAck(ctx context.Context) ([]int, error) {
	m := r.m
	deadline := time.Now().Add(targetWait)
	for time.Now().Before(deadline) {
		for _, e := range r.tail.poll() {
			if e.Type != events.Accepted || !r.wf[e.Workflow] || e.From == "" || e.From == e.Node {
				continue
			}
			s := m.index(e.From)
			if s < 0 || s == r.entry || !m.alive(&m.Nodes[s]) {
				continue
			}
			killedAt := time.Now()
			if err := r.killNodes([]int{s}); err != nil {
				return nil, err
			}
			r.notef("node %d accepted %s step %s (after %q) from node %d; SIGKILLed node %d %s later",
				m.index(e.Node), e.Workflow, e.Step, e.After, s, s, killedAt.Sub(e.At).Round(time.Millisecond))
			return []int{s}, nil
		}
		if !sleepCtx(ctx, tailEvery) {
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("chaos %s: no pack accepted from a peer other than the entry within %s", r.opts.Scenario, targetWait)
}

// maxExtraWorkflows bounds the workflows join-and-branch submits besides
// ChaosOptions.Workflows.
const maxExtraWorkflows = 5

// awaitJoinHolder waits for a node other than the entry that acts for a
// join of the run, submitting up to maxExtraWorkflows more workflows while
// every join is at the entry or over. It returns the node, the join's
// workflow and the node's activity.
func (r *chaosRun) awaitJoinHolder(ctx context.Context) ([]int, string, activityFile, error) {
	var joinWF string
	var joinHeld activityFile
	pick := func(snap []nodeActivity) []int {
		for _, na := range snap {
			if na.i == r.entry {
				continue
			}
			for _, j := range na.a.JoinInfo {
				if r.wf[j.Workflow] {
					joinWF, joinHeld = j.Workflow, na.a
					return []int{na.i}
				}
			}
		}
		return nil
	}
	for extra := 0; ; extra++ {
		idx, err := r.await(ctx, targetWait, "join holder other than the entry", pick)
		if err == nil {
			return idx, joinWF, joinHeld, nil
		}
		if ctx.Err() != nil || extra == maxExtraWorkflows {
			return nil, "", activityFile{}, err
		}
		if err := r.submit(ctx); err != nil {
			return nil, "", activityFile{}, err
		}
		r.notef("every join so far was at the entry or is over: submitted workflow %d", len(r.runs))
	}
}

// joinAndBranch kills a node (not the entry) acting for a join of the run,
// then 50 ms later the node running branch 0 of that join's workflow.
//
// The node that runs the step before the FORK peels it and holds its join,
// and that is often the entry (idle while the others sleep): when every
// workflow of the run has passed its FORK with the join at the entry, it
// submits one more workflow (at most maxExtraWorkflows, counted in
// Submitted and noted) rather than give up.
func (r *chaosRun) joinAndBranch(ctx context.Context) ([]int, error) {
	m := r.m
	idx, joinWF, joinHeld, err := r.awaitJoinHolder(ctx)
	if err != nil {
		return nil, err
	}
	j := idx[0]
	if err := r.killNodes([]int{j}); err != nil {
		return nil, err
	}
	down := []int{j}
	for _, h := range joinHeld.Held {
		if h.Workflow == joinWF && strings.HasPrefix(h.Path, chaosBranch0) {
			r.notef("join holder node %d of %s was also running branch 0 (step %s): no second kill", j, joinWF, h.Path)
			return down, nil
		}
	}
	if !sleepCtx(ctx, 50*time.Millisecond) {
		return nil, ctx.Err()
	}
	branch0 := func(snap []nodeActivity) []int {
		for _, na := range snap {
			for _, h := range na.a.Held {
				if h.Workflow == joinWF && strings.HasPrefix(h.Path, chaosBranch0) {
					return []int{na.i}
				}
			}
		}
		return nil
	}
	b, err := r.await(ctx, time.Second, "branch 0 runner", branch0)
	how := "its activity"
	if err != nil {
		// No live node reports branch 0 (it may have ended, or its runner's
		// activity.json lags): take the node that last accepted a branch 0
		// step of the workflow.
		how = "the last accepted event of branch 0"
		r.tail.poll()
		var latest events.Event
		for _, e := range r.tail.all {
			if e.Type == events.Accepted && e.Workflow == joinWF && strings.HasPrefix(e.Step, chaosBranch0) && e.At.After(latest.At) {
				latest = e
			}
		}
		if latest.Node == "" {
			r.notef("killed join holder node %d of %s; no node ran branch 0 of it since the run started: no second kill", j, joinWF)
			return down, nil
		}
		b = []int{m.index(latest.Node)}
	}
	switch {
	case b[0] < 0:
		r.notef("killed join holder node %d of %s; branch 0 ran on a peer outside the testnet: no second kill", j, joinWF)
	case b[0] == j:
		r.notef("killed join holder node %d of %s; branch 0 runner (by %s) is the same node", j, joinWF, how)
	default:
		r.notef("killed join holder node %d of %s, then branch 0 runner node %d (by %s)", j, joinWF, b[0], how)
		if err := r.killNodes(b); err != nil {
			return nil, err
		}
		down = append(down, b[0])
	}
	return down, nil
}

// pairRandom kills two random nodes (not the entry) holding work, at two
// random instants within the first three step durations of the run.
func (r *chaosRun) pairRandom(ctx context.Context) ([]int, error) {
	window := 3 * time.Duration(r.opts.StepMillis) * time.Millisecond
	at := []time.Duration{time.Duration(r.rng.Int64N(int64(window))), time.Duration(r.rng.Int64N(int64(window)))}
	slices.Sort(at)
	var down []int
	for _, d := range at {
		if !sleepCtx(ctx, time.Until(r.start.Add(d))) {
			return nil, ctx.Err()
		}
		idx, err := r.await(ctx, targetWait, "peer holding work", func(snap []nodeActivity) []int {
			var cand []int
			for _, na := range snap {
				if na.i != r.entry && r.holds(na.a) && !slices.Contains(down, na.i) {
					cand = append(cand, na.i)
				}
			}
			if len(cand) == 0 {
				return nil
			}
			return []int{cand[r.rng.IntN(len(cand))]}
		})
		if err != nil {
			return nil, err
		}
		r.notef("instant %s: node %d", d.Round(time.Millisecond), idx[0])
		if err := r.killNodes(idx); err != nil {
			return nil, err
		}
		down = append(down, idx[0])
	}
	return down, nil
}

// settleWait bounds how long settle waits for restarted victims.
const settleWait = 10 * time.Second

// settle waits until every node in idx, restarted at since, has reported
// its activity since then and holds no pack of the run (it dropped or
// forwarded what its journal held), so that anything it ran again is in
// the records before they are counted.
func (r *chaosRun) settle(ctx context.Context, idx []int, since time.Time) {
	deadline := time.Now().Add(settleWait)
	for _, i := range idx {
		for {
			var a activityFile
			err := readJSON(filepath.Join(r.m.Nodes[i].DataDir, "activity.json"), &a)
			if err == nil && a.Updated.After(since) && !r.holds(a) {
				break
			}
			if time.Now().After(deadline) {
				r.notef("restarted node %d still held work of the run %s after its restart", i, settleWait)
				break
			}
			if !sleepCtx(ctx, 50*time.Millisecond) {
				return
			}
		}
	}
}

func (m *Manifest) index(peerID string) int {
	for i, nd := range m.Nodes {
		if nd.PeerID == peerID {
			return i
		}
	}
	return -1
}

// await polls a workflow's origins until it ends or the deadline passes. It
// asks at least once, even past the deadline: the workflows share one
// deadline and are awaited in turn, so one that hangs must not make those
// after it look lost unasked.
func (m *Manifest) await(ctx context.Context, polls *statusClients, r *submitted, deadline time.Time) *api.Status {
	var last *api.Status
	for {
		// Any origin that knows the end is right: the completion may have
		// reached a replica while the origin was down.
		r.unanswered = r.unanswered[:0]
		for _, addr := range r.origins {
			st, err := polls.status(ctx, addr, r.id)
			if err != nil {
				r.unanswered = append(r.unanswered, err.Error())
				continue
			}
			last = &st
			if st.State != api.StateRunning {
				return last
			}
		}
		if !time.Now().Before(deadline) {
			return last
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// statusClients keeps one client connection per origin address while the
// workflows of a run are awaited. A new connection for every poll (four a
// second for each origin of a workflow that hangs) made the nodes'
// resource manager refuse connections from the client's address (its
// per-IP connection rate limit: loopback is exempt, a namespace testnet's
// bridge address is not), so the workflows awaited after a hung one looked
// lost although they had ended.
type statusClients struct {
	m       *Manifest
	clients map[string]*client.Client
}

// status asks the origin at addr for workflow id's status, on the
// address's client (dialled at the first call and again after a failure).
func (p *statusClients) status(ctx context.Context, addr, id string) (api.Status, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl := p.clients[addr]
	if cl == nil {
		var err error
		if cl, err = p.m.Dial(cctx, addr); err != nil {
			return api.Status{}, err
		}
		if p.clients == nil {
			p.clients = map[string]*client.Client{}
		}
		p.clients[addr] = cl
	}
	st, err := cl.Result(cctx, id)
	if err != nil {
		cl.Close()
		delete(p.clients, addr)
	}
	return st, err
}

func (p *statusClients) close() {
	for addr, cl := range p.clients {
		cl.Close()
		delete(p.clients, addr)
	}
}

func sameResult(got, want map[string]json.RawMessage) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		var a, b any
		if json.Unmarshal(got[k], &a) != nil || json.Unmarshal(w, &b) != nil {
			return false
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			return false
		}
	}
	return true
}

// duplicates counts step paths that succeeded more than once in a result's
// trace: outputs counted twice.
func duplicates(trace []pack.TraceEntry) int {
	ok := map[string]int{}
	for _, e := range trace {
		if e.Outcome == "ok" {
			ok[e.Path]++
		}
	}
	n := 0
	for _, c := range ok {
		if c > 1 {
			n += c - 1
		}
	}
	return n
}

// detectionTimes returns, for every kill some node suspected, how long
// from the SIGKILL to the first suspect event naming the killed peer, in
// milliseconds.
func detectionTimes(kills []kill, evs []events.Event) []float64 {
	suspected := map[string][]time.Time{}
	for _, e := range evs {
		if e.Type == events.Suspect && e.Peer != "" {
			suspected[e.Peer] = append(suspected[e.Peer], e.At)
		}
	}
	var out []float64
	for _, k := range kills {
		best := time.Duration(-1)
		for _, at := range suspected[k.peer] {
			if d := at.Sub(k.at); d >= 0 && (best < 0 || d < best) {
				best = d
			}
		}
		if best >= 0 {
			out = append(out, float64(best.Milliseconds()))
		}
	}
	return out
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	idx := int(float64(len(s)-1) * p / 100)
	return s[idx]
}
