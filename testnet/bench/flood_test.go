package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/pack"
)

func TestMaxOverlap(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	iv := func(a, b int) Interval { return Interval{at(a), at(b)} }
	for _, tc := range []struct {
		name string
		ivs  []Interval
		want int
	}{
		{"none", nil, 0},
		{"one", []Interval{iv(0, 10)}, 1},
		{"disjoint", []Interval{iv(0, 10), iv(20, 30), iv(40, 50)}, 1},
		{"touching is not overlapping", []Interval{iv(0, 10), iv(10, 20), iv(20, 30)}, 1},
		{"nested", []Interval{iv(0, 100), iv(10, 90), iv(20, 80), iv(30, 40)}, 4},
		{"staircase", []Interval{iv(0, 30), iv(10, 40), iv(20, 50), iv(35, 60)}, 3},
		{"unordered input", []Interval{iv(35, 60), iv(20, 50), iv(0, 30), iv(10, 40)}, 3},
		{"same start", []Interval{iv(5, 10), iv(5, 11), iv(5, 12)}, 3},
		{"empty and inverted ignored", []Interval{iv(5, 5), iv(9, 1), iv(0, 10)}, 1},
	} {
		if got := MaxOverlap(tc.ivs); got != tc.want {
			t.Errorf("%s: MaxOverlap = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestTracePeaks(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	e := func(peer, svc string, a, b int) pack.TraceEntry {
		return pack.TraceEntry{Peer: peer, Service: svc, Start: t0.Add(time.Duration(a) * time.Millisecond), End: t0.Add(time.Duration(b) * time.Millisecond)}
	}
	// Three workflows: on peer A, fa and fb of different workflows
	// overlap (3 at once on A, 2 of fb); peer B runs one at a time.
	traces := [][]pack.TraceEntry{
		{e("A", "fa", 0, 10), e("A", "fb", 12, 30)},
		{e("A", "fa", 5, 15), e("B", "fb", 16, 20)},
		{e("B", "fa", 0, 4), e("A", "fb", 14, 25)},
	}
	got := TracePeaks(traces)
	for k, want := range map[string]int{"A": 3, "A/fa": 2, "A/fb": 2, "B": 1, "B/fa": 1, "B/fb": 1} {
		if got[k] != want {
			t.Errorf("peak %s = %d, want %d (all: %v)", k, got[k], want, got)
		}
	}
}

func TestRefusalReason(t *testing.T) {
	busy := func(msg string) error {
		return fmt.Errorf("submit: %w", &client.RemoteError{Msg: msg, Code: api.CodeBusy})
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{busy("busy: peer 12D3KooWabc is the origin of 8 running workflows (limit 8, --max-workflows): submit again later or to another peer"), ReasonBusyWorkflows},
		{busy("busy: client 12D3 submits faster than peer X allows (10 a second, bursts of 20): try again later"), ReasonBusyRate},
		{busy("something else entirely"), ReasonBusyOther},
		{&client.RemoteError{Msg: "bad workflow", Code: api.CodeBadPack}, "refused: " + api.CodeBadPack},
		{&client.RemoteError{Msg: "parse error"}, "refused: no code"},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), ReasonCancelled},
		{errors.New("stream reset"), ReasonTransport},
	} {
		if got := RefusalReason(tc.err); got != tc.want {
			t.Errorf("RefusalReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	for reason, want := range map[string]bool{ReasonBusyWorkflows: true, ReasonBusyRate: true, ReasonBusyOther: true,
		"refused: bad-pack": false, ReasonTransport: false, ReasonCancelled: false} {
		if IsBusyReason(reason) != want {
			t.Errorf("IsBusyReason(%q) = %v, want %v", reason, !want, want)
		}
	}
}

func TestRefusalSummary(t *testing.T) {
	if got := RefusalSummary(nil); got != "none" {
		t.Errorf("empty: %q", got)
	}
	got := RefusalSummary(map[string]int{ReasonBusyRate: 3, ReasonBusyWorkflows: 7341, ReasonTransport: 3})
	want := "busy: --max-workflows 7341, busy: submission rate 3, error: no answer 3"
	if got != want {
		t.Errorf("RefusalSummary = %q, want %q", got, want)
	}
}

func TestParseGauge(t *testing.T) {
	text := `# HELP bedwe_steps_queued Steps accepted by this node and waiting.
# TYPE bedwe_steps_queued gauge
bedwe_steps_queued_total 99
bedwe_steps_queued 3
bedwe_step_slots_free 4
bedwe_peers{zone="z0",power="powered"} 5
`
	for name, want := range map[string]float64{"bedwe_steps_queued": 3, "bedwe_step_slots_free": 4} {
		if v, ok := ParseGauge(text, name); !ok || v != want {
			t.Errorf("ParseGauge(%s) = %v, %v; want %v", name, v, ok, want)
		}
	}
	for _, name := range []string{"bedwe_peers", "bedwe_origin_workflows_running"} {
		if v, ok := ParseGauge(text, name); ok {
			t.Errorf("ParseGauge(%s) = %v, found; want not found (labelled or absent)", name, v)
		}
	}
}

func TestLimitProblemsAndTable(t *testing.T) {
	c := DefaultFloodConfig()
	// Waiting alone above --queue is within the bound while slots are free
	// (8 waiting, 0 running: 8 = 4 + 4); a trace peak above the limit is
	// not a breach either (see FloodNode.TracePeak).
	ok := FloodNode{Index: 0, Peer: "A", Peak: 4, PeakFb: 2, QueuedMax: 8, OccupiedMax: 8, OriginsMax: 8, TracePeak: 5, TracePeakFb: 2}
	if p := limitProblems([]FloodNode{ok}, c); len(p) != 0 {
		t.Errorf("a node at its limits: problems %v", p)
	}
	bad := FloodNode{Index: 1, Peer: "B", Peak: 5, PeakFb: 3, QueuedMax: 5, OccupiedMax: 9, OriginsMax: 9, TracePeak: -1, TracePeakFb: -1}
	p := limitProblems([]FloodNode{ok, bad}, c)
	if len(p) != 4 {
		t.Fatalf("a node above all four limits: %d problems %v, want 4", len(p), p)
	}
	for i, want := range []string{"5 service calls at once (--max-concurrent 4)", "3 fb calls", "9 steps running or waiting (--max-concurrent 4 + --queue 4)", "9 running workflows (--max-workflows 8)"} {
		if !strings.Contains(p[i], want) || !strings.HasPrefix(p[i], "node 1 ") {
			t.Errorf("problem %d %q lacks %q", i, p[i], want)
		}
	}

	row := FloodRow{Nodes: 2, Zones: 2, Config: c, Workflows: 10, Attempts: 17, Accepted: 10, Succeeded: 9, Failed: 1,
		Refused: map[string]int{ReasonBusyWorkflows: 5, ReasonBusyRate: 1, ReasonTransport: 1},
		Wall:    2 * time.Second, Throughput: 4.5,
		Latency:  Percentiles{P50: 100 * time.Millisecond, P90: 200 * time.Millisecond, P99: 1500 * time.Millisecond, Max: 2 * time.Second},
		PerNode:  []FloodNode{ok, bad},
		Handoffs: 40, HandoffsBusy: 3, Problems: []string{"1 accepted workflows failed"}}
	if got, traced := row.Peak(false); got != 5 || traced != 5 {
		t.Errorf("Peak(node) = %d, %d; want 5, 5", got, traced)
	}
	if got, traced := row.Peak(true); got != 3 || traced != 2 {
		t.Errorf("Peak(fb) = %d, %d; want 3, 2", got, traced)
	}
	tab := FloodTable([]FloodRow{row})
	var buf bytes.Buffer
	if err := tab.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(recs) != 2 {
		t.Fatalf("flood.csv: %d records, %v", len(recs), err)
	}
	cell := map[string]string{}
	for i, h := range recs[0] {
		cell[h] = recs[1][i]
	}
	for k, want := range map[string]string{
		"accepted": "10", "succeeded": "9", "failed": "1", "lost": "0",
		"refused_busy": "6", "refused_other": "1",
		"refused_by_reason": "busy: --max-workflows 5, busy: submission rate 1, error: no answer 1",
		"throughput_wf_s":   "4.5", "latency_p99_s": "1.5", "peak_node": "5", "peak_fb": "3", "trace_peak_fb": "2",
		"queued_max": "8", "running_or_waiting_max": "9", "origin_workflows_max": "9", "within_limits": "false", "problems": "1 accepted workflows failed",
	} {
		if cell[k] != want {
			t.Errorf("flood.csv %s = %q, want %q", k, cell[k], want)
		}
	}
	row.PerNode = []FloodNode{ok}
	if m := FloodTable([]FloodRow{row}).Maps()[0]; m["within_limits"] != true {
		t.Errorf("within_limits with every node at its limits = %v, want true", m["within_limits"])
	}
	nodes := FloodNodesTable([]FloodRow{row, row})
	if len(nodes.Rows) != 2 || len(nodes.Rows[0]) != len(nodes.Header) {
		t.Errorf("flood_nodes table: %d rows of %d cells, header %d", len(nodes.Rows), len(nodes.Rows[0]), len(nodes.Header))
	}
}

func TestCountingService(t *testing.T) {
	svc, err := StartCountingService(300 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	post := func(peer, service, key string) error {
		body := fmt.Sprintf(`{"workflow_id":"w","step":"s","service":%q,"attempt":1,"idempotency_key":%q,"peer":%q}`, service, key, peer)
		resp, err := http.Post(svc.URL(), "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
	// Peer A: 3 calls at once (2 of fb); peer B: 2 calls one after the
	// other, the second repeating the first's key.
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for i, s := range []string{"fa", "fb", "fb"} {
		wg.Go(func() { errs <- post("A", s, fmt.Sprintf("k%d", i)) })
	}
	wg.Go(func() {
		errs <- post("B", "fa", "kb")
		errs <- post("B", "fa", "kb")
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		peer, service string
		want          int
	}{{"A", "", 3}, {"A", "fb", 2}, {"A", "fa", 1}, {"B", "", 1}, {"C", "", 0}} {
		if got := svc.Peak(tc.peer, tc.service); got != tc.want {
			t.Errorf("Peak(%s, %q) = %d, want %d", tc.peer, tc.service, got, tc.want)
		}
	}
	if got := svc.CallsBy("B", ""); got != 2 {
		t.Errorf("CallsBy(B) = %d, want 2", got)
	}
	total, distinct, repeated := svc.Calls()
	if total != 5 || distinct != 4 || repeated != 1 {
		t.Errorf("Calls = %d, %d, %d; want 5 total, 4 distinct, 1 repeated", total, distinct, repeated)
	}
}

func TestFloodConfigCheck(t *testing.T) {
	if err := DefaultFloodConfig().Check(); err != nil {
		t.Errorf("default: %v", err)
	}
	for _, mod := range []func(*FloodConfig){
		func(c *FloodConfig) { c.Workflows = 0 },
		func(c *FloodConfig) { c.Inflight = 0 },
		func(c *FloodConfig) { c.FbLimit = 0 },
		func(c *FloodConfig) { c.Timeout = 0 },
		func(c *FloodConfig) { c.RetryMax = c.RetryMin - 1 },
	} {
		c := DefaultFloodConfig()
		mod(&c)
		if err := c.Check(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	s := FloodServices("http://127.0.0.1:1/step", 2)
	if !strings.Contains(s, `fb: {kind: http, url: "http://127.0.0.1:1/step", max_concurrent: 2}`) || !strings.Contains(s, "fa: {kind: http") {
		t.Errorf("services file:\n%s", s)
	}
}
