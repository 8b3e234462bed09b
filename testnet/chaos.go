package testnet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/pack"
)

// Scenarios are the chaos scenarios, each killing real processes with
// SIGKILL at a moment chosen from what the nodes report in activity.json.
var Scenarios = []string{"executor", "consecutive", "join-holder", "origin", "zone", "blackout", "flap"}

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
	FlapFor  time.Duration
	Progress io.Writer
}

// ChaosSummary is what a chaos run measured.
type ChaosSummary struct {
	Scenario         string  `json:"scenario"`
	Nodes            int     `json:"nodes"`
	Submitted        int     `json:"submitted"`
	Completed        int     `json:"completed"`
	Failed           int     `json:"failed"`
	Lost             int     `json:"lost"`
	DuplicateOutputs int     `json:"duplicate_outputs"`
	ResultMismatches int     `json:"result_mismatches"`
	StepsRerun       int     `json:"steps_rerun"`
	KilledPIDs       []int   `json:"killed_pids"`
	DetectionMsP50   float64 `json:"detection_ms_p50"`
	DetectionMsP99   float64 `json:"detection_ms_p99"`
	Detections       int     `json:"detections"`
	MakespanMs       int64   `json:"makespan_ms"`
	// Errors lists the failed workflows' errors.
	Errors []string `json:"errors,omitempty"`
}

// chaosWorkflow has sequential steps, a FORK whose join holder is a target,
// and sleeps long enough for a kill to land inside a step.
const chaosWorkflow = `sleepA sleepB FORK(sleepC sleepD, sleepE sleepF) SYNC sleepG sleepH`

func (o *ChaosOptions) fill() error {
	if !slices.Contains(Scenarios, o.Scenario) {
		return fmt.Errorf("unknown chaos scenario %q (choose from %s)", o.Scenario, strings.Join(Scenarios, ", "))
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
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

type submitted struct {
	id      string
	origins []string
	final   *api.Status
}

// Chaos runs workflows on the testnet while killing nodes as the scenario
// says, restarts them, waits for every workflow and reports what happened.
func (m *Manifest) Chaos(ctx context.Context, opts ChaosOptions) (*ChaosSummary, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	input := fmt.Sprintf(`{"sleep_ms": %d}`, opts.StepMillis)
	sum := &ChaosSummary{Scenario: opts.Scenario, Nodes: len(m.Nodes), KilledPIDs: []int{}}

	// The fault-free result every run must equal: each step's output.
	expected := map[string]json.RawMessage{}
	for _, s := range []string{"sleepA", "sleepB", "sleepC", "sleepD", "sleepE", "sleepF", "sleepG", "sleepH"} {
		expected[s] = json.RawMessage(fmt.Sprintf(`{"slept_ms":%d}`, opts.StepMillis))
	}

	entry := m.liveIndex(rng)
	cl, err := client.DialDataDir(ctx, m.Nodes[entry].DataDir)
	if err != nil {
		return nil, err
	}
	var runs []*submitted
	start := time.Now()
	for range opts.Workflows {
		st, err := cl.Submit(ctx, "chaos.bedwe", chaosWorkflow, json.RawMessage(input))
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("submit: %w", err)
		}
		runs = append(runs, &submitted{id: st.ID, origins: st.Origins})
	}
	cl.Close()
	sum.Submitted = len(runs)
	fmt.Fprintf(opts.Progress, "submitted %d workflows to node %d\n", len(runs), entry)

	kills, down, err := m.strike(ctx, opts, rng, entry, sum)
	if err != nil {
		return nil, err
	}
	// Wait for every workflow, asking its origins in turn.
	deadline := time.Now().Add(opts.Timeout)
	for _, r := range runs {
		r.final = m.await(ctx, r, deadline)
	}
	// Victims stay down until every workflow ended, so completion proves the
	// takeover (re-route, join replica, origin replica), not a restart.
	for _, i := range down {
		if err := m.Restart(ctx, i); err != nil {
			return nil, fmt.Errorf("restart node %d after the run: %w", i, err)
		}
	}
	var last time.Time
	for _, r := range runs {
		switch {
		case r.final == nil || r.final.State == api.StateRunning:
			sum.Lost++
		case r.final.State == api.StateSucceeded:
			sum.Completed++
			if r.final.Finished.After(last) {
				last = r.final.Finished
			}
			if !sameResult(r.final.Result, expected) {
				sum.ResultMismatches++
			}
			sum.DuplicateOutputs += duplicates(r.final.Trace)
		default:
			sum.Failed++
			sum.Errors = append(sum.Errors, r.id+": "+r.final.Error)
		}
		if r.final != nil {
			for _, e := range r.final.Trace {
				if e.Outcome == "superseded" {
					sum.StepsRerun++
				}
			}
		}
	}
	if !last.IsZero() {
		sum.MakespanMs = last.Sub(start).Milliseconds()
	}
	det := m.detections(kills)
	sum.Detections = len(det)
	sum.DetectionMsP50, sum.DetectionMsP99 = percentile(det, 50), percentile(det, 99)
	return sum, nil
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

// strike carries out the scenario's kills (and, for blackout and flap, the
// restarts). It returns the nodes left down for the caller to restart once
// every workflow has ended.
func (m *Manifest) strike(ctx context.Context, opts ChaosOptions, rng *rand.Rand, entry int, sum *ChaosSummary) ([]kill, []int, error) {
	var kills []kill
	killNodes := func(idx []int) error {
		for _, i := range idx {
			if !m.alive(&m.Nodes[i]) {
				continue
			}
			sum.KilledPIDs = append(sum.KilledPIDs, m.Nodes[i].PID)
			kills = append(kills, kill{peer: m.Nodes[i].PeerID, at: time.Now()})
			if err := m.Kill(i, syscall.SIGKILL); err != nil {
				return err
			}
			fmt.Fprintf(opts.Progress, "SIGKILL node %d (pid %d, zone %s)\n", i, m.Nodes[i].PID, m.Nodes[i].Zone)
		}
		return nil
	}
	restart := func(idx []int, after time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(after):
		}
		var wg sync.WaitGroup
		errs := make([]error, len(idx))
		for k, i := range idx {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = m.Restart(ctx, i)
			}()
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				return fmt.Errorf("restart node %d: %w", idx[k], err)
			}
		}
		fmt.Fprintf(opts.Progress, "restarted nodes %v\n", idx)
		return nil
	}
	// Wait until a step is running somewhere (not at the entry node unless
	// the scenario targets the origin).
	target := func(pred func(i int, a activityFile) bool) (int, activityFile, error) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			order := rng.Perm(len(m.Nodes))
			for _, i := range order {
				if !m.alive(&m.Nodes[i]) {
					continue
				}
				var a activityFile
				if readJSON(filepath.Join(m.Nodes[i].DataDir, "activity.json"), &a) == nil && pred(i, a) {
					return i, a, nil
				}
			}
			select {
			case <-ctx.Done():
				return 0, activityFile{}, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		return 0, activityFile{}, fmt.Errorf("scenario %s: no node became a target within 30s", opts.Scenario)
	}
	running := func(i int, a activityFile) bool { return len(a.Held) > 0 && i != entry }
	switch opts.Scenario {
	case "executor":
		i, _, err := target(running)
		if err != nil {
			return nil, nil, err
		}
		if err := killNodes([]int{i}); err != nil {
			return nil, nil, err
		}
		return kills, []int{i}, nil
	case "consecutive":
		i, a, err := target(func(i int, a activityFile) bool {
			return running(i, a) && a.Held[0].Sender != "" && m.index(a.Held[0].Sender) >= 0 && m.index(a.Held[0].Sender) != entry
		})
		if err != nil {
			return nil, nil, err
		}
		both := []int{m.index(a.Held[0].Sender), i}
		if err := killNodes(both); err != nil {
			return nil, nil, err
		}
		return kills, both, nil
	case "join-holder":
		i, _, err := target(func(i int, a activityFile) bool { return len(a.Joins) > 0 })
		if err != nil {
			return nil, nil, err
		}
		if err := killNodes([]int{i}); err != nil {
			return nil, nil, err
		}
		return kills, []int{i}, nil
	case "origin":
		if _, _, err := target(func(i int, a activityFile) bool { return len(a.Held) > 0 }); err != nil {
			return nil, nil, err
		}
		if err := killNodes([]int{entry}); err != nil {
			return nil, nil, err
		}
		return kills, []int{entry}, nil
	case "zone":
		i, _, err := target(running)
		if err != nil {
			return nil, nil, err
		}
		var idx []int
		for k := range m.Nodes {
			if m.Nodes[k].Zone == m.Nodes[i].Zone {
				idx = append(idx, k)
			}
		}
		if err := killNodes(idx); err != nil {
			return nil, nil, err
		}
		return kills, idx, nil
	case "blackout":
		if _, _, err := target(running); err != nil {
			return nil, nil, err
		}
		all := make([]int, len(m.Nodes))
		for k := range all {
			all[k] = k
		}
		if err := killNodes(all); err != nil {
			return nil, nil, err
		}
		if err := restart(all, time.Second); err != nil {
			return nil, nil, err
		}
		return kills, nil, m.WaitConnected(ctx, time.Minute)
	case "flap":
		end := time.Now().Add(opts.FlapFor)
		for time.Now().Before(end) {
			i := rng.IntN(len(m.Nodes))
			if err := killNodes([]int{i}); err != nil {
				return nil, nil, err
			}
			if err := restart([]int{i}, time.Duration(1500+rng.IntN(1500))*time.Millisecond); err != nil {
				return nil, nil, err
			}
		}
		return kills, nil, nil
	}
	return kills, nil, nil
}

// activityFile is the part of DATA/activity.json chaos reads.
type activityFile struct {
	Held []struct {
		Workflow string `json:"workflow"`
		Step     string `json:"step"`
		Sender   string `json:"sender"`
	} `json:"held"`
	Joins   []string `json:"joins"`
	Origins []string `json:"origins"`
}

func (m *Manifest) index(peerID string) int {
	for i, nd := range m.Nodes {
		if nd.PeerID == peerID {
			return i
		}
	}
	return -1
}

// await polls a workflow's origins until it ends or the deadline passes.
func (m *Manifest) await(ctx context.Context, r *submitted, deadline time.Time) *api.Status {
	var last *api.Status
	for time.Now().Before(deadline) {
		// Any origin that knows the end is right: the completion may have
		// reached a replica while the origin was down.
		for _, addr := range r.origins {
			st, err := statusAt(ctx, addr, r.id)
			if err != nil {
				continue
			}
			last = &st
			if st.State != api.StateRunning {
				return last
			}
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(250 * time.Millisecond):
		}
	}
	return last
}

func statusAt(ctx context.Context, addr, id string) (api.Status, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := client.Dial(cctx, addr)
	if err != nil {
		return api.Status{}, err
	}
	defer cl.Close()
	return cl.Result(cctx, id)
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

var suspectLine = regexp.MustCompile(`msg="peer suspected" peer=(\S+) .*at=(\S+)`)

// detections returns, for every kill, how long until some node suspected
// the killed peer (from the nodes' logs), in milliseconds.
func (m *Manifest) detections(kills []kill) []float64 {
	first := map[string][]time.Time{}
	for _, nd := range m.Nodes {
		data, err := os.ReadFile(nd.Log)
		if err != nil {
			continue
		}
		for _, match := range suspectLine.FindAllStringSubmatch(string(data), -1) {
			at, err := time.Parse(time.RFC3339Nano, match[2])
			if err == nil {
				first[match[1]] = append(first[match[1]], at)
			}
		}
	}
	var out []float64
	for _, k := range kills {
		best := time.Duration(-1)
		for _, at := range first[k.peer] {
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
