package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/testnet/bench"
)

func TestParseNodeSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{in: "", want: nil},
		{in: "40", want: []int{40}},
		{in: "8, 16,40,80", want: []int{8, 16, 40, 80}},
		{in: "8,x", err: `"x" is not a number`},
		{in: "0", err: "want at least 1"},
		{in: "8,8", err: "8 given twice"},
	} {
		got, err := parseNodeSizes(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseNodeSizes(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseNodeSizes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestBenchIdleFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "8,16", "--experiments", "sequential"}, "for --experiments idle only"},
		{[]string{"--nodes", "8,16", "--experiments", "idle,overhead"}, "runs by itself"},
		{[]string{"--experiments", "idle", "--testnet", "/nonexistent"}, "runs by itself"},
		{[]string{"--nodes", "8,-1", "--experiments", "idle"}, "want at least 1"},
		{[]string{"--experiments", "idle", "--idle-window", "-1s"}, "want a window of 0"},
	} {
		_, _, err := runBenchCmd(t, tc.args...)
		if exitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: err %v, want exit 1 with %q", tc.args, err, tc.want)
		}
	}
	exps, err := bench.ParseExperiments("idle")
	if err != nil || !slices.Equal(exps, []string{bench.ExpIdle}) {
		t.Errorf("ParseExperiments(idle) = %v, %v", exps, err)
	}
	if all, _ := bench.ParseExperiments("all"); slices.Contains(all, bench.ExpIdle) {
		t.Errorf("all includes idle: %v", all)
	}
}

// TestIdleWindowHoldsTwoRefreshes: with no window asked, a size is
// sampled for two presence refreshes of a mesh that size (at least 30 s),
// so every node's re-announcement falls in the window; a window asked
// for is kept.
func TestIdleWindowHoldsTwoRefreshes(t *testing.T) {
	cfg := node.TestnetConfig()
	for _, n := range []int{1, 8, 40, 80} {
		got := idleWindow(0, n)
		if refresh := cfg.PresenceRefreshFor(n - 1); got < 2*refresh || got < 30*time.Second {
			t.Errorf("idleWindow(0, %d) = %v: under two refreshes (%v) or 30 s", n, got, refresh)
		}
	}
	if got := idleWindow(0, 80); got != 237*time.Second {
		t.Errorf("idleWindow(0, 80) = %v, want 237s (79 peers × 1.5 s, twice)", got)
	}
	if got := idleWindow(45*time.Second, 80); got != 45*time.Second {
		t.Errorf("idleWindow(45s, 80) = %v: the window asked for was not kept", got)
	}
}

func TestPrintIdleTable(t *testing.T) {
	rows := []bench.IdleRow{
		{Nodes: 8, Window: 30 * time.Second, CPUTotalPct: 2, CPUPerNodePct: 0.25, RSSMeanMB: 30, RSSMaxMB: 31, LoadBefore: 0.5, LoadAfter: 0.7},
		{Nodes: 80, Window: 30 * time.Second, CPUTotalPct: 16, CPUPerNodePct: 0.2, RSSMeanMB: 33, RSSMaxMB: 34, LoadBefore: 1.1, LoadAfter: 1.9},
	}
	var out bytes.Buffer
	if err := printIdleTable(&out, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want header + 2:\n%s", len(lines), out.String())
	}
	for _, want := range []string{"16.0%", "0.20%", "0.80x", "33.0 MiB", "1.10x", "1.10..1.90"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("row for 80 nodes %q lacks %q", lines[2], want)
		}
	}
	tab := bench.IdleTable(rows)
	if len(tab.Rows) != 2 || len(tab.Rows[0]) != len(tab.Header) || tab.Name != "idle" {
		t.Errorf("IdleTable = %+v", tab)
	}
}
