package testnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/schedule"
)

// CompareModes are the routing modes Compare measures by default, in order.
var CompareModes = []string{"timetable", "heartbeat"}

// CompareOptions configure Compare.
type CompareOptions struct {
	// Nodes is the testnet size of every mode (default 16), split evenly
	// over the rotation's zones.
	Nodes int
	// Workflows is how many workflows every mode runs (default 1000).
	Workflows int
	// Rate is the steady submission rate in workflows per real second
	// (default 10).
	Rate float64
	// Speed is the virtual clock's speed (default 360: a timetable hour in
	// 10 real seconds, a 2 h cut in 20 s).
	Speed float64
	// Modes are the routing modes to measure (default CompareModes).
	Modes []string
	// Seed makes the workload repeatable; every mode runs the same one
	// (default 1).
	Seed uint64
	// Timeout bounds the wait for every workflow to end after the last
	// submission (default 5 min); those still running then are lost.
	Timeout time.Duration
	// Rotation shapes the timetable (default: zones north and south, each
	// dark 2 h of every 6 h, offset by 3 h).
	Rotation RotationOptions
	// Start is the timetable instant at which submission starts in every
	// mode (default 2026-03-02 at the end of the first zone's first cut,
	// 02:00 with the default rotation: an hour before the other zone's cut).
	Start time.Time
	// Lead is how long after a mode's first node starts its virtual clock
	// reads Start (default 5 s + 0.5 s per node): Up must finish by then, or
	// the start moves on by whole rotation periods, so every mode starts at
	// the same point of the rotation.
	Lead time.Duration
	// Dir holds one testnet directory per mode and the timetable (default:
	// a temporary directory, removed at the end unless Keep).
	Dir  string
	Keep bool
	// Binary is the bedwe executable of the nodes (default this one).
	Binary string
	// Profile and Announce are the nodes' timing (defaults "testnet", 1 s).
	Profile  string
	Announce time.Duration
	// Poll is how often the harness asks the nodes for finished workflows
	// (default 1 s); it does not affect the measurement, which uses the
	// origins' timestamps.
	Poll time.Duration
	// Progress, when set, receives one line per milestone.
	Progress io.Writer
}

func (o *CompareOptions) fill() error {
	if o.Nodes <= 0 {
		o.Nodes = 16
	}
	if o.Workflows <= 0 {
		o.Workflows = 1000
	}
	if o.Rate <= 0 {
		o.Rate = 10
	}
	if o.Speed <= 0 {
		o.Speed = 360
	}
	if len(o.Modes) == 0 {
		o.Modes = CompareModes
	}
	for _, m := range o.Modes {
		if m != "timetable" && m != "heartbeat" {
			return fmt.Errorf("compare: mode %q: use timetable or heartbeat", m)
		}
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if len(o.Rotation.Zones) == 0 {
		o.Rotation.Zones = []string{"north", "south"}
	}
	if o.Rotation.Dark <= 0 {
		o.Rotation.Dark = 2 * time.Hour
	}
	if o.Rotation.Period <= 0 {
		o.Rotation.Period = 6 * time.Hour
	}
	if o.Nodes < len(o.Rotation.Zones) {
		return fmt.Errorf("compare: %d nodes cannot fill %d zones", o.Nodes, len(o.Rotation.Zones))
	}
	if o.Lead <= 0 {
		o.Lead = 5*time.Second + time.Duration(o.Nodes)*500*time.Millisecond
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// DarkSpan is one cut of the rotation during a comparison, in real
// seconds since submission started (the same in every mode).
type DarkSpan struct {
	Zone string  `json:"zone"`
	From float64 `json:"from_s"`
	To   float64 `json:"to_s"`
}

// Comparison is the result of Compare.
type Comparison struct {
	Nodes     int      `json:"nodes"`
	Zones     []string `json:"zones"`
	Workflows int      `json:"workflows"`
	// Rate is submissions per real second, Speed the virtual clock's.
	Rate  float64 `json:"rate_per_s"`
	Speed float64 `json:"clock_speed"`
	Seed  uint64  `json:"seed"`
	// Start is the timetable instant submission started at in every mode.
	Start time.Time `json:"start"`
	// Timetable is the rotation's bedwe-schedule/1 text.
	Timetable string `json:"timetable"`
	// Dark lists the cuts from the start to the end of the longest mode.
	Dark []DarkSpan `json:"dark"`
	// Kinds counts the workload's workflows by kind.
	Kinds map[string]int `json:"kinds"`
	Modes []*ModeResult  `json:"modes"`
}

// ModeResult is what one routing mode measured.
type ModeResult struct {
	Mode string `json:"mode"`
	// Submitted workflows were accepted by a node; Completed succeeded,
	// Failed failed or were cancelled, Lost had not ended by the timeout.
	Submitted int `json:"submitted"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Lost      int `json:"lost"`
	// SubmitRetries counts submissions that had to go to another node (the
	// first one died or refused); SubmitFailed those no node accepted.
	SubmitRetries int `json:"submit_retries"`
	SubmitFailed  int `json:"submit_failed"`
	// CompletionRate is Completed / Workflows.
	CompletionRate float64 `json:"completion_rate"`
	// MakespanMs runs from the first submission to the last completion.
	MakespanMs int64 `json:"makespan_ms"`
	// Latency of the completed workflows (origin's submission to
	// completion), and of their fault-free critical path for reference.
	LatencyP50Ms  float64 `json:"latency_p50_ms"`
	LatencyP95Ms  float64 `json:"latency_p95_ms"`
	LatencyMeanMs float64 `json:"latency_mean_ms"`
	CriticalP50Ms float64 `json:"critical_p50_ms"`
	// Superseded counts trace entries of attempts superseded by a re-route,
	// Duplicates steps that ran successfully more than once, StepsRerun
	// their sum; WorkflowsRerun the workflows with either.
	Superseded     int `json:"superseded"`
	Duplicates     int `json:"duplicates"`
	StepsRerun     int `json:"steps_rerun"`
	WorkflowsRerun int `json:"workflows_rerun"`
	// Steps counts successful step attempts in the completed workflows.
	Steps int `json:"steps"`
	// Kills and Restarts count processes the timetable killed and
	// restarted; Follow is the full record.
	Kills    int           `json:"kills"`
	Restarts int           `json:"restarts"`
	Follow   *FollowReport `json:"follow,omitempty"`
	// Errors counts the failed workflows' errors by text.
	Errors map[string]int `json:"errors,omitempty"`
	// LostIDs are the workflows that had not ended by the timeout.
	LostIDs []string `json:"lost_ids,omitempty"`
	// StartedAt is the real instant submission started.
	StartedAt time.Time `json:"started_at"`
	// Runs is one entry per workflow (for CSV and plots).
	Runs []WorkflowRun `json:"-"`
}

// WorkflowRun is one workflow of a comparison run.
type WorkflowRun struct {
	Index int    `json:"index"`
	Kind  string `json:"kind"`
	ID    string `json:"id"`
	// Node is the testnet node it was submitted to.
	Node int `json:"node"`
	// State is the final state ("lost" if it had not ended, "unsubmitted"
	// if no node accepted it).
	State string `json:"state"`
	// SubmitAt is the client's submission instant; Submitted and Finished
	// are the origin's.
	SubmitAt  time.Time `json:"submit_at"`
	Submitted time.Time `json:"submitted"`
	Finished  time.Time `json:"finished"`
	// CriticalMs is the fault-free critical path of the workflow.
	CriticalMs int64  `json:"critical_ms"`
	Superseded int    `json:"superseded"`
	Duplicates int    `json:"duplicates"`
	Steps      int    `json:"steps"`
	Error      string `json:"error,omitempty"`
}

// Latency is Finished - Submitted for an ended workflow, else 0.
func (r WorkflowRun) Latency() time.Duration {
	if r.Finished.IsZero() || r.Submitted.IsZero() {
		return 0
	}
	return r.Finished.Sub(r.Submitted)
}

// Compare measures timetable-aware routing against heartbeat-only routing
// under a rotation that darkens one zone at a time: for every mode it
// starts a fresh testnet with the same timetable and virtual clock speed,
// follows the timetable (SIGKILL at cuts, restart at restores), submits the
// same seeded workload of mixed workflows at a steady rate to live nodes,
// waits for every workflow to end (or the timeout) and collects completion,
// makespan, latency and re-run steps.
func Compare(ctx context.Context, opts CompareOptions) (*Comparison, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	text, sched, err := Rotation(opts.Rotation)
	if err != nil {
		return nil, err
	}
	if opts.Start.IsZero() {
		loc, err := time.LoadLocation(sched.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		opts.Start = time.Date(2026, 3, 2, 0, 0, 0, 0, loc).Add(opts.Rotation.Dark)
	}
	base := opts.Dir
	if base == "" {
		if base, err = os.MkdirTemp("", "bedwe-compare-"); err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		if !opts.Keep {
			defer os.RemoveAll(base)
		}
	} else if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	schedPath := filepath.Join(base, "rotation.yaml")
	if err := os.WriteFile(schedPath, text, 0o644); err != nil {
		return nil, fmt.Errorf("compare: write timetable: %w", err)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	work := make([]GeneratedWorkflow, opts.Workflows)
	cmp := &Comparison{
		Nodes: opts.Nodes, Zones: opts.Rotation.Zones, Workflows: opts.Workflows,
		Rate: opts.Rate, Speed: opts.Speed, Seed: opts.Seed, Timetable: string(text),
		Kinds: map[string]int{},
	}
	for i := range work {
		work[i] = MixedWorkflow(rng)
		cmp.Kinds[work[i].Kind]++
	}
	var longest time.Duration
	for _, mode := range opts.Modes {
		fmt.Fprintf(opts.Progress, "== mode %s: %d nodes, %d workflows at %g/s, clock x%g\n", mode, opts.Nodes, opts.Workflows, opts.Rate, opts.Speed)
		res, start, err := compareMode(ctx, opts, mode, filepath.Join(base, mode), schedPath, sched, work)
		if err != nil {
			return nil, fmt.Errorf("compare, mode %s: %w", mode, err)
		}
		cmp.Start = start
		cmp.Modes = append(cmp.Modes, res)
		longest = max(longest, time.Duration(res.MakespanMs)*time.Millisecond, time.Duration(float64(opts.Workflows)/opts.Rate*float64(time.Second)))
		fmt.Fprintf(opts.Progress, "== mode %s: %d/%d completed, %d failed, %d lost, makespan %s, p50 %.0f ms, p95 %.0f ms, %d steps re-run, %d kills\n",
			mode, res.Completed, opts.Workflows, res.Failed, res.Lost, time.Duration(res.MakespanMs)*time.Millisecond,
			res.LatencyP50Ms, res.LatencyP95Ms, res.StepsRerun, res.Kills)
	}
	// The cuts over the longest run, in real seconds since the start.
	end := cmp.Start.Add(time.Duration(float64(longest) * opts.Speed))
	for _, z := range cmp.Zones {
		for _, w := range sched.Windows(z, cmp.Start, end) {
			cmp.Dark = append(cmp.Dark, DarkSpan{Zone: z,
				From: w.Start.Sub(cmp.Start).Seconds() / opts.Speed, To: w.End.Sub(cmp.Start).Seconds() / opts.Speed})
		}
	}
	sort.Slice(cmp.Dark, func(i, j int) bool { return cmp.Dark[i].From < cmp.Dark[j].From })
	return cmp, nil
}

// compareMode runs the workload on a fresh testnet in one routing mode.
func compareMode(ctx context.Context, opts CompareOptions, mode, dir, schedPath string, sched *schedule.Schedule, work []GeneratedWorkflow) (*ModeResult, time.Time, error) {
	clock := schedule.VirtualClock{Start: opts.Start, Epoch: time.Now().Add(opts.Lead).Truncate(time.Millisecond), Speed: opts.Speed}
	m, err := Up(ctx, Options{
		Nodes: opts.Nodes, Dir: dir, Binary: opts.Binary, Progress: opts.Progress,
		Profile: opts.Profile, Announce: opts.Announce,
		Schedule: schedPath, Clock: clock, Routing: mode, ZoneNames: opts.Rotation.Zones,
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	defer func() {
		if err := m.Down(); err != nil {
			fmt.Fprintf(opts.Progress, "testnet down: %v\n", err)
		}
	}()
	h := newHarness(m, opts)
	defer h.close()
	// Connect to every node before the clock starts, so the first
	// submissions do not pay for it.
	for _, i := range h.liveNodes() {
		if _, err := h.client(ctx, i); err != nil {
			fmt.Fprintf(opts.Progress, "connect to node %d: %v\n", i, err)
		}
	}
	// Start at the same point of the rotation in every mode.
	start := opts.Start
	for clock.RealAt(start).Before(time.Now().Add(100 * time.Millisecond)) {
		start = start.Add(opts.Rotation.Period)
	}
	if start != opts.Start {
		fmt.Fprintf(opts.Progress, "testnet took longer than the %s lead: starting at %s (a rotation period later)\n", opts.Lead, start.Format(time.RFC3339))
	}
	fmt.Fprintf(opts.Progress, "mesh up; submission starts in %s at timetable time %s\n", time.Until(clock.RealAt(start)).Round(time.Millisecond), start.Format("2006-01-02 15:04"))
	if err := sleepUntil(ctx, clock.RealAt(start)); err != nil {
		return nil, start, err
	}

	fctx, stopFollow := context.WithCancel(ctx)
	var follow *FollowReport
	followed := make(chan error, 1)
	go func() {
		var err error
		follow, err = m.Follow(fctx, FollowOptions{Schedule: sched, Clock: clock, Progress: opts.Progress, OnEvent: h.onEvent})
		followed <- err
	}()
	res := h.run(ctx, work)
	res.Mode = mode
	stopFollow()
	if err := <-followed; err != nil {
		return nil, start, fmt.Errorf("follow the timetable: %w", err)
	}
	res.Follow = follow
	res.Kills, res.Restarts = follow.Kills, follow.Restarts
	return res, start, ctx.Err()
}

func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// harness submits a workload to the live nodes of a testnet and collects
// the outcomes. It learns which nodes are up from Follow's events, never
// from the manifest (which Follow updates concurrently).
type harness struct {
	opts CompareOptions
	m    *Manifest // dials with its keys

	// dialing serialises the dials of each node, so concurrent callers
	// share one connection.
	dialing []sync.Mutex

	mu      sync.Mutex
	up      []bool
	gen     []int // bumped at every kill: a client of an older generation is stale
	addrs   [][]string
	clients map[int]*client.Client
	next    int

	runs []WorkflowRun
	// pending maps the IDs of submitted workflows not known to have ended
	// to their index in runs; ended those whose result is still to fetch.
	pending map[string]int
	ended   map[string]int
	// submitting counts submissions still under way.
	submitting int
}

func newHarness(m *Manifest, opts CompareOptions) *harness {
	h := &harness{opts: opts, clients: map[int]*client.Client{}, pending: map[string]int{}, ended: map[string]int{},
		dialing: make([]sync.Mutex, len(m.Nodes)), m: m}
	for i := range m.Nodes {
		h.up = append(h.up, m.alive(&m.Nodes[i]))
		h.gen = append(h.gen, 0)
		h.addrs = append(h.addrs, slices.Clone(m.Nodes[i].Addrs))
	}
	return h
}

// onEvent tracks the kills and restarts of Follow.
func (h *harness) onEvent(ev TimetableEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, i := range ev.Nodes {
		switch ev.Kind {
		case EventKill:
			h.up[i] = false
			h.gen[i]++
			if cl := h.clients[i]; cl != nil {
				cl.Close()
				delete(h.clients, i)
			}
		case EventRestart:
			h.up[i] = true
			if k < len(ev.Addrs) && ev.Addrs[k] != "" {
				h.addrs[i] = []string{ev.Addrs[k]}
			}
		}
	}
}

// pick returns the next live node, round-robin.
func (h *harness) pick() (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.up {
		i := (h.next + k) % len(h.up)
		if h.up[i] {
			h.next = i + 1
			return i, true
		}
	}
	return 0, false
}

// liveNodes lists the nodes up now.
func (h *harness) liveNodes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int
	for i, up := range h.up {
		if up {
			out = append(out, i)
		}
	}
	return out
}

// client returns a connection to node i, dialling it if needed.
func (h *harness) client(ctx context.Context, i int) (*client.Client, error) {
	h.dialing[i].Lock()
	defer h.dialing[i].Unlock()
	h.mu.Lock()
	if cl := h.clients[i]; cl != nil {
		h.mu.Unlock()
		return cl, nil
	}
	gen, addrs := h.gen[i], h.addrs[i]
	h.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := h.m.Dial(dctx, addrs...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen[i] != gen || !h.up[i] {
		cl.Close()
		return nil, fmt.Errorf("node %d went down", i)
	}
	if old := h.clients[i]; old != nil {
		cl.Close()
		return old, nil
	}
	h.clients[i] = cl
	return cl, nil
}

// drop forgets a client that failed (the next call dials again).
func (h *harness) drop(i int, cl *client.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clients[i] == cl {
		delete(h.clients, i)
		cl.Close()
	}
}

func (h *harness) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, cl := range h.clients {
		cl.Close()
		delete(h.clients, i)
	}
}

// run submits the workload at the steady rate while collecting outcomes,
// then waits for the rest until the timeout.
func (h *harness) run(ctx context.Context, work []GeneratedWorkflow) *ModeResult {
	h.runs = make([]WorkflowRun, len(work))
	for i, w := range work {
		h.runs[i] = WorkflowRun{Index: i, Kind: w.Kind, Node: -1, State: "unsubmitted", CriticalMs: w.Critical.Milliseconds()}
	}
	res := &ModeResult{StartedAt: time.Now(), Errors: map[string]int{}}
	h.submitting = len(work)
	sctx, stopSubmit := context.WithCancel(ctx)
	defer stopSubmit()
	go h.submitAll(sctx, work, res)

	deadline := time.Time{}
	tick := time.NewTicker(h.opts.Poll)
	defer tick.Stop()
	lastReport := time.Now()
	for {
		h.collect(ctx)
		h.mu.Lock()
		submitting, pending, ended := h.submitting, len(h.pending), len(h.ended)
		h.mu.Unlock()
		if submitting == 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(h.opts.Timeout)
				fmt.Fprintf(h.opts.Progress, "all submitted; waiting up to %s for %d workflows\n", h.opts.Timeout, pending+ended)
			}
			if pending == 0 && ended == 0 {
				break
			}
			if time.Now().After(deadline) {
				break
			}
		}
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			done := 0
			h.mu.Lock()
			for _, r := range h.runs {
				if r.State != "unsubmitted" && r.State != api.StateRunning {
					done++
				}
			}
			h.mu.Unlock()
			fmt.Fprintf(h.opts.Progress, "t=%s: %d ended, %d running, %d to submit\n", time.Since(res.StartedAt).Round(time.Second), done, pending+ended, submitting)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	stopSubmit()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, i := range h.pending {
		h.runs[i].State = "lost"
	}
	for _, i := range h.ended {
		// Ended, but no node gave its result before the timeout.
		if h.runs[i].State == api.StateRunning {
			h.runs[i].State = "lost"
		}
	}
	h.summarize(res)
	return res
}

// submitAll submits workflow i at start + i/rate, each to the next live node
// (another one when that fails), at most 16 at a time.
func (h *harness) submitAll(ctx context.Context, work []GeneratedWorkflow, res *ModeResult) {
	start := time.Now()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, w := range work {
		at := start.Add(time.Duration(float64(i) / h.opts.Rate * float64(time.Second)))
		if sleepUntil(ctx, at) != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			h.submit(ctx, i, w, res)
		}()
	}
	wg.Wait()
	h.mu.Lock()
	h.submitting = 0
	h.mu.Unlock()
}

// submit sends one workflow, trying up to four live nodes.
func (h *harness) submit(ctx context.Context, i int, w GeneratedWorkflow, res *ModeResult) {
	defer func() {
		h.mu.Lock()
		h.submitting--
		h.mu.Unlock()
	}()
	for attempt := 0; attempt < 4 && ctx.Err() == nil; attempt++ {
		node, ok := h.pick()
		if !ok {
			_ = sleepUntil(ctx, time.Now().Add(200*time.Millisecond))
			continue
		}
		cl, err := h.client(ctx, node)
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			at := time.Now()
			var st api.Status
			st, err = cl.Submit(sctx, "compare-"+strconv.Itoa(i)+".bedwe", w.Source, w.Input)
			cancel()
			if err == nil {
				h.mu.Lock()
				r := &h.runs[i]
				r.ID, r.Node, r.SubmitAt, r.Submitted, r.State = st.ID, node, at, st.Submitted, api.StateRunning
				h.pending[st.ID] = i
				h.mu.Unlock()
				return
			}
			var remote *client.RemoteError
			if !errors.As(err, &remote) {
				h.drop(node, cl)
			}
		}
		h.mu.Lock()
		res.SubmitRetries++
		h.runs[i].Error = err.Error()
		h.mu.Unlock()
	}
	h.mu.Lock()
	res.SubmitFailed++
	h.mu.Unlock()
}

// collect asks every live node which workflows it knows ended (origins and
// their replicas both answer), then fetches the results of those.
func (h *harness) collect(ctx context.Context) {
	nodes := h.liveNodes()
	type found struct {
		node int
		ids  []string
	}
	results := make([]found, len(nodes))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for k, i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cl, err := h.client(ctx, i)
			if err != nil {
				return
			}
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			sts, err := cl.List(lctx)
			if err != nil {
				h.drop(i, cl)
				return
			}
			results[k].node = i
			h.mu.Lock()
			for _, st := range sts {
				if _, ok := h.pending[st.ID]; ok && st.State != api.StateRunning {
					results[k].ids = append(results[k].ids, st.ID)
				}
			}
			h.mu.Unlock()
		}()
	}
	wg.Wait()
	// Move newly ended workflows from pending to ended, noting a node that
	// knows the end.
	from := map[string]int{}
	h.mu.Lock()
	for _, f := range results {
		for _, id := range f.ids {
			if i, ok := h.pending[id]; ok {
				delete(h.pending, id)
				h.ended[id] = i
			}
			from[id] = f.node
		}
	}
	todo := make(map[string]int, len(h.ended))
	for id := range h.ended {
		todo[id] = -1
		if n, ok := from[id]; ok {
			todo[id] = n
		}
	}
	h.mu.Unlock()
	// Fetch the results: from the node that reported the end, else any
	// live node that answers.
	ids := make([]string, 0, len(todo))
	for id := range todo {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		candidates := nodes
		if n := todo[id]; n >= 0 {
			candidates = append([]int{n}, nodes...)
		}
		for _, n := range candidates {
			cl, err := h.client(ctx, n)
			if err != nil {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := cl.Result(rctx, id)
			cancel()
			if err != nil || st.State == api.StateRunning {
				continue
			}
			h.mu.Lock()
			i := h.ended[id]
			delete(h.ended, id)
			h.record(i, st)
			h.mu.Unlock()
			break
		}
	}
}

// record stores a workflow's final status. h.mu is held.
func (h *harness) record(i int, st api.Status) {
	r := &h.runs[i]
	r.State, r.Finished, r.Error = st.State, st.Finished, st.Error
	if !st.Submitted.IsZero() {
		r.Submitted = st.Submitted
	}
	for _, e := range st.Trace {
		switch e.Outcome {
		case "superseded":
			r.Superseded++
		case "ok":
			r.Steps++
		}
	}
	r.Duplicates = duplicates(st.Trace)
}

// summarize fills res from the runs. h.mu is held.
func (h *harness) summarize(res *ModeResult) {
	var lat, crit []float64
	var first, last time.Time
	var sum float64
	for _, r := range h.runs {
		if r.State != "unsubmitted" {
			res.Submitted++
			if first.IsZero() || r.SubmitAt.Before(first) {
				first = r.SubmitAt
			}
		}
		switch r.State {
		case "unsubmitted":
		case api.StateSucceeded:
			res.Completed++
			l := float64(r.Latency().Milliseconds())
			lat = append(lat, l)
			sum += l
			crit = append(crit, float64(r.CriticalMs))
			res.Steps += r.Steps
			if r.Finished.After(last) {
				last = r.Finished
			}
		case "lost":
			res.Lost++
			if r.ID != "" {
				res.LostIDs = append(res.LostIDs, r.ID)
			}
		default:
			res.Failed++
			res.Errors[r.Error]++
		}
		res.Superseded += r.Superseded
		res.Duplicates += r.Duplicates
		if r.Superseded+r.Duplicates > 0 {
			res.WorkflowsRerun++
		}
	}
	res.StepsRerun = res.Superseded + res.Duplicates
	if len(h.runs) > 0 {
		res.CompletionRate = float64(res.Completed) / float64(len(h.runs))
	}
	if !first.IsZero() && !last.IsZero() {
		res.MakespanMs = last.Sub(first).Milliseconds()
	}
	res.LatencyP50Ms, res.LatencyP95Ms = percentile(lat, 50), percentile(lat, 95)
	if len(lat) > 0 {
		res.LatencyMeanMs = float64(int64(sum / float64(len(lat))))
	}
	res.CriticalP50Ms = percentile(crit, 50)
	res.Runs = slices.Clone(h.runs)
	if len(res.Errors) == 0 {
		res.Errors = nil
	}
}
