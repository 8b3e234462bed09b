package pack

import (
	"fmt"
	"strconv"
	"strings"
)

// Mark is one re-route in a chain's past: step Path ran at Attempt > 0,
// because a guardian re-routed an earlier attempt of it.
type Mark struct {
	Path    string
	Attempt int
}

// Lineage names the chain a pack belongs to: the re-routes in its past,
// in the order the chain met them (each step's highest attempt above 0).
// Two packs of the same step and attempt can belong to two chains — a
// guardian re-routed a step while its holder, cut off, carried on — and
// only their lineages tell them apart: the chain that was re-routed at
// the earlier step (or to the higher attempt there) is the newer one, and
// the other one is superseded (issue 12, reliability-core "Left undone" 7).
type Lineage []Mark

// Lineage returns the lineage of p, read from its trace (nil for nil).
func (p *Pack) Lineage() Lineage {
	var l Lineage
	if p == nil {
		return nil
	}
	for _, e := range p.Trace {
		if e.Attempt <= 0 {
			continue
		}
		if n := len(l); n > 0 && l[n-1].Path == e.Path {
			l[n-1].Attempt = max(l[n-1].Attempt, e.Attempt)
			continue
		}
		l = append(l, Mark{Path: e.Path, Attempt: e.Attempt})
	}
	return l
}

// String renders l as "PATH@ATTEMPT,PATH@ATTEMPT" ("" when empty), the form
// ParseLineage reads.
func (l Lineage) String() string {
	var b strings.Builder
	for i, m := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.Path)
		b.WriteByte('@')
		b.WriteString(strconv.Itoa(m.Attempt))
	}
	return b.String()
}

// ParseLineage reads the form String writes.
func ParseLineage(s string) (Lineage, error) {
	if s == "" {
		return nil, nil
	}
	var l Lineage
	for _, part := range strings.Split(s, ",") {
		path, att, ok := strings.Cut(part, "@")
		a, err := strconv.Atoi(att)
		if !ok || path == "" || err != nil || a <= 0 {
			return nil, fmt.Errorf("lineage %q: bad mark %q (want PATH@ATTEMPT, attempt above 0)", s, part)
		}
		l = append(l, Mark{Path: path, Attempt: a})
	}
	return l, nil
}

// Compare orders two lineages of packs of the same step: 0 when they are
// the same chain, +1 when l is the newer chain (o was superseded by a
// re-route l descends from), -1 when l is the older one. Both share the
// re-routes before they parted; at the first mark where they differ, the
// higher attempt of the same step is newer, and of two different steps the
// one earlier in the workflow is (the other chain still ran that step at
// the attempt before). A lineage that ends where the other goes on is the
// older one.
func (l Lineage) Compare(o Lineage) int {
	for i := 0; ; i++ {
		switch {
		case i == len(l) && i == len(o):
			return 0
		case i == len(l):
			return -1
		case i == len(o):
			return 1
		}
		a, b := l[i], o[i]
		switch {
		case a == b:
			continue
		case a.Path == b.Path && a.Attempt > b.Attempt:
			return 1
		case a.Path == b.Path:
			return -1
		case PathBefore(a.Path, b.Path):
			return 1
		default:
			return -1
		}
	}
}

// PathBefore reports whether step path a comes before step path b in
// workflow order (paths from grammar.AssignPaths: "3", "3.1/0", "3.1/2.0/1";
// numbers compared in order, a prefix first).
func PathBefore(a, b string) bool {
	na, nb := pathNumbers(a), pathNumbers(b)
	for i := 0; i < len(na) && i < len(nb); i++ {
		if na[i] != nb[i] {
			return na[i] < nb[i]
		}
	}
	if len(na) != len(nb) {
		return len(na) < len(nb)
	}
	return a < b // unparsable paths: any fixed order
}

// pathNumbers splits a step path into its numbers ("3.1/0" → 3, 1, 0); a
// part that is not a number counts as -1.
func pathNumbers(path string) []int {
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '/' })
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			n = -1
		}
		out[i] = n
	}
	return out
}
