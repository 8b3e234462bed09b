package node_test

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/internal/cputime"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
)

// BenchmarkSequenceCPU is the CPU per step measured on real peers
// that share one process: n nodes on loopback in zones of their own, each
// offering the no-op steps, run sequences of 200 echo steps that read no
// earlier output (reads=(), so the packs stay small), one after another.
// One op is one workflow. cpu-ns/step is the CPU of the whole process per
// step, net of the mesh's idle CPU measured for two seconds before: what
// the protocol costs with one Go runtime, without the scheduling and cache
// costs of n processes sharing two cores that the testnet's figure
// (docs/bench/hop-cpu.sh) includes. commits/step, requests/step and
// announcements/step (presence announcements, refreshes included) say
// what each step did, and conns/node how many connections a node held at
// the end. The first workflow, outside the measurement, makes the first
// connections; at 40 nodes the measured ones still make more (a 200-step
// workflow meets only part of the 780 pairs), which shows in conns/node.
//
//	go test ./node -run XXX -bench SequenceCPU -benchtime 5x
//
// BEDWE_BENCH_CPUPROFILE=FILE writes a CPU profile of the measured loop
// only (-test.cpuprofile also covers starting the mesh and the first
// workflow, whose dials and announcements are not a step's cost); with
// several sub-benchmarks, the last one's.
func BenchmarkSequenceCPU(b *testing.B) {
	const steps = 200
	var src strings.Builder
	for i := range steps {
		fmt.Fprintf(&src, "S%d[reads=()] ", i)
	}
	for _, n := range []int{4, 16, 40} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := startMesh(b, "seqcpu", n, func(_ int, cfg *node.Config) string {
				cfg.HTTP = "127.0.0.1:0"
				return "version: 1\npatterns:\n  - {match: \"S*\", kind: echo}\n"
			})
			ctx, cl := hopClient(b, nodes[0])
			run := func() { runSequence(b, ctx, cl, src.String(), steps) }
			run()
			// Idle: a rate, read over a window of wall time (not waiting
			// for anything).
			idleFrom, idleStart := time.Now(), cputime.Used()
			time.Sleep(2 * time.Second)
			idle := float64(cputime.Used()-idleStart) / float64(time.Since(idleFrom))

			commits, requests, announced := journalWrites(b, nodes), muxRequests(b, nodes), announcements(b, nodes)
			stopProfile := profileLoop(b)
			defer stopProfile()
			began, start := time.Now(), cputime.Used()
			for b.Loop() {
				run()
			}
			used := float64(cputime.Used()-start) - idle*float64(time.Since(began))
			all := float64(b.N * steps)
			b.ReportMetric(used/all, "cpu-ns/step")
			b.ReportMetric((journalWrites(b, nodes)-commits)/all, "commits/step")
			b.ReportMetric((muxRequests(b, nodes)-requests)/all, "requests/step")
			b.ReportMetric((announcements(b, nodes)-announced)/all, "announcements/step")
			b.ReportMetric(connections(b, nodes)/float64(n), "conns/node")
		})
	}
}

// profileLoop starts the CPU profile BEDWE_BENCH_CPUPROFILE names, if
// any, and returns what stops it.
func profileLoop(b *testing.B) func() {
	path := os.Getenv("BEDWE_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("cpu profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("cpu profile: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("cpu profile: %v", err)
		}
	}
}

// muxRequests is the number of requests the nodes served on shared
// sessions, all protocols together.
func muxRequests(t testing.TB, nodes []api.NodeFile) float64 {
	sum := 0.0
	for _, nf := range nodes {
		for k, v := range scrape(t, nf.HTTP) {
			if strings.HasPrefix(k, "bedwe_mux_requests_served_total{") {
				sum += v
			}
		}
	}
	return sum
}

// connections is the number of connections the nodes hold open, both
// ends counted.
func connections(t testing.TB, nodes []api.NodeFile) float64 {
	sum := 0.0
	for _, nf := range nodes {
		sum += scrape(t, nf.HTTP)["bedwe_connections"]
	}
	return sum
}

// announcements is the number of presence announcements the nodes
// published, refreshes included.
func announcements(t testing.TB, nodes []api.NodeFile) float64 {
	sum := 0.0
	for _, nf := range nodes {
		sum += scrape(t, nf.HTTP)["bedwe_presence_announcements_total"]
	}
	return sum
}
