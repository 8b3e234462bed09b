package testnet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/testnet"
)

// TestMetricsOfTestnetNodes: every node of a testnet of real processes
// serves Prometheus metrics on a loopback port the manifest lists (and
// `testnet status` shows, as a table and as JSON); after a three-step
// workflow the nodes' bedwe_step_runs_total{outcome="ok"} sum to 3; a
// node killed and restarted serves its metrics at the same address again.
func TestMetricsOfTestnetNodes(t *testing.T) {
	m := up(t, testnet.Options{Nodes: 3, Zones: 3})
	saved, err := testnet.LoadManifest(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, nd := range saved.Nodes {
		if !strings.HasPrefix(nd.HTTP, "127.0.0.1:") || strings.HasSuffix(nd.HTTP, ":0") || seen[nd.HTTP] {
			t.Fatalf("node %d: manifest lists http %q, want a loopback address of its own", nd.Index, nd.HTTP)
		}
		seen[nd.HTTP] = true
	}

	stdout, stderr, code := bedwe(t, "", "testnet", "status", "--dir", m.Dir, "-o", "json")
	if code != 0 {
		t.Fatalf("testnet status -o json: exit %d: %s", code, stderr)
	}
	var rows []struct {
		Index int    `json:"index"`
		HTTP  string `json:"http"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("testnet status -o json: %v\n%s", err, stdout)
	}
	if len(rows) != 3 {
		t.Fatalf("testnet status -o json lists %d nodes, want 3", len(rows))
	}
	for _, r := range rows {
		if r.HTTP != saved.Nodes[r.Index].HTTP {
			t.Errorf("testnet status -o json: node %d http %q, manifest says %q", r.Index, r.HTTP, saved.Nodes[r.Index].HTTP)
		}
	}
	table, _, _ := bedwe(t, "", "testnet", "status", "--dir", m.Dir)
	if !strings.Contains(table, "HTTP") {
		t.Errorf("testnet status has no HTTP column:\n%s", table)
	}
	for _, nd := range saved.Nodes {
		if !strings.Contains(table, nd.HTTP) {
			t.Errorf("testnet status does not show node %d's %s:\n%s", nd.Index, nd.HTTP, table)
		}
	}

	if st := run(t, m, "a b c", ""); st.State != api.StateSucceeded {
		t.Fatalf("workflow: %s %s", st.State, st.Error)
	}
	// A hand-off is counted when its ack arrives, a step run before the
	// next hand-off: by the workflow's end all three runs are counted.
	ok := 0.0
	for _, nd := range saved.Nodes {
		metrics, help := scrapeNode(t, nd.MetricsURL())
		for _, name := range []string{"bedwe_handoffs_total", "bedwe_step_runs_total", "bedwe_journal_write_duration_seconds", "bedwe_peers", "libp2p_rcmgr_streams"} {
			if !help[name] {
				t.Errorf("node %d: %s has no %s", nd.Index, nd.MetricsURL(), name)
			}
		}
		ok += metrics[`bedwe_step_runs_total{outcome="ok"}`]
		if metrics["bedwe_connections"] < 1 {
			t.Errorf("node %d: bedwe_connections is %v in a connected mesh", nd.Index, metrics["bedwe_connections"])
		}
	}
	if ok != 3 {
		t.Errorf("bedwe_step_runs_total{outcome=\"ok\"} sums to %v over the nodes, want 3", ok)
	}

	if err := m.Kill(1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if m.Nodes[1].HTTP != saved.Nodes[1].HTTP {
		t.Errorf("restarted node 1 listens on %s, was %s", m.Nodes[1].HTTP, saved.Nodes[1].HTTP)
	}
	if _, help := scrapeNode(t, saved.Nodes[1].MetricsURL()); !help["bedwe_handoffs_total"] {
		t.Errorf("restarted node 1 serves no bedwe_ metrics at %s", saved.Nodes[1].MetricsURL())
	}
}

// scrapeNode reads the Prometheus text at url: the samples by
// "name{labels}" and the metric names that have a HELP line.
func scrapeNode(t *testing.T, url string) (map[string]float64, map[string]bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	samples, help := map[string]float64{}, map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ := strings.Cut(rest, " ")
			help[name] = true
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("GET %s: bad line %q", url, line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("GET %s: bad line %q: %v", url, line, err)
		}
		samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples, help
}

// A node whose pinned --http port was taken while it was down restarts on
// a fresh port (a chaos run once failed to restart a killed node because
// another process had got its port as a free one).
func TestRestartAfterItsHTTPPortWasTaken(t *testing.T) {
	m := up(t, testnet.Options{Nodes: 1, Zones: 1})
	old := m.Nodes[0].HTTP
	if err := m.Kill(0, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	var err error
	for range 100 { // the killed process's socket may linger a moment
		if l, err = net.Listen("tcp", old); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("could not take %s: %v", old, err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Restart(ctx, 0); err != nil {
		t.Fatalf("restart with its port taken: %v", err)
	}
	if nd := m.Nodes[0]; nd.HTTP == old || nd.HTTP == "" {
		t.Errorf("restarted node listens at %q, want a fresh port instead of %s", nd.HTTP, old)
	}
}
