package testnet_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/bedwe/bedwe/testnet"
)

// TestChaos runs every scenario on real processes killed with SIGKILL and
// asserts that nothing is lost, nothing counted twice, and every result
// equals the fault-free one.
func TestChaos(t *testing.T) {
	for _, scenario := range testnet.Scenarios {
		t.Run(scenario, func(t *testing.T) {
			m := up(t, testnet.Options{Nodes: 6, Zones: 3})
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			sum, err := m.Chaos(ctx, testnet.ChaosOptions{
				Scenario: scenario, Workflows: 3, StepMillis: 500, Seed: 42,
				Timeout: 2 * time.Minute, FlapFor: 6 * time.Second,
			})
			if err != nil {
				t.Fatalf("chaos %s: %v", scenario, err)
			}
			out, _ := json.Marshal(sum)
			t.Logf("chaos %s: %s", scenario, out)
			if os.Getenv("BEDWE_CHAOS_REPORT") != "" {
				f, err := os.OpenFile(os.Getenv("BEDWE_CHAOS_REPORT"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
				if err == nil {
					f.Write(append(out, '\n'))
					f.Close()
				}
			}
			if len(sum.KilledPIDs) == 0 {
				t.Fatalf("scenario %s killed nothing", scenario)
			}
			if sum.Completed != sum.Submitted || sum.Lost != 0 || sum.Failed != 0 {
				t.Errorf("completed %d of %d, lost %d, failed %d: %v", sum.Completed, sum.Submitted, sum.Lost, sum.Failed, sum.Errors)
			}
			if sum.DuplicateOutputs != 0 {
				t.Errorf("%d step outputs counted twice", sum.DuplicateOutputs)
			}
			if sum.ResultMismatches != 0 {
				t.Errorf("%d results differ from the fault-free result", sum.ResultMismatches)
			}
		})
	}
}
