package explore

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// seedsShort is how many seeds the quick tier explores per option set.
const seedsShort = 400

// TestSeedsHoldTheInvariants explores seeds under two fault mixes (a clean
// network; 5 % loss and duplication with eight faults a seed) and fails on
// any violation, naming the seed and how to replay it.
func TestSeedsHoldTheInvariants(t *testing.T) {
	for _, o := range []struct {
		name string
		opts Options
	}{
		{"kills-pauses-cuts", Options{}},
		{"lossy-8-faults", Options{Loss: 0.05, Dup: 0.05, Faults: 8}},
	} {
		t.Run(o.name, func(t *testing.T) {
			start := time.Now()
			s := Seeds(1, seedsShort, 0, o.opts, nil)
			s.Timed(time.Since(start))
			for _, r := range s.FailingSeeds {
				t.Errorf("seed %d (replay: bedwe sim --seed %d --loss %g --dup %g --faults %d --trace): %s",
					r.Seed, r.Seed, o.opts.Loss, o.opts.Dup, max(o.opts.Faults, 4), strings.Join(r.Violations, "; "))
			}
			if s.Acked < s.Workflows*9/10 {
				t.Errorf("%d of %d workflows acknowledged: the workload hardly ran", s.Acked, s.Workflows)
			}
			if s.Reruns == 0 || s.Faults < 3*s.Seeds {
				t.Errorf("%d faults, %d re-runs in %d seeds: the faults hardly bit", s.Faults, s.Reruns, s.Seeds)
			}
			t.Logf("%d seeds: %d workflows (%d done, %d failed at a once step), %d executions (%d re-runs), %d faults, %.0f seeds/s",
				s.Seeds, s.Workflows, s.Done, s.FailedOnce, s.Executions, s.Reruns, s.Faults, s.SeedsPerSecond)
		})
	}
}

// hashes runs seeds 1..n and lists their trace hashes.
func hashes(n int) string {
	var b strings.Builder
	for seed := uint64(1); seed <= uint64(n); seed++ {
		fmt.Fprintf(&b, "%d:%s\n", seed, Run(seed, Options{Loss: 0.05, Dup: 0.05, Faults: 8}).Hash)
	}
	return b.String()
}

// TestSameSeedSameTrace runs seeds twice in this process and once more in
// another process with GOMAXPROCS=1 (where map iteration and scheduling
// differ): every trace hash must match, or a run is not replayable.
func TestSameSeedSameTrace(t *testing.T) {
	if os.Getenv("BEDWE_SIM_HASHES") != "" {
		fmt.Print(hashes(20))
		return
	}
	a, b := hashes(20), hashes(20)
	if a != b {
		t.Fatalf("two runs of the same seeds in one process differ:\n%s\n%s", a, b)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSameSeedSameTrace$")
	cmd.Env = append(os.Environ(), "BEDWE_SIM_HASHES=1", "GOMAXPROCS=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("second process: %v", err)
	}
	if got := strings.TrimSuffix(string(out), "PASS\n"); got != a {
		t.Fatalf("the same seeds in another process differ:\n%s\n%s", a, got)
	}
}

// BenchmarkSeed measures one seed of the default workload (12 nodes, six
// workflows, four faults): seeds a minute = 60e9 / ns/op per core.
func BenchmarkSeed(b *testing.B) {
	for i := range b.N {
		Run(uint64(i+1), Options{})
	}
}
