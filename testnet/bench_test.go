package testnet_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/testnet"
)

// benchNodes is the testnet size of the BEDWE paper's experiments (its §5).
func benchNodes() int {
	if v, err := strconv.Atoi(os.Getenv("BEDWE_BENCH_NODES")); err == nil && v > 0 {
		return v
	}
	return 40
}

var (
	benchOnce sync.Once
	benchNet  *testnet.Manifest
	benchErr  error
)

// benchTestnet starts one shared testnet for every benchmark of a run.
func benchTestnet(b *testing.B) *testnet.Manifest {
	b.Helper()
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bedwe-bench-")
		if err != nil {
			benchErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		benchNet, benchErr = testnet.Up(ctx, testnet.Options{Nodes: benchNodes(), Zones: 4, Dir: dir, Binary: bedweBin})
	})
	if benchErr != nil {
		b.Fatalf("bench testnet: %v", benchErr)
	}
	return benchNet
}

// TestMain in main_test.go builds the binary; benchmarks tear the shared
// testnet down through this hook.
func init() {
	afterTests = append(afterTests, func() {
		if benchNet != nil {
			_ = benchNet.Down()
			_ = os.RemoveAll(benchNet.Dir)
		}
	})
}

func sequential(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "N" + strconv.Itoa(i+1)
	}
	return strings.Join(parts, " ")
}

func forkOf(branches, length int) string {
	var bs []string
	for b := range branches {
		steps := make([]string, length)
		for i := range steps {
			steps[i] = fmt.Sprintf("B%d_%d", b+1, i+1)
		}
		bs = append(bs, strings.Join(steps, " "))
	}
	return "FORK(" + strings.Join(bs, ", ") + ") SYNC"
}

// runBench submits workflow b.N times, one after another, and reports the
// origin-measured makespan per workflow.
func runBench(b *testing.B, workflow string) {
	m := benchTestnet(b)
	ctx := context.Background()
	cl, err := client.DialDataDir(ctx, m.Nodes[0].DataDir)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		st, err := cl.Submit(ctx, "bench", workflow, nil)
		if err != nil {
			b.Fatal(err)
		}
		final, err := cl.Wait(ctx, st.ID, 20*time.Millisecond, nil)
		if err != nil {
			b.Fatal(err)
		}
		if final.State != api.StateSucceeded {
			b.Fatalf("workflow %s: %s", final.State, final.Error)
		}
		total += final.Finished.Sub(final.Submitted)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/workflow")
}

// BenchmarkSequential200 runs 200 no-op services in sequence on the 40-node
// testnet (the paper's Fig. 9 end point).
func BenchmarkSequential200(b *testing.B) { runBench(b, sequential(200)) }

// BenchmarkFork20x10 runs one FORK of 20 branches of 10 no-op services (the
// paper's Fig. 10 end point).
func BenchmarkFork20x10(b *testing.B) { runBench(b, forkOf(20, 10)) }
