package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/pack"
	"github.com/bedwe/bedwe/testnet"
)

// ExpFlood is the overload experiment: concurrent clients
// flood a testnet whose nodes run with small limits, and the bench checks
// that every submission was accepted or refused as busy, that none was
// lost and, from the services' own count, that no node ran more steps at
// once than its limits. Like [ExpIdle] it runs by itself, on a testnet it
// starts (its nodes need the limits and the counting service).
const ExpFlood = "flood"

// Flood service names: the workflow is "fa fb"; fb declares a
// max_concurrent of its own.
const (
	floodSource   = "fa fb"
	floodFile     = "flood.bedwe"
	floodServiceA = "fa"
	floodServiceB = "fb"
)

// FloodConfig sizes the flood and the limits of its nodes.
type FloodConfig struct {
	// Workflows is how many two-step workflows are submitted in all,
	// shared among Clients; every client dials its own node (client c
	// dials node c mod nodes) and keeps Inflight submissions going.
	Workflows, Clients, Inflight int
	// Step is how long each service call takes (the counting service
	// holds every call that long).
	Step time.Duration
	// MaxConcurrent, Queue and MaxWorkflows are every node's
	// --max-concurrent, --queue and --max-workflows; FbLimit is the
	// max_concurrent the services file declares for service fb.
	MaxConcurrent, Queue, MaxWorkflows, FbLimit int
	// Timeout bounds the whole flood: submissions and the wait for every
	// accepted workflow to end. A workflow accepted and not ended by then
	// is lost.
	Timeout time.Duration
	// RetryMin and RetryMax bound the client's pause after a busy
	// refusal (uniformly random in between).
	RetryMin, RetryMax time.Duration
	// Sample is how often every node's gauges are read from /metrics
	// (0: not sampled).
	Sample time.Duration
}

// DefaultFloodConfig is the standard flood (2,000 workflows from 8 clients,
// 4 in flight each) with the limits of node/flood_test.go's TestFlood:
// small on purpose, so that the flood reaches every one of them.
func DefaultFloodConfig() FloodConfig {
	return FloodConfig{
		Workflows: 2000, Clients: 8, Inflight: 4,
		Step:          10 * time.Millisecond,
		MaxConcurrent: 4, Queue: 4, MaxWorkflows: 8, FbLimit: 2,
		Timeout:  20 * time.Minute,
		RetryMin: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		Sample: time.Second,
	}
}

// Check reports the first setting that cannot run.
func (c FloodConfig) Check() error {
	for _, v := range []struct {
		name string
		v    int
	}{{"workflows", c.Workflows}, {"clients", c.Clients}, {"inflight", c.Inflight},
		{"max-concurrent", c.MaxConcurrent}, {"queue", c.Queue}, {"max-workflows", c.MaxWorkflows}, {"fb-limit", c.FbLimit}} {
		if v.v < 1 {
			return fmt.Errorf("flood %s %d: want at least 1", v.name, v.v)
		}
	}
	if c.Step < 0 || c.Timeout <= 0 || c.RetryMin < 0 || c.RetryMax < c.RetryMin {
		return fmt.Errorf("flood: step %s, timeout %s, retry %s..%s: want a step of 0 or more, a positive timeout and 0 <= retry min <= max",
			c.Step, c.Timeout, c.RetryMin, c.RetryMax)
	}
	return nil
}

// NodeArgs are the node flags that set the limits.
func (c FloodConfig) NodeArgs() []string {
	return []string{"--max-concurrent", strconv.Itoa(c.MaxConcurrent), "--queue", strconv.Itoa(c.Queue),
		"--max-workflows", strconv.Itoa(c.MaxWorkflows)}
}

// FloodServices is the services file of a flood testnet: fa and fb are
// http services at url (the bench's counting service), fb with
// max_concurrent fbLimit.
func FloodServices(url string, fbLimit int) string {
	return fmt.Sprintf("version: 1\nservices:\n  %s: {kind: http, url: %q}\n  %s: {kind: http, url: %q, max_concurrent: %d}\n",
		floodServiceA, url, floodServiceB, url, fbLimit)
}

// CountingService is the flood's service endpoint: every node calls it
// for every step (kind http), and it counts, per peer and per peer and
// service, how many calls run at once. A call counts from the moment its
// request is read to the moment the answer is written, which lies within
// the node's execution slot, so a peak above a limit is a real breach.
type CountingService struct {
	hold time.Duration
	srv  *http.Server
	url  string

	mu    sync.Mutex
	now   map[string]int
	peak  map[string]int
	calls map[string]int // by idempotency key (workflow, step, attempt)
	byKey map[string]int // calls by peer and by peer/service
	total int
}

// StartCountingService serves on a free loopback port; each call takes
// hold. Close it when done.
func StartCountingService(hold time.Duration) (*CountingService, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("flood: counting service: %w", err)
	}
	c := &CountingService{hold: hold, now: map[string]int{}, peak: map[string]int{}, calls: map[string]int{}, byKey: map[string]int{}}
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	c.url = "http://" + ln.Addr().String() + "/step"
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// URL is the endpoint the services file names.
func (c *CountingService) URL() string { return c.url }

// Close stops the service.
func (c *CountingService) Close() error { return c.srv.Close() }

// ServeHTTP implements http.Handler: one service call.
func (c *CountingService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req service.Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	keys := []string{countKey(req.Peer, ""), countKey(req.Peer, req.Service)}
	c.mu.Lock()
	c.calls[req.IdempotencyKey]++
	c.total++
	for _, k := range keys {
		c.now[k]++
		c.byKey[k]++
		c.peak[k] = max(c.peak[k], c.now[k])
	}
	c.mu.Unlock()
	if c.hold > 0 {
		t := time.NewTimer(c.hold)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	c.mu.Lock()
	for _, k := range keys {
		c.now[k]--
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// Peak is the most calls that ran at once for peer (service "") or for
// peer's calls of service.
func (c *CountingService) Peak(peer, service string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak[countKey(peer, service)]
}

// countKey is the key of peer's calls (service "") or of its calls of
// service.
func countKey(peer, service string) string {
	if service == "" {
		return peer
	}
	return peer + "/" + service
}

// CallsBy is how many calls peer made (service "": of any service).
func (c *CountingService) CallsBy(peer, service string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byKey[countKey(peer, service)]
}

// Calls returns the number of calls, of distinct (workflow, step, attempt)
// keys, and of keys called more than once.
func (c *CountingService) Calls() (total, distinct, repeated int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.calls {
		if n > 1 {
			repeated++
		}
	}
	return c.total, len(c.calls), repeated
}

// FloodNode is one node's part in the flood.
type FloodNode struct {
	Index int
	Peer  string
	Zone  string
	// Accepted counts the workflows it was the origin of.
	Accepted int
	// Calls counts the service calls it made; Peak and PeakFb are the
	// most calls (of any service, of fb) it had running at once, as the
	// counting service saw them.
	Calls, Peak, PeakFb int
	// TracePeak and TracePeakFb are the same read from the workflows'
	// traces (-1: not measured).
	TracePeak, TracePeakFb int
	// QueuedMax, OccupiedMax and OriginsMax are the largest readings,
	// every FloodConfig.Sample, of the node's own gauges: steps admitted
	// and waiting for a slot (bedwe_steps_queued), steps running or
	// waiting (--max-concurrent less bedwe_step_slots_free, plus the
	// waiting; the node's bound is --max-concurrent + --queue: waiting
	// alone may exceed --queue while slots are free), and running
	// workflows it is the origin of (bedwe_origin_workflows_running).
	// -1: never read.
	QueuedMax, OccupiedMax, OriginsMax int
}

// FloodRow is the result of one flood.
type FloodRow struct {
	// Nodes, Zones and Config describe the run.
	Nodes, Zones int
	Config       FloodConfig
	// Workflows is how many were to be submitted; Attempts the submission
	// calls made (refusals included).
	Workflows, Attempts int
	// Accepted workflows were recorded by their origin; of them Succeeded
	// and Failed ended so, and Lost had not ended when Timeout ran out.
	Accepted, Succeeded, Failed, Lost int
	// GivenUp counts workflows whose submission was refused other than
	// busy or failed to reach the node (not tried again: the outcome of a
	// broken call is unknown); Unsubmitted those never accepted before
	// the timeout.
	GivenUp, Unsubmitted int
	// Refused counts refused or failed submission calls by reason (see
	// [RefusalReason]).
	Refused map[string]int
	// Wall is from the first submission to the last workflow's end;
	// SubmitSpan to the last acceptance. Throughput is Succeeded / Wall.
	Wall, SubmitSpan time.Duration
	Throughput       float64
	// Latency is Finished − Submitted at the origin over succeeded
	// workflows; FirstTry is Finished − the client's first attempt (busy
	// refusals and pauses included).
	Latency  Percentiles
	FirstTry Percentiles
	// ServiceCalls counts the calls the counting service answered,
	// Distinct the distinct (workflow, step, attempt) keys, Repeated the
	// keys called more than once.
	ServiceCalls, Distinct, Repeated int
	// Handoffs and HandoffsBusy count the hand-offs in the nodes' events
	// files and those refused busy (-1: not read).
	Handoffs, HandoffsBusy int
	// Samples is how many times every node's gauges were read.
	Samples int
	// PerNode lists every node.
	PerNode []FloodNode
	// Problems says, in words, what breaks the flood's promises (empty:
	// none): a lost or failed workflow, a refusal other than busy, a node
	// above a limit, a figure that could not be measured.
	Problems []string
}

// Percentiles of a set of durations (nearest rank).
type Percentiles struct {
	P50, P90, P99, Max time.Duration
	N                  int
}

// PercentilesOf returns the 50th, 90th and 99th percentile and the
// maximum of ds (all zero when ds is empty).
func PercentilesOf(ds []time.Duration) Percentiles {
	return Percentiles{P50: Quantile(ds, 0.5), P90: Quantile(ds, 0.9), P99: Quantile(ds, 0.99), Max: Quantile(ds, 1), N: len(ds)}
}

// Peak returns the most calls at once over all nodes (service "") or of
// one service, as the counting service saw them, and as the traces show
// them (-1 when no node's traces were read).
func (r *FloodRow) Peak(fb bool) (counted, traced int) {
	traced = -1
	for _, n := range r.PerNode {
		if fb {
			counted, traced = max(counted, n.PeakFb), max(traced, n.TracePeakFb)
		} else {
			counted, traced = max(counted, n.Peak), max(traced, n.TracePeak)
		}
	}
	return counted, traced
}

// GaugeMax returns the largest sampled readings over all nodes: steps
// waiting, steps running or waiting, running origin workflows (-1: never
// read).
func (r *FloodRow) GaugeMax() (queued, occupied, origins int) {
	queued, occupied, origins = -1, -1, -1
	for _, n := range r.PerNode {
		queued, occupied, origins = max(queued, n.QueuedMax), max(occupied, n.OccupiedMax), max(origins, n.OriginsMax)
	}
	return queued, occupied, origins
}

// Interval is one execution on a peer: from Start to End.
type Interval struct {
	Start, End time.Time
}

// MaxOverlap returns the most intervals that hold at one instant.
// Intervals are half-open, [Start, End): one that ends exactly when
// another starts does not overlap it. An interval whose End is not after
// its Start counts at its Start instant only when it lies inside another
// (it never adds an instant of its own).
func MaxOverlap(ivs []Interval) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(ivs))
	for _, iv := range ivs {
		if !iv.End.After(iv.Start) {
			continue
		}
		edges = append(edges, edge{iv.Start, +1}, edge{iv.End, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if c := edges[i].at.Compare(edges[j].at); c != 0 {
			return c < 0
		}
		return edges[i].delta < edges[j].delta // ends before starts
	})
	now, peak := 0, 0
	for _, e := range edges {
		now += e.delta
		peak = max(peak, now)
	}
	return peak
}

// TracePeaks returns, per peer and per peer+"/"+service, the most trace
// entries (of every outcome) that overlap in time.
func TracePeaks(traces [][]pack.TraceEntry) map[string]int {
	byKey := map[string][]Interval{}
	for _, tr := range traces {
		for _, e := range tr {
			iv := Interval{e.Start, e.End}
			byKey[e.Peer] = append(byKey[e.Peer], iv)
			byKey[e.Peer+"/"+e.Service] = append(byKey[e.Peer+"/"+e.Service], iv)
		}
	}
	out := make(map[string]int, len(byKey))
	for k, ivs := range byKey {
		out[k] = MaxOverlap(ivs)
	}
	return out
}

// Refusal reasons of a submission, as [RefusalReason] names them.
const (
	ReasonBusyWorkflows = "busy: --max-workflows"
	ReasonBusyRate      = "busy: submission rate"
	ReasonBusyOther     = "busy: other"
	ReasonTransport     = "error: no answer"
	ReasonCancelled     = "error: deadline"
)

// RefusalReason classifies a failed submission: a busy refusal by the
// limit its message names, another refusal by its code ("refused: CODE",
// "refused: no code"), and a call that got no answer as ReasonTransport
// (ReasonCancelled when the flood's own deadline ended it). Only busy
// refusals are safe to submit again: nothing was recorded.
func RefusalReason(err error) string {
	var re *client.RemoteError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &re) && re.Code == api.CodeBusy:
		switch {
		case strings.Contains(re.Msg, "--max-workflows"):
			return ReasonBusyWorkflows
		case strings.Contains(re.Msg, "submits faster"):
			return ReasonBusyRate
		}
		return ReasonBusyOther
	case errors.As(err, &re):
		if re.Code == "" {
			return "refused: no code"
		}
		return "refused: " + re.Code
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return ReasonCancelled
	}
	return ReasonTransport
}

// IsBusyReason reports whether reason is one of the busy refusals.
func IsBusyReason(reason string) bool { return strings.HasPrefix(reason, "busy:") }

// ParseGauge returns the value of the unlabelled gauge (or untyped
// metric) name in Prometheus text exposition format, parsed by the
// Prometheus library's own parser.
func ParseGauge(text, name string) (float64, bool) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, false
	}
	f, ok := families[name]
	if !ok || len(f.GetMetric()) != 1 || len(f.GetMetric()[0].GetLabel()) != 0 {
		return 0, false
	}
	switch m := f.GetMetric()[0]; {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// floodAccepted is one accepted submission.
type floodAccepted struct {
	id         string
	node       int       // index of the origin node
	firstAt    time.Time // the client's first attempt (refusals included)
	acceptedAt time.Time
}

// RunFlood floods the running testnet m, whose nodes run with c's limits
// and call svc for fa and fb, and measures it. It returns the row even
// when its promises broke (see FloodRow.Problems); the error is for a
// flood that could not run.
func RunFlood(ctx context.Context, m *testnet.Manifest, c FloodConfig, svc *CountingService, progress io.Writer) (FloodRow, error) {
	if progress == nil {
		progress = io.Discard
	}
	if err := c.Check(); err != nil {
		return FloodRow{}, err
	}
	if m == nil || len(m.Nodes) == 0 {
		return FloodRow{}, errors.New("flood: needs a testnet with at least one node")
	}
	row := FloodRow{Nodes: len(m.Nodes), Zones: len(m.Zones), Config: c, Workflows: c.Workflows, Refused: map[string]int{},
		Handoffs: -1, HandoffsBusy: -1}
	for i, nd := range m.Nodes {
		row.PerNode = append(row.PerNode, FloodNode{Index: i, Peer: nd.PeerID, Zone: nd.Zone, TracePeak: -1, TracePeakFb: -1, QueuedMax: -1, OccupiedMax: -1, OriginsMax: -1})
	}
	if err := checkSlots(ctx, m, c.MaxConcurrent); err != nil {
		return row, err
	}

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	// One connection per origin node, to watch its workflows (List) and
	// read their traces.
	conns := map[int]*client.Client{}
	defer func() {
		for _, cl := range conns {
			_ = cl.Close()
		}
	}()
	var origins []int
	for cl := range c.Clients {
		i := cl % len(m.Nodes)
		if conns[i] != nil {
			continue
		}
		conn, err := client.DialDataDir(ctx, m.Nodes[i].DataDir)
		if err != nil {
			return row, fmt.Errorf("flood: dial testnet node %d: %w", i, err)
		}
		conns[i] = conn
		origins = append(origins, i)
	}
	// Every client its own connection (its own peer ID, so its own
	// submission rate at the node).
	clients := make([]*client.Client, c.Clients)
	for cl := range c.Clients {
		conn, err := client.DialDataDir(ctx, m.Nodes[cl%len(m.Nodes)].DataDir)
		if err != nil {
			for _, o := range clients[:cl] {
				_ = o.Close()
			}
			return row, fmt.Errorf("flood: client %d: dial testnet node %d: %w", cl, cl%len(m.Nodes), err)
		}
		clients[cl] = conn
	}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()

	var (
		mu       sync.Mutex
		taken    []floodAccepted
		pending  = map[int]map[string]floodAccepted{} // by origin node
		attempts atomic.Int64
		givenUp  atomic.Int64
		wg       sync.WaitGroup
	)
	for _, o := range origins {
		pending[o] = map[string]floodAccepted{}
	}
	refuse := func(reason string) {
		mu.Lock()
		row.Refused[reason]++
		mu.Unlock()
	}
	began := time.Now()
	fmt.Fprintf(progress, "flood: %d nodes, %d clients x %d in flight, %d workflows %q (%s per service call); limits per node: --max-concurrent %d, --queue %d, --max-workflows %d, fb max_concurrent %d\n",
		len(m.Nodes), c.Clients, c.Inflight, c.Workflows, floodSource, c.Step, c.MaxConcurrent, c.Queue, c.MaxWorkflows, c.FbLimit)
	for cl := range c.Clients {
		share := c.Workflows / c.Clients
		if cl < c.Workflows%c.Clients {
			share++
		}
		origin := cl % len(m.Nodes)
		jobs := make(chan struct{}, share)
		for range share {
			jobs <- struct{}{}
		}
		close(jobs)
		for range c.Inflight {
			wg.Go(func() {
				for range jobs {
					first := time.Now()
					for ctx.Err() == nil {
						attempts.Add(1)
						st, err := clients[cl].Submit(ctx, floodFile, floodSource, nil)
						if err == nil {
							a := floodAccepted{id: st.ID, node: origin, firstAt: first, acceptedAt: time.Now()}
							mu.Lock()
							taken = append(taken, a)
							pending[origin][a.id] = a
							mu.Unlock()
							break
						}
						reason := RefusalReason(err)
						refuse(reason)
						if !IsBusyReason(reason) {
							if reason != ReasonCancelled {
								givenUp.Add(1)
								fmt.Fprintf(progress, "flood: client %d: submission not accepted and not refused busy (%s), not tried again: %v\n", cl, reason, err)
							}
							break
						}
						pause := c.RetryMin
						if c.RetryMax > c.RetryMin {
							pause += rand.N(c.RetryMax - c.RetryMin)
						}
						select {
						case <-ctx.Done():
						case <-time.After(pause):
						}
					}
				}
			})
		}
	}
	submitted := make(chan struct{})
	go func() { wg.Wait(); close(submitted) }()

	// Watch the origins until every accepted workflow ended, sample the
	// nodes' gauges, and print progress.
	final := map[string]api.Status{}
	var lastAccept time.Time
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	nextSample, nextReport := time.Now(), time.Now().Add(5*time.Second)
	httpc := &http.Client{Timeout: 2 * time.Second}
	done := false
	var listErr error
	for !done {
		select {
		case <-ctx.Done():
		case <-poll.C:
		}
		allIn := false
		select {
		case <-submitted:
			allIn = true
		default:
		}
		for _, o := range origins {
			mu.Lock()
			n := len(pending[o])
			mu.Unlock()
			if n == 0 || ctx.Err() != nil {
				continue
			}
			list, err := conns[o].List(ctx)
			if err != nil {
				if ctx.Err() == nil {
					listErr = fmt.Errorf("flood: list the workflows of node %d: %w", o, err)
					fmt.Fprintf(progress, "%v (trying again)\n", listErr)
				}
				continue
			}
			mu.Lock()
			for _, st := range list {
				if _, ok := pending[o][st.ID]; ok && st.State != api.StateRunning {
					final[st.ID] = st
					delete(pending[o], st.ID)
				}
			}
			mu.Unlock()
		}
		if c.Sample > 0 && !time.Now().Before(nextSample) {
			nextSample = time.Now().Add(c.Sample)
			sampleGauges(ctx, httpc, m, c.MaxConcurrent, row.PerNode)
			row.Samples++
		}
		mu.Lock()
		nTaken, nPending := len(taken), 0
		for _, p := range pending {
			nPending += len(p)
		}
		busy := 0
		for r, n := range row.Refused {
			if IsBusyReason(r) {
				busy += n
			}
		}
		mu.Unlock()
		if time.Now().After(nextReport) {
			nextReport = time.Now().Add(5 * time.Second)
			fmt.Fprintf(progress, "flood: %d/%d accepted, %d ended, %d running; %d submissions refused busy (t=%s)\n",
				nTaken, c.Workflows, nTaken-nPending, nPending, busy, time.Since(began).Round(time.Second))
		}
		done = (allIn && nPending == 0) || ctx.Err() != nil
	}
	<-submitted // the submitters stop at the deadline too
	expired := ctx.Err() != nil

	// Every submitter has returned: no lock needed from here on.
	row.Attempts = int(attempts.Load())
	row.GivenUp = int(givenUp.Load())
	row.Accepted = len(taken)
	row.Unsubmitted = c.Workflows - row.Accepted - row.GivenUp
	var lat, first []time.Duration
	lastEnd := began
	var problems []string
	for _, a := range taken {
		lastAccept = later(lastAccept, a.acceptedAt)
		row.PerNode[a.node].Accepted++
		st, ok := final[a.id]
		if !ok {
			row.Lost++
			if row.Lost <= 5 {
				problems = append(problems, fmt.Sprintf("workflow %s (origin node %d) accepted and not ended within %s", a.id, a.node, c.Timeout))
			}
			continue
		}
		if st.State != api.StateSucceeded {
			row.Failed++
			if row.Failed <= 5 {
				problems = append(problems, fmt.Sprintf("workflow %s (origin node %d) %s: %s", a.id, a.node, st.State, st.Error))
			}
			continue
		}
		row.Succeeded++
		lat = append(lat, st.Finished.Sub(st.Submitted))
		first = append(first, st.Finished.Sub(a.firstAt))
		lastEnd = later(lastEnd, st.Finished)
	}
	row.Wall = lastEnd.Sub(began)
	if !lastAccept.IsZero() {
		row.SubmitSpan = lastAccept.Sub(began)
	}
	if row.Wall > 0 {
		row.Throughput = float64(row.Succeeded) / row.Wall.Seconds()
	}
	row.Latency, row.FirstTry = PercentilesOf(lat), PercentilesOf(first)
	fmt.Fprintf(progress, "flood: %d accepted, %d succeeded, %d failed, %d lost in %s: %.1f workflows/s; latency p50 %s p99 %s\n",
		row.Accepted, row.Succeeded, row.Failed, row.Lost, row.Wall.Round(time.Millisecond), row.Throughput,
		row.Latency.P50.Round(time.Millisecond), row.Latency.P99.Round(time.Millisecond))

	// The services' own count of concurrent calls.
	row.ServiceCalls, row.Distinct, row.Repeated = svc.Calls()
	for i := range row.PerNode {
		n := &row.PerNode[i]
		n.Peak, n.PeakFb = svc.Peak(n.Peer, ""), svc.Peak(n.Peer, floodServiceB)
		n.Calls = svc.CallsBy(n.Peer, "")
	}
	// The same from the traces, read after the measured window (a Result
	// call per succeeded or failed workflow).
	if err := traceOverlap(parent, conns, taken, final, row.PerNode, progress); err != nil {
		problems = append(problems, fmt.Sprintf("traces not read: %v", err))
	}
	row.Handoffs, row.HandoffsBusy = countHandoffs(m)

	// The promises.
	if expired {
		problems = append(problems, fmt.Sprintf("the flood's timeout (%s) ran out", c.Timeout))
	}
	if row.Lost > 0 {
		problems = append(problems, fmt.Sprintf("%d accepted workflows lost (not ended within %s)", row.Lost, c.Timeout))
	}
	if row.Failed > 0 {
		problems = append(problems, fmt.Sprintf("%d accepted workflows failed", row.Failed))
	}
	if row.GivenUp > 0 {
		problems = append(problems, fmt.Sprintf("%d submissions neither accepted nor refused busy", row.GivenUp))
	}
	if row.Unsubmitted > 0 {
		problems = append(problems, fmt.Sprintf("%d workflows never accepted before the timeout", row.Unsubmitted))
	}
	refusals := 0
	for _, n := range row.Refused {
		refusals += n
	}
	if row.Attempts != row.Accepted+refusals {
		problems = append(problems, fmt.Sprintf("%d submission calls, but %d accepted and %d refused or failed", row.Attempts, row.Accepted, refusals))
	}
	if want := 2 * row.Succeeded; row.Distinct < want {
		problems = append(problems, fmt.Sprintf("the service saw %d distinct step attempts, want at least %d (2 per succeeded workflow)", row.Distinct, want))
	}
	problems = append(problems, limitProblems(row.PerNode, c)...)
	if row.Samples == 0 {
		problems = append(problems, "the nodes' gauges were never read: queue and --max-workflows not checked")
	}
	if listErr != nil && row.Lost > 0 {
		problems = append(problems, "last error listing an origin's workflows: "+listErr.Error())
	}
	row.Problems = problems
	return row, nil
}

// LimitBreaches names every node above one of its limits (empty: none);
// see limitProblems.
func (r *FloodRow) LimitBreaches() []string { return limitProblems(r.PerNode, r.Config) }

// limitProblems names every node above a limit: counted service calls
// above --max-concurrent or fb's max_concurrent, sampled steps running or
// waiting above --max-concurrent + --queue, sampled running origin
// workflows above --max-workflows.
func limitProblems(nodes []FloodNode, c FloodConfig) []string {
	var out []string
	for _, n := range nodes {
		if n.Peak > c.MaxConcurrent {
			out = append(out, fmt.Sprintf("node %d ran %d service calls at once (--max-concurrent %d)", n.Index, n.Peak, c.MaxConcurrent))
		}
		if n.PeakFb > c.FbLimit {
			out = append(out, fmt.Sprintf("node %d ran %d fb calls at once (max_concurrent %d)", n.Index, n.PeakFb, c.FbLimit))
		}
		if n.OccupiedMax > c.MaxConcurrent+c.Queue {
			out = append(out, fmt.Sprintf("node %d had %d steps running or waiting (--max-concurrent %d + --queue %d)", n.Index, n.OccupiedMax, c.MaxConcurrent, c.Queue))
		}
		if n.OriginsMax > c.MaxWorkflows {
			out = append(out, fmt.Sprintf("node %d was the origin of %d running workflows (--max-workflows %d)", n.Index, n.OriginsMax, c.MaxWorkflows))
		}
	}
	return out
}

// checkSlots reads every node's bedwe_step_slots_free before the flood:
// with nothing running it is the node's --max-concurrent, so it shows the
// limits reached the nodes.
func checkSlots(ctx context.Context, m *testnet.Manifest, want int) error {
	httpc := &http.Client{Timeout: 5 * time.Second}
	for i := range m.Nodes {
		text, err := scrape(ctx, httpc, m.Nodes[i].MetricsURL())
		if err != nil {
			return fmt.Errorf("flood: node %d: %w", i, err)
		}
		v, ok := ParseGauge(text, "bedwe_step_slots_free")
		if !ok {
			return fmt.Errorf("flood: node %d: no bedwe_step_slots_free in its metrics", i)
		}
		if int(v) != want {
			return fmt.Errorf("flood: node %d has %v free execution slots idle, want its --max-concurrent %d: the limits did not reach the node", i, v, want)
		}
	}
	return nil
}

func scrape(ctx context.Context, httpc *http.Client, url string) (string, error) {
	if url == "" {
		return "", errors.New("no metrics listener")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return "", fmt.Errorf("metrics %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("metrics %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// sampleGauges reads every node's waiting and running steps and running
// origin workflows and keeps the largest readings; a node that does not
// answer is skipped this time.
func sampleGauges(ctx context.Context, httpc *http.Client, m *testnet.Manifest, limit int, nodes []FloodNode) {
	var wg sync.WaitGroup
	for i := range m.Nodes {
		wg.Go(func() {
			text, err := scrape(ctx, httpc, m.Nodes[i].MetricsURL())
			if err != nil {
				return
			}
			queued, okq := ParseGauge(text, "bedwe_steps_queued")
			free, okf := ParseGauge(text, "bedwe_step_slots_free")
			if okq {
				nodes[i].QueuedMax = max(nodes[i].QueuedMax, int(queued))
			}
			if okq && okf {
				// One snapshot of the bulkhead gives both (node/metrics.go).
				nodes[i].OccupiedMax = max(nodes[i].OccupiedMax, limit-int(free)+int(queued))
			}
			if v, ok := ParseGauge(text, "bedwe_origin_workflows_running"); ok {
				nodes[i].OriginsMax = max(nodes[i].OriginsMax, int(v))
			}
		})
	}
	wg.Wait()
}

// traceOverlap fetches the trace of every ended workflow from its origin
// and sets every node's TracePeak and TracePeakFb.
func traceOverlap(ctx context.Context, conns map[int]*client.Client, taken []floodAccepted, final map[string]api.Status, nodes []FloodNode, progress io.Writer) error {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	jobs := make(chan floodAccepted)
	var (
		mu     sync.Mutex
		traces [][]pack.TraceEntry
		errs   []error
		wg     sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for a := range jobs {
				st, err := conns[a.node].Result(ctx, a.id)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("workflow %s: %w", a.id, err))
				} else {
					traces = append(traces, st.Trace)
				}
				mu.Unlock()
			}
		})
	}
	for _, a := range taken {
		if _, ok := final[a.id]; ok {
			jobs <- a
		}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d results not read, first: %w", len(errs), len(errs)+len(traces), errs[0])
	}
	peaks := TracePeaks(traces)
	for i := range nodes {
		nodes[i].TracePeak, nodes[i].TracePeakFb = peaks[nodes[i].Peer], peaks[nodes[i].Peer+"/"+floodServiceB]
	}
	fmt.Fprintf(progress, "flood: read %d traces in %s\n", len(traces), time.Since(t0).Round(time.Millisecond))
	return nil
}

// countHandoffs counts the hand-offs in every node's events file and
// those refused busy (-1, -1 when a file cannot be read).
func countHandoffs(m *testnet.Manifest) (all, busy int) {
	for _, nd := range m.Nodes {
		evs, err := events.Read(nd.Events())
		if err != nil {
			return -1, -1
		}
		for _, e := range evs {
			if e.Type != events.Handoff {
				continue
			}
			all++
			if e.Outcome == events.OutcomeRefused && e.Reason == api.CodeBusy {
				busy++
			}
		}
	}
	return all, busy
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// RefusalSummary renders refusals by reason, most frequent first:
// "busy: --max-workflows 7341, busy: submission rate 3" ("none" when
// empty).
func RefusalSummary(refused map[string]int) string {
	if len(refused) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(refused))
	for k := range refused {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if refused[a] != refused[b] {
			return refused[b] - refused[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, refused[k])
	}
	return strings.Join(parts, ", ")
}

// FloodTable is the flood as a table (flood.csv): one row per run.
func FloodTable(rows []FloodRow) Table {
	t := Table{Name: ExpFlood, Header: []string{"nodes", "clients", "inflight", "workflows", "step_ms",
		"max_concurrent", "queue", "max_workflows", "fb_limit",
		"attempts", "accepted", "succeeded", "failed", "lost", "given_up", "unsubmitted",
		"refused_busy", "refused_other", "refused_by_reason",
		"wall_s", "submit_span_s", "throughput_wf_s",
		"latency_p50_s", "latency_p90_s", "latency_p99_s", "latency_max_s", "first_try_p50_s", "first_try_p99_s",
		"peak_node", "peak_fb", "trace_peak_node", "trace_peak_fb", "queued_max", "running_or_waiting_max", "origin_workflows_max", "gauge_samples",
		"service_calls", "repeated_calls", "handoffs", "handoffs_busy", "within_limits", "problems"}}
	for _, r := range rows {
		busy, other := 0, 0
		for k, n := range r.Refused {
			if IsBusyReason(k) {
				busy += n
			} else {
				other += n
			}
		}
		peak, tpeak := r.Peak(false)
		peakFb, tpeakFb := r.Peak(true)
		queued, occupied, origins := r.GaugeMax()
		c := r.Config
		t.Rows = append(t.Rows, []any{r.Nodes, c.Clients, c.Inflight, r.Workflows, round3(ms(c.Step)),
			c.MaxConcurrent, c.Queue, c.MaxWorkflows, c.FbLimit,
			r.Attempts, r.Accepted, r.Succeeded, r.Failed, r.Lost, r.GivenUp, r.Unsubmitted,
			busy, other, RefusalSummary(r.Refused),
			round3(r.Wall.Seconds()), round3(r.SubmitSpan.Seconds()), round3(r.Throughput),
			round3(r.Latency.P50.Seconds()), round3(r.Latency.P90.Seconds()), round3(r.Latency.P99.Seconds()), round3(r.Latency.Max.Seconds()),
			round3(r.FirstTry.P50.Seconds()), round3(r.FirstTry.P99.Seconds()),
			peak, peakFb, tpeak, tpeakFb, queued, occupied, origins, r.Samples,
			r.ServiceCalls, r.Repeated, r.Handoffs, r.HandoffsBusy, len(r.LimitBreaches()) == 0, strings.Join(r.Problems, "; ")})
	}
	return t
}

// FloodNodesTable is every node of every run (flood_nodes.csv): its
// part and its peaks against its limits.
func FloodNodesTable(rows []FloodRow) Table {
	t := Table{Name: ExpFlood + "_nodes", Header: []string{"run", "node", "peer", "zone", "accepted_as_origin", "service_calls",
		"peak", "max_concurrent", "peak_fb", "fb_limit", "trace_peak", "trace_peak_fb", "queued_max", "queue", "running_or_waiting_max", "origin_workflows_max", "max_workflows"}}
	for i, r := range rows {
		c := r.Config
		for _, n := range r.PerNode {
			t.Rows = append(t.Rows, []any{i + 1, n.Index, n.Peer, n.Zone, n.Accepted, n.Calls,
				n.Peak, c.MaxConcurrent, n.PeakFb, c.FbLimit, n.TracePeak, n.TracePeakFb, n.QueuedMax, c.Queue, n.OccupiedMax, n.OriginsMax, c.MaxWorkflows})
		}
	}
	return t
}
