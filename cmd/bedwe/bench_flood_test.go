package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/testnet/bench"
)

// TestBenchFloodFlags: the flood's mistakes are refused before anything
// starts.
func TestBenchFloodFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--experiments", "flood,overhead"}, "runs by itself"},
		{[]string{"--experiments", "idle,flood"}, "runs by itself"},
		{[]string{"--experiments", "flood", "--testnet", "/nonexistent"}, "runs by itself"},
		{[]string{"--experiments", "flood", "--nodes", "4,8"}, "one --nodes size"},
		{[]string{"--experiments", "flood", "--flood-workflows", "0"}, "--flood-workflows 0: want at least 1"},
		{[]string{"--experiments", "flood", "--flood-inflight", "-2"}, "--flood-inflight -2: want at least 1"},
		{[]string{"--experiments", "flood", "--flood-timeout", "0s"}, "--flood-timeout 0s"},
	} {
		_, _, err := runBenchCmd(t, tc.args...)
		if exitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: err %v, want exit 1 with %q", tc.args, err, tc.want)
		}
	}
}

func TestPrintFloodTable(t *testing.T) {
	c := bench.DefaultFloodConfig()
	row := bench.FloodRow{Nodes: 2, Zones: 2, Config: c, Workflows: 100, Attempts: 180, Accepted: 100, Succeeded: 100,
		Refused: map[string]int{bench.ReasonBusyWorkflows: 80}, Wall: 4 * time.Second, Throughput: 25,
		Latency: bench.Percentiles{P50: 300 * time.Millisecond, P90: 500 * time.Millisecond, P99: 900 * time.Millisecond, Max: time.Second},
		PerNode: []bench.FloodNode{
			{Index: 0, Peer: "12D3KooWAAAAAAAAAAAA", Zone: "z0", Accepted: 100, Calls: 120, Peak: 4, PeakFb: 2, TracePeak: 4, TracePeakFb: 2, QueuedMax: 3, OccupiedMax: 7, OriginsMax: 8},
			{Index: 1, Peer: "12D3KooWBBBBBBBBBBBB", Zone: "z1", Calls: 80, Peak: 3, PeakFb: 1, TracePeak: -1, TracePeakFb: -1, QueuedMax: -1, OccupiedMax: -1, OriginsMax: -1},
		},
		Handoffs: 200, HandoffsBusy: 7}
	var out bytes.Buffer
	if err := printFloodTable(&out, row); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"80 busy, 0 other: busy: --max-workflows 80",
		"25.0 workflows/s (100 succeeded in 4.000 s",
		"p50 0.300 s, p90 0.500 s, p99 0.900 s, max 1.000 s",
		"max 4 per node (limit 4), 2 of fb (limit 2)",
		"running or waiting max 7 (limit 4 + 4), of them waiting max 3",
		"lost", "within limits     yes", "problems          none",
		"AAAAAAAA", "not read",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("flood table lacks %q:\n%s", want, s)
		}
	}
	row.PerNode[1].Peak = 5
	row.Problems = row.LimitBreaches()
	out.Reset()
	if err := printFloodTable(&out, row); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "problem  ") || !strings.Contains(s, "node 1 ran 5 service calls at once (--max-concurrent 4)") || !strings.Contains(s, "NO (see problems)") {
		t.Errorf("flood table with a problem:\n%s", s)
	}
}
