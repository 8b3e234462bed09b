package node_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
)

// TestMetricsCountWhatTheWorkflowsDid runs three real peers with --http,
// runs S1 S2 S3 and then S1 boom (boom always fails) across them, and
// scrapes each peer's /metrics over HTTP: summed over the peers, the
// hand-offs and step runs are exactly what the two workflows did (five
// packs acknowledged: S1, S2, S3, S1, boom; four steps ok, one failed),
// the origin (and its two replicas) recorded two completions, every peer sees the three peers and
// timed its journal writes, and only the peer started with Pprof serves
// /debug/pprof/.
func TestMetricsCountWhatTheWorkflowsDid(t *testing.T) {
	services := "version: 1\nservices:\n  boom: {kind: fail, probability: 1}\npatterns:\n  - {match: \"S*\", kind: echo}\n"
	network := "metrics-" + filepath.Base(t.TempDir())
	var nodes []api.NodeFile
	for i := range 3 {
		cfg := testConfig(t, node.TestnetConfig(), services)
		cfg.Network = network
		cfg.Zone = fmt.Sprintf("z%d", i)
		cfg.HTTP = "127.0.0.1:0"
		cfg.Pprof = i == 0
		if i > 0 {
			cfg.Bootstrap = nodes[0].Addrs
		}
		nf, _ := runNode(t, cfg)
		if !strings.HasPrefix(nf.HTTP, "127.0.0.1:") || strings.HasSuffix(nf.HTTP, ":0") {
			t.Fatalf("node %d: node file names http %q, want the loopback address it listens on", i, nf.HTTP)
		}
		nodes = append(nodes, nf)
	}
	for _, nf := range nodes {
		waitPeers(t, nf, len(nodes))
	}

	if final := runWorkflow(t, nodes[0].Addrs[0], "S1 S2 S3"); final.State != api.StateSucceeded {
		t.Fatalf("S1 S2 S3: %s %s", final.State, final.Error)
	}
	if final := runWorkflow(t, nodes[0].Addrs[0], "S1 boom"); final.State != api.StateFailed {
		t.Fatalf("S1 boom: %s %s, want failed", final.State, final.Error)
	}

	want := map[string]float64{
		`bedwe_handoffs_total{outcome="ok"}`:                 5,
		`bedwe_handoffs_total{outcome="refused"}`:            0,
		`bedwe_handoffs_total{outcome="error"}`:              0,
		`bedwe_handoff_duration_seconds_count{outcome="ok"}`: 5,
		`bedwe_step_runs_total{outcome="ok"}`:                4,
		`bedwe_step_runs_total{outcome="failed"}`:            1,
		`bedwe_step_runs_total{outcome="cancelled"}`:         0,
		`bedwe_packs_accepted_total`:                         5,
		// Each completion is recorded by the origin and its two replicas.
		`bedwe_origin_completions_total{result="recorded"}`: 6,
		`bedwe_reroutes_total`:                              0,
	}
	// The sender counts a hand-off when the ack arrives, which races with
	// the receiver running the step: wait until the sums settle, then
	// make sure nothing more comes.
	var sums map[string]float64
	var per []map[string]float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		sums, per = map[string]float64{}, nil
		for _, nf := range nodes {
			m := scrape(t, nf.HTTP)
			per = append(per, m)
			for k, v := range m {
				sums[k] += v
			}
		}
		if sums[`bedwe_handoffs_total{outcome="ok"}`] >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	for k, v := range want {
		if got, ok := sums[k]; !ok || got != v {
			t.Errorf("%s summed over the peers = %v (present %v), want %v", k, got, ok, v)
		}
	}
	for i, m := range per {
		peers := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, "bedwe_peers{") {
				peers += v
			}
		}
		if peers != 3 {
			t.Errorf("node %d: bedwe_peers sums to %v, want 3", i, peers)
		}
		if m[`bedwe_journal_write_duration_seconds_count{op="update"}`] == 0 {
			t.Errorf("node %d: no journal write timed", i)
		}
		if _, ok := m["bedwe_held_packs"]; !ok {
			t.Errorf("node %d: no bedwe_held_packs gauge", i)
		}
	}
	if got := per[0][`bedwe_origin_completions_total{result="recorded"}`]; got != 2 {
		t.Errorf("the origin recorded %v completions, want 2", got)
	}
	if t.Failed() {
		for k, v := range sums {
			if strings.HasPrefix(k, "bedwe_") && !strings.Contains(k, "_bucket{") {
				t.Logf("sum %s = %v", k, v)
			}
		}
	}
	if again := scrapeSum(t, nodes, `bedwe_handoffs_total{outcome="ok"}`); again != 5 {
		t.Errorf("hand-offs went on to %v after both workflows ended", again)
	}

	for i, want := range []int{http.StatusOK, http.StatusNotFound} {
		resp, err := http.Get("http://" + nodes[i].HTTP + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("node %d (pprof %v): /debug/pprof/ answered %d, want %d", i, i == 0, resp.StatusCode, want)
		}
	}
}

// TestMetricsRefuseNonLoopbackHTTP: an --http address that is not loopback
// is refused with a message naming the way out, unless HTTPPublic.
func TestMetricsRefuseNonLoopbackHTTP(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9464", "10.1.2.3:9464", ":9464", "example.org:9464"} {
		cfg := testConfig(t, node.TestnetConfig(), echoServices)
		cfg.HTTP = addr
		_, err := node.New(cfg)
		if err == nil {
			t.Errorf("--http %s accepted without --http-public", addr)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "--http-public") || !strings.Contains(msg, "127.0.0.1:9464") {
			t.Errorf("--http %s: %q does not say to use 127.0.0.1:9464 or --http-public", addr, msg)
		}
		cfg.HTTPPublic = true
		if _, err := node.New(cfg); err != nil {
			t.Errorf("--http %s with --http-public: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:9464", "localhost:9464"} {
		cfg := testConfig(t, node.TestnetConfig(), echoServices)
		cfg.HTTP = addr
		if _, err := node.New(cfg); err != nil {
			t.Errorf("--http %s refused: %v", addr, err)
		}
	}
	cfg := testConfig(t, node.TestnetConfig(), echoServices)
	cfg.HTTP = "127.0.0.1"
	if _, err := node.New(cfg); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Errorf("--http without a port: %v", err)
	}
}

// scrape reads the Prometheus text exposition at addr/metrics into
// "name{labels}" → value.
func scrape(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s/metrics: %s: %s", addr, resp.Status, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad exposition line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad exposition line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func scrapeSum(t testing.TB, nodes []api.NodeFile, key string) float64 {
	t.Helper()
	sum := 0.0
	for _, nf := range nodes {
		sum += scrape(t, nf.HTTP)[key]
	}
	return sum
}
