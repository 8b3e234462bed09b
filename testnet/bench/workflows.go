package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bedwe/bedwe/grammar"
)

// Sequential returns a workflow of n services run one after another:
// PREFIX1 PREFIX2 ... PREFIXn (paper Fig. 9).
func Sequential(prefix string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = prefix + strconv.Itoa(i+1)
	}
	return strings.Join(parts, " ")
}

// ReadsNothing returns src with reads=() on every service (each step is
// given no earlier output, so outputs and trace entries nobody ahead reads
// may leave the pack), in canonical form. src must parse.
func ReadsNothing(src string) (string, error) {
	w, err := grammar.Parse("bench", []byte(src))
	if err != nil {
		return "", fmt.Errorf("reads=(): %w", err)
	}
	grammar.WalkServices(w, func(s *grammar.Service) {
		if _, ok := s.Attr(grammar.AttrReads); !ok {
			s.Attrs = append(s.Attrs, grammar.Attr{Key: grammar.AttrReads, Value: "()"})
		}
	})
	return w.String(), nil
}

// Parallel returns one FORK of branches branches, each a sequence of length
// services (paper Fig. 10): FORK(P1_1 ... P1_length, ..., Pb_1 ...) SYNC.
// Names differ in every branch, so no output label is produced twice.
func Parallel(prefix string, branches, length int) string {
	bs := make([]string, branches)
	for b := range bs {
		steps := make([]string, length)
		for i := range steps {
			steps[i] = fmt.Sprintf("%s%d_%d", prefix, b+1, i+1)
		}
		bs[b] = strings.Join(steps, " ")
	}
	return "FORK(" + strings.Join(bs, ", ") + ") SYNC"
}

// NestedShape describes the workflow [Nested] builds.
type NestedShape struct {
	// Depth is the number of FORKs nested inside one another.
	Depth int
	// Leaves is the number of innermost branches (2^Depth).
	Leaves int
	// PerLeaf is the number of services in each innermost branch.
	PerLeaf int
	// Isolated is the number of services placed in front of a FORK
	// because total did not divide by Leaves.
	Isolated int
	// CriticalPath is the number of services on the longest path.
	CriticalPath int
}

// Nested returns total services arranged in depth nested two-way FORKs
// (paper Fig. 11), and the shape it built.
//
// The construction is a complete binary tree of FORKs: depth 1 is
// FORK(a, b) SYNC, depth 2 is FORK(FORK(a, b) SYNC, FORK(c, d) SYNC) SYNC,
// and so on, so there are 2^depth innermost branches each holding
// total / 2^depth services (with 2 nested forks and 100 services, 25 per
// branch, as in the paper). When total does not divide, the remainder
// r = total mod 2^depth runs as isolated services, one in front of each of
// the first r FORKs in breadth-first order (the outermost FORK first, then
// the FORKs one level down from left to right): they sit between a FORK and
// the FORK it contains. With 100 services that is 4 isolated services for
// depths 3, 4 and 5 (8×12, 16×6 and 32×3 in the leaves).
//
// depth 0 is a plain sequence of total services.
func Nested(prefix string, total, depth int) (string, NestedShape, error) {
	if depth < 0 || depth > 16 {
		return "", NestedShape{}, fmt.Errorf("nested workflow: depth %d out of range 0..16", depth)
	}
	leaves := 1 << depth
	per := total / leaves
	if per < 1 {
		return "", NestedShape{}, fmt.Errorf("nested workflow: %d services cannot fill %d innermost branches of depth %d", total, leaves, depth)
	}
	shape := NestedShape{Depth: depth, Leaves: leaves, PerLeaf: per, Isolated: total - per*leaves}
	if depth == 0 {
		shape.CriticalPath = total
		return Sequential(prefix, total), shape, nil
	}
	// Internal FORK nodes are numbered in breadth-first order: node k has
	// children 2k+1 and 2k+2; the first Isolated of them get one service.
	next := 0
	name := func() string {
		next++
		return prefix + strconv.Itoa(next)
	}
	var build func(k, level int) (string, int)
	build = func(k, level int) (string, int) {
		if level == depth {
			steps := make([]string, per)
			for i := range steps {
				steps[i] = name()
			}
			return strings.Join(steps, " "), per
		}
		pre, path := "", 0
		if k < shape.Isolated {
			pre, path = name()+" ", 1
		}
		a, pa := build(2*k+1, level+1)
		b, pb := build(2*k+2, level+1)
		return pre + "FORK(" + a + ", " + b + ") SYNC", path + max(pa, pb)
	}
	src, cp := build(0, 0)
	shape.CriticalPath = cp
	return src, shape, nil
}
