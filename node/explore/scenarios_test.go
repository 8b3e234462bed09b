package explore

import (
	"strings"
	"testing"
)

// TestScenarios replays every named fault shape over 20 seeds each (the
// seed draws delays, receivers and acceptors; the script fixes the
// faults): each must hold every invariant and end as its shape says.
func TestScenarios(t *testing.T) {
	for _, sc := range Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			for seed := uint64(1); seed <= 20; seed++ {
				r := RunScenario(sc, seed, nil)
				if len(r.Violations) > 0 {
					t.Errorf("seed %d (replay: bedwe sim --scenario %s --seed %d --trace): %s", seed, sc.Name, seed, strings.Join(r.Violations, "; "))
				}
				if err := sc.Want(r); err != nil {
					t.Errorf("seed %d (replay: bedwe sim --scenario %s --seed %d --trace): %v", seed, sc.Name, seed, err)
				}
			}
		})
	}
}
