//go:build simbugs

package explore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bedwe/bedwe/node/core"
)

// teethSeeds is how many random seeds a switched-off mechanism is given;
// teethScenarioSeeds how many seeds of each named scenario.
const (
	teethSeeds         = 5000
	teethScenarioSeeds = 50
)

// TestTeeth switches each protocol mechanism off in turn (a simbugs test
// build) and requires the explorer to find a violation: in the random
// seeds (loss and duplication 5 %, eight faults a seed) or in the named
// scenarios. A mechanism whose loss nothing notices is dead code, or a
// blind spot of the checker. It prints the teeth table.
func TestTeeth(t *testing.T) {
	defer core.SetBug(core.NoBug)
	opts := Options{Loss: 0.05, Dup: 0.05, Faults: 8}
	var table strings.Builder
	fmt.Fprintf(&table, "| mechanism switched off | first failing random seed | failing random seeds per 1,000 | scenarios failing (of %d seeds each) | first violation |\n|---|---|---|---|---|\n", teethScenarioSeeds)
	for _, b := range core.Bugs {
		core.SetBug(b)
		first, perThousand, what := uint64(0), 0, ""
		for seed := uint64(1); seed <= teethSeeds; seed++ {
			r := Run(seed, opts)
			if len(r.Violations) > 0 {
				if seed <= 1000 {
					perThousand++
				}
				if first == 0 {
					first, what = seed, r.Violations[0]
				}
			}
			if first != 0 && seed >= 1000 {
				break
			}
		}
		var failing []string
		for _, sc := range Scenarios {
			n := 0
			for seed := uint64(1); seed <= teethScenarioSeeds; seed++ {
				r := RunScenario(sc, seed, nil)
				if len(r.Violations) > 0 {
					n++
					if what == "" {
						what = sc.Name + ": " + r.Violations[0]
					}
				}
			}
			if n > 0 {
				failing = append(failing, fmt.Sprintf("%s %d", sc.Name, n))
			}
		}
		if first == 0 && len(failing) == 0 {
			t.Errorf("%s: no violation in %d random seeds nor in the scenarios", b, teethSeeds)
		}
		firstText := "none"
		if first != 0 {
			firstText = fmt.Sprint(first)
		}
		fmt.Fprintf(&table, "| %s | %s | %d | %s | %s |\n", b, firstText, perThousand, strings.Join(failing, ", "), what)
	}
	t.Logf("teeth:\n%s", table.String())
}
