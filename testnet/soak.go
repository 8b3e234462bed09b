package testnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/events"
)

// SoakOptions configure a soak run: workflows kept running on every node for
// a while, with no faults injected, to count the alarms the failure
// detector raises on its own.
type SoakOptions struct {
	// For is how long new workflows keep being submitted (default 10 min).
	// Workflows still running then are waited for, up to Drain.
	For time.Duration
	// PerNode is how many workflows each node keeps in flight as their
	// origin (default 2): as one ends the next is submitted.
	PerNode int
	// MinStep and MaxStep bound each sleep step's duration, drawn
	// uniformly per step (default 200 ms and 800 ms).
	MinStep, MaxStep time.Duration
	// Drain bounds the wait for the workflows in flight when For ends
	// (default 2 min); those still running after it count as lost.
	Drain time.Duration
	// Seed makes the workflow mix repeatable (0: random).
	Seed uint64
	// Progress, when set, receives a line every ProgressEvery (default 30 s).
	Progress      io.Writer
	ProgressEvery time.Duration
}

func (o *SoakOptions) fill() error {
	if o.For <= 0 {
		o.For = 10 * time.Minute
	}
	if o.PerNode <= 0 {
		o.PerNode = 2
	}
	if o.MinStep <= 0 {
		o.MinStep = 200 * time.Millisecond
	}
	if o.MaxStep <= 0 {
		o.MaxStep = 800 * time.Millisecond
	}
	if o.MaxStep < o.MinStep {
		return fmt.Errorf("soak: longest step %v is shorter than the shortest %v", o.MaxStep, o.MinStep)
	}
	if o.Drain <= 0 {
		o.Drain = 2 * time.Minute
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 30 * time.Second
	}
	return nil
}

// SoakSummary is what a soak measured. With no faults injected every
// suspicion is false and every re-route needless.
type SoakSummary struct {
	Nodes    int    `json:"nodes"`
	Zones    int    `json:"zones"`
	Profile  string `json:"profile"`
	PerNode  int    `json:"per_node"`
	Seed     uint64 `json:"seed"`
	Cores    int    `json:"cores"`
	Started  string `json:"started"`
	Duration string `json:"duration"`
	// DurationMs is from the first submission to the end of the drain.
	DurationMs int64 `json:"duration_ms"`

	Submitted        int `json:"submitted"`
	Completed        int `json:"completed"`
	Failed           int `json:"failed"`
	Lost             int `json:"lost"`
	SubmitErrors     int `json:"submit_errors"`
	DuplicateOutputs int `json:"duplicate_outputs"`
	ResultMismatches int `json:"result_mismatches"`
	// StepsRerun counts superseded attempts in the results' traces.
	StepsRerun int `json:"steps_rerun"`
	// StepsRun counts successful steps in the results' traces.
	StepsRun      int     `json:"steps_run"`
	WorkflowMsP50 float64 `json:"workflow_ms_p50"`
	WorkflowMsP99 float64 `json:"workflow_ms_p99"`

	// FalseSuspicions counts suspect events (package node/events): with no
	// faults, each one is false.
	FalseSuspicions int `json:"false_suspicions"`
	// NeedlessReroutes counts reroute events (a guardian re-sending a pack
	// whose holder it thought silent).
	NeedlessReroutes int `json:"needless_reroutes"`
	// JoinTakeovers counts join-takeover events: join replicas that took
	// over from a primary.
	JoinTakeovers int `json:"join_takeovers"`
	// SparedByPing counts spared events: late holders that answered the
	// confirmation ping.
	SparedByPing int `json:"spared_by_ping"`
	// Unconfirmed counts confirm-failed events by reason (each became a
	// suspicion unless the holder beat meanwhile).
	Unconfirmed map[string]int `json:"unconfirmed"`
	// The figures below have no event: they are counted from the nodes'
	// logs.

	// StaleWatchesDropped counts watches found to guard nothing any more.
	StaleWatchesDropped int `json:"stale_watches_dropped"`
	// ReconciledCopiesDropped counts guard copies dropped because the live
	// holder had moved on (a lost release).
	ReconciledCopiesDropped int `json:"reconciled_copies_dropped"`
	// LateTicks and LateConfirms count the watchers' own lateness (Lifeguard:
	// nobody was accused).
	LateTicks    int `json:"late_ticks"`
	LateConfirms int `json:"late_confirms"`
	// ErrorLines counts level=ERROR log lines; Panics counts panics.
	ErrorLines int `json:"error_lines"`
	Panics     int `json:"panics"`
	// NodesDown lists nodes whose process was gone at the end.
	NodesDown []int `json:"nodes_down"`

	// Load is the machine's load average, sampled every 5 s.
	Load LoadSummary `json:"load"`

	// Suspicions details the first false suspicions (at most 50).
	Suspicions []SoakSuspicion `json:"suspicions,omitempty"`
	// WorkflowErrors lists failed or lost workflows (at most 50).
	WorkflowErrors []string `json:"workflow_errors,omitempty"`
}

// LoadSummary is the machine's load while a soak ran (from /proc/loadavg).
type LoadSummary struct {
	// Start and End are the 1-, 5- and 15-minute load averages.
	Start [3]float64 `json:"start"`
	End   [3]float64 `json:"end"`
	// Min1, Mean1 and Max1 summarise the 1-minute average over the samples.
	Min1    float64 `json:"min_1m"`
	Mean1   float64 `json:"mean_1m"`
	Max1    float64 `json:"max_1m"`
	Samples int     `json:"samples"`
}

// SoakSuspicion is one false suspicion: a suspect event of the suspecting
// node. The suspect event does not say how long the peer was silent or what
// it held: SilenceMs, Guarded and Joins come from the node's "peer
// suspected" log line of the same instant (zero when it was not found).
type SoakSuspicion struct {
	Node      int    `json:"node"`
	Peer      string `json:"peer"`
	SilenceMs int    `json:"silence_ms"`
	Guarded   int    `json:"guarded"`
	Joins     int    `json:"joins"`
	At        string `json:"at"`
	// Reason is the last confirm-failed event this node emitted for the
	// peer before suspecting it.
	Reason string `json:"reason,omitempty"`
}

// soakShapes are the workflows a soak draws from: sequences and small
// FORKs of sleep steps.
var soakShapes = []string{
	`sleepA sleepB sleepC`,
	`sleepA FORK(sleepB, sleepC) SYNC sleepD`,
	`FORK(sleepA sleepB, sleepC, sleepD) SYNC sleepE`,
	`sleepA sleepB FORK(sleepC sleepD, sleepE sleepF) SYNC sleepG sleepH`,
}

var soakService = regexp.MustCompile(`sleep[A-H]`)

// Soak keeps PerNode workflows in flight at every node of the testnet for
// For, injecting no faults, then waits for them and counts from the nodes'
// events (and, for what has no event, their logs) what the failure
// detector did meanwhile.
func (m *Manifest) Soak(ctx context.Context, opts SoakOptions) (*SoakSummary, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	sum := &SoakSummary{
		Nodes: len(m.Nodes), Zones: len(m.Zones), Profile: m.profile(), PerNode: opts.PerNode,
		Seed: opts.Seed, Cores: runtime.NumCPU(), Duration: opts.For.String(),
		Unconfirmed: map[string]int{}, NodesDown: []int{},
	}
	scan := newLogScanner(m)
	evs := newSoakEvents(m)
	clients := make([]*client.Client, len(m.Nodes))
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range m.Nodes {
		c, err := client.DialDataDir(ctx, m.Nodes[i].DataDir)
		if err != nil {
			return nil, fmt.Errorf("soak: node %d: %w", i, err)
		}
		clients[i] = c
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	loads := make(chan LoadSummary, 1)
	go func() { loads <- sampleLoad(loadCtx, 5*time.Second) }()

	start := time.Now()
	sum.Started = start.UTC().Format(time.RFC3339)
	end := start.Add(opts.For)
	waitCtx, cancelWait := context.WithDeadline(ctx, end.Add(opts.Drain))
	defer cancelWait()

	var mu sync.Mutex // guards sum's workflow counters and durations
	var durations []float64
	inFlight := 0
	record := func(st api.Status, err error, took time.Duration, expected map[string]json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		inFlight--
		note := func(msg string) {
			if len(sum.WorkflowErrors) < 50 {
				sum.WorkflowErrors = append(sum.WorkflowErrors, msg)
			}
		}
		switch {
		case err != nil || st.State == api.StateRunning || st.State == "":
			sum.Lost++
			note(fmt.Sprintf("%s: lost: %v", st.ID, err))
			return
		case st.State == api.StateSucceeded:
			sum.Completed++
			durations = append(durations, float64(took.Milliseconds()))
			if !sameResult(st.Result, expected) {
				sum.ResultMismatches++
			}
			sum.DuplicateOutputs += duplicates(st.Trace)
		default:
			sum.Failed++
			note(st.ID + ": " + st.State + ": " + st.Error)
		}
		for _, e := range st.Trace {
			switch e.Outcome {
			case "superseded":
				sum.StepsRerun++
			case "ok":
				sum.StepsRun++
			}
		}
	}

	var wg sync.WaitGroup
	for i := range m.Nodes {
		for k := range opts.PerNode {
			rng := rand.New(rand.NewPCG(opts.Seed, uint64(i*opts.PerNode+k)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Stagger the first submissions over two seconds.
				if !sleepCtx(waitCtx, time.Duration(rng.IntN(2000))*time.Millisecond) {
					return
				}
				for time.Now().Before(end) && waitCtx.Err() == nil {
					wf, input, expected := soakWorkflow(rng, opts.MinStep, opts.MaxStep)
					began := time.Now()
					sctx, cancel := context.WithTimeout(waitCtx, 30*time.Second)
					st, err := clients[i].Submit(sctx, "soak.bedwe", wf, input)
					cancel()
					if err != nil {
						mu.Lock()
						sum.SubmitErrors++
						mu.Unlock()
						fmt.Fprintf(opts.Progress, "submit to node %d: %v\n", i, err)
						sleepCtx(waitCtx, time.Second)
						continue
					}
					mu.Lock()
					sum.Submitted++
					inFlight++
					mu.Unlock()
					final, err := clients[i].Wait(waitCtx, st.ID, time.Second, nil)
					if final.ID == "" {
						final.ID = st.ID
					}
					record(final, err, time.Since(began), expected)
				}
			}()
		}
	}

	progress := time.NewTicker(opts.ProgressEvery)
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-progress.C:
			evs.scan()
			mu.Lock()
			fmt.Fprintf(opts.Progress, "soak %s: %d submitted, %d completed, %d failed, %d lost, %d in flight; %d suspicions, %d re-routes, %d spared by ping; load %s\n",
				time.Since(start).Round(time.Second), sum.Submitted, sum.Completed, sum.Failed, sum.Lost, inFlight,
				evs.sum.FalseSuspicions, evs.sum.NeedlessReroutes, evs.sum.SparedByPing, loadNow())
			mu.Unlock()
		}
	}
	progress.Stop()
	sum.DurationMs = time.Since(start).Milliseconds()
	stopLoad()
	sum.Load = <-loads

	scan.scan()
	evs.scan()
	sum.FalseSuspicions = evs.sum.FalseSuspicions
	sum.NeedlessReroutes = evs.sum.NeedlessReroutes
	sum.JoinTakeovers = evs.sum.JoinTakeovers
	sum.SparedByPing = evs.sum.SparedByPing
	sum.Unconfirmed = evs.sum.Unconfirmed
	sum.StaleWatchesDropped = scan.sum.StaleWatchesDropped
	sum.ReconciledCopiesDropped = scan.sum.ReconciledCopiesDropped
	sum.LateTicks = scan.sum.LateTicks
	sum.LateConfirms = scan.sum.LateConfirms
	sum.ErrorLines = scan.sum.ErrorLines
	sum.Panics = scan.sum.Panics
	sum.Suspicions = evs.sum.Suspicions
	for k := range sum.Suspicions {
		x := &sum.Suspicions[k]
		if d, ok := scan.suspected[suspicionKey{x.Node, x.Peer, x.At}]; ok {
			x.SilenceMs, x.Guarded, x.Joins = d.SilenceMs, d.Guarded, d.Joins
		}
	}
	for i := range m.Nodes {
		if !m.alive(&m.Nodes[i]) {
			sum.NodesDown = append(sum.NodesDown, i)
		}
	}
	sum.WorkflowMsP50, sum.WorkflowMsP99 = percentile(durations, 50), percentile(durations, 99)
	if err := ctx.Err(); err != nil {
		return sum, fmt.Errorf("soak interrupted: %w", err)
	}
	return sum, nil
}

// soakWorkflow draws a workflow shape and a duration for each of its
// steps, and returns the text, the input and the result it must produce.
func soakWorkflow(rng *rand.Rand, minStep, maxStep time.Duration) (string, json.RawMessage, map[string]json.RawMessage) {
	wf := soakShapes[rng.IntN(len(soakShapes))]
	sleeps := map[string]int64{}
	expected := map[string]json.RawMessage{}
	span := int64(maxStep/time.Millisecond-minStep/time.Millisecond) + 1
	for _, s := range soakService.FindAllString(wf, -1) {
		ms := int64(minStep/time.Millisecond) + rng.Int64N(span)
		sleeps[s] = ms
		expected[s] = json.RawMessage(`{"slept_ms":` + strconv.FormatInt(ms, 10) + `}`)
	}
	input, _ := json.Marshal(map[string]any{"sleep_ms": sleeps})
	return wf, input, expected
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// readLoad returns the 1-, 5- and 15-minute load averages.
func readLoad() ([3]float64, error) {
	var out [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out, fmt.Errorf("read load average: %w", err)
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return out, errors.New("read load average: short /proc/loadavg")
	}
	for i := range out {
		if out[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return out, fmt.Errorf("read load average: %w", err)
		}
	}
	return out, nil
}

func loadNow() string {
	l, err := readLoad()
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f %.1f %.1f", l[0], l[1], l[2])
}

// sampleLoad samples the load average every period until ctx ends.
func sampleLoad(ctx context.Context, period time.Duration) LoadSummary {
	var s LoadSummary
	var total float64
	take := func() [3]float64 {
		l, err := readLoad()
		if err != nil {
			return l
		}
		if s.Samples == 0 || l[0] < s.Min1 {
			s.Min1 = l[0]
		}
		s.Max1 = max(s.Max1, l[0])
		total += l[0]
		s.Samples++
		return l
	}
	s.Start = take()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.End = take()
			s.Mean1 = total / float64(max(s.Samples, 1))
			return s
		case <-tick.C:
			take()
		}
	}
}

// soakEvents reads the nodes' events files from where they were when it
// was made, incrementally, and counts the failure detector's events.
type soakEvents struct {
	m    *Manifest
	tail *eventTail
	// reason is, per node and peer, the last confirm-failed reason.
	reason map[[2]string]string
	sum    SoakSummary
}

func newSoakEvents(m *Manifest) *soakEvents {
	s := &soakEvents{m: m, tail: newEventTail(m), reason: map[[2]string]string{}}
	s.sum.Unconfirmed = map[string]int{}
	return s
}

// scan counts the events appended since the last scan.
func (s *soakEvents) scan() {
	sum := &s.sum
	for _, e := range s.tail.poll() {
		switch e.Type {
		case events.Suspect:
			sum.FalseSuspicions++
			if len(sum.Suspicions) < 50 {
				sum.Suspicions = append(sum.Suspicions, SoakSuspicion{
					Node: s.m.index(e.Node), Peer: e.Peer, At: e.At.UTC().Format(time.RFC3339Nano),
					Reason: s.reason[[2]string{e.Node, e.Peer}],
				})
			}
		case events.Reroute:
			sum.NeedlessReroutes++
		case events.JoinTakeover:
			sum.JoinTakeovers++
		case events.Spared:
			sum.SparedByPing++
		case events.ConfirmFailed:
			reason := e.Reason
			if reason == "" {
				reason = "other"
			}
			sum.Unconfirmed[reason]++
			s.reason[[2]string{e.Node, e.Peer}] = reason
		}
	}
}

// logScanner reads the nodes' logs from where they were when it was made,
// incrementally, and counts what the nodes log but do not emit as events
// (package node/events has no event for them): stale watches, reconciled
// guard copies, late timers, errors and panics, and the details of each
// suspicion (silence, guarded packs, joins).
type logScanner struct {
	m    *Manifest
	logs *lineTail
	// suspected holds the details of every "peer suspected" line.
	suspected map[suspicionKey]SoakSuspicion
	sum       SoakSummary
}

// suspicionKey names one suspicion: the suspecting node, the peer and the
// instant (as both the log line and the suspect event write it).
type suspicionKey struct {
	node int
	peer string
	at   string
}

func newLogScanner(m *Manifest) *logScanner {
	s := &logScanner{
		m:         m,
		suspected: map[suspicionKey]SoakSuspicion{},
	}
	var paths []string
	for _, nd := range m.Nodes {
		paths = append(paths, nd.Log)
	}
	s.logs = newLineTail(paths)
	return s
}

var (
	suspectedLine = regexp.MustCompile(`msg="peer suspected" peer=(\S+) silence_ms=(\d+) guarded=(\d+) joins=(\d+) at=(\S+)`)
	droppedLine   = regexp.MustCompile(`msg="dropped guard copies of work the holder had moved on from" .*dropped=(\d+)`)
)

// scan reads what every log gained since the last scan.
func (s *logScanner) scan() {
	for i := range s.m.Nodes {
		s.logs.lines(i, func(line []byte) { s.line(i, string(line)) })
	}
}

func (s *logScanner) line(node int, line string) {
	sum := &s.sum
	switch {
	case strings.Contains(line, `msg="peer suspected"`):
		if m := suspectedLine.FindStringSubmatch(line); m != nil {
			silence, _ := strconv.Atoi(m[2])
			guarded, _ := strconv.Atoi(m[3])
			joins, _ := strconv.Atoi(m[4])
			s.suspected[suspicionKey{node, m[1], m[5]}] = SoakSuspicion{SilenceMs: silence, Guarded: guarded, Joins: joins}
		}
	case strings.Contains(line, `msg="dropped a stale watch"`):
		sum.StaleWatchesDropped++
	case strings.Contains(line, `msg="dropped guard copies of work the holder had moved on from"`):
		if m := droppedLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			sum.ReconciledCopiesDropped += n
		}
	case strings.Contains(line, "heartbeat: check timer ran late"):
		sum.LateTicks++
	case strings.Contains(line, "heartbeat: confirmation timer ran late"):
		sum.LateConfirms++
	}
	if strings.Contains(line, "level=ERROR") {
		sum.ErrorLines++
	}
	if strings.HasPrefix(line, "panic:") || strings.Contains(line, "fatal error:") {
		sum.Panics++
	}
}
