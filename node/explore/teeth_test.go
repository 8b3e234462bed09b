//go:build simbugs

package explore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bedwe/bedwe/node/core"
)

// teethSeeds is how many seeds a switched-off mechanism is given to make
// the explorer find a violation.
const teethSeeds = 5000

// TestTeeth switches each protocol mechanism off in turn (a simbugs test
// build) and requires the explorer to find a violation within teethSeeds
// seeds: a mechanism whose loss nothing notices is dead code, or a blind
// spot of the checker. It prints the teeth table: the first failing seed,
// failures per 1,000 seeds and the first violation.
func TestTeeth(t *testing.T) {
	defer core.SetBug(core.NoBug)
	opts := Options{Loss: 0.05, Dup: 0.05, Faults: 8}
	var table strings.Builder
	fmt.Fprintf(&table, "| mechanism switched off | first failing seed | failures per 1,000 seeds | first violation |\n|---|---|---|---|\n")
	for _, b := range core.Bugs {
		core.SetBug(b)
		first, failures, what := uint64(0), 0, ""
		const sample = 1000
		for seed := uint64(1); seed <= teethSeeds; seed++ {
			r := Run(seed, opts)
			if len(r.Violations) == 0 {
				if first != 0 && seed > sample {
					break
				}
				continue
			}
			if seed <= sample {
				failures++
			}
			if first == 0 {
				first, what = seed, r.Violations[0]
			}
			if seed > sample {
				break
			}
		}
		if first == 0 {
			t.Errorf("%s: no violation in %d seeds", b, teethSeeds)
		}
		fmt.Fprintf(&table, "| %s | %d | %d | %s |\n", b, first, failures, what)
	}
	t.Logf("teeth (loss 5%%, dup 5%%, 8 faults a seed):\n%s", table.String())
}
