package wfcommons

import (
	"cmp"
	"slices"
	"time"
)

// spKind tells the kind of a node of the series-parallel decomposition tree.
type spKind uint8

const (
	spLeaf     spKind = iota // one task
	spSeries                 // kids run one after the other
	spParallel               // kids run side by side
)

// spNode is a node of the decomposition tree. Kids of a series node are
// leaves or parallel nodes; kids of a parallel node are leaves or series
// nodes (the tree is kept normalised so that it maps 1:1 onto the AST).
type spNode struct {
	kind spKind
	pos  int // leaf: topological position of the task
	kids []*spNode
	cp   time.Duration // longest runtime path through the node
}

// decomposer builds the tree for a dag. A "piece" is a set of positions,
// always convex (whatever lies on a path between two of its members is a
// member), so the order restricted to a piece is the reachability inside it,
// and every added dependency goes between the two sides of one cut.
type decomposer struct {
	g      *dag
	stamp  []int // position -> id of the piece last analysed
	seen   []int // position -> id of the piece whose BFS visited it
	loc    []int // position -> index inside that piece
	mask   []uint64
	nextID int
	forced int // order pairs added by forced cuts
	cuts   int // forced cuts made
}

func newDecomposer(g *dag) *decomposer {
	return &decomposer{
		g:     g,
		stamp: make([]int, g.n),
		seen:  make([]int, g.n),
		loc:   make([]int, g.n),
		mask:  make([]uint64, (g.n+63)/64),
	}
}

// decompose returns the tree of piece s (ascending positions). budget is the
// critical-path length the piece may take without lengthening the whole
// workflow more than already decided; it steers forced cuts.
func (d *decomposer) decompose(s []int, budget time.Duration) *spNode {
	if len(s) == 1 {
		return &spNode{kind: spLeaf, pos: s[0], cp: d.g.rt[s[0]]}
	}
	d.nextID++
	id := d.nextID
	for i, p := range s {
		d.stamp[p] = id
		d.loc[p] = i
	}
	// Parallel: the comparability graph of the piece falls apart.
	if comps := d.components(s, id); comps != nil {
		n := &spNode{kind: spParallel}
		for _, c := range comps {
			k := d.decompose(c, budget)
			n.kids = append(n.kids, k)
			n.cp = max(n.cp, k.cp)
		}
		return n
	}
	pr := d.profile(s, id)
	// Series: cut points where everything before precedes everything after.
	if parts := pr.seriesParts(s); len(parts) > 1 {
		return d.series(parts, pr, budget)
	}
	// Prime: no exact decomposition; the piece needs added dependencies.
	return d.forceCut(s, pr, budget)
}

// components returns the weakly connected components of piece id in the
// Hasse diagram (equal to the comparability components, the piece being
// convex), each sorted and ordered by smallest member; nil if connected.
func (d *decomposer) components(s []int, id int) [][]int {
	var comps [][]int
	for _, p := range s {
		if d.seen[p] == id {
			continue
		}
		d.seen[p] = id
		comp := []int{p}
		for k := 0; k < len(comp); k++ {
			x := comp[k]
			for _, nbs := range [2][]int{d.g.succ[x], d.g.pred[x]} {
				for _, y := range nbs {
					if d.stamp[y] == id && d.seen[y] != id {
						d.seen[y] = id
						comp = append(comp, y)
					}
				}
			}
		}
		if len(comp) == len(s) {
			return nil
		}
		slices.Sort(comp)
		comps = append(comps, comp)
	}
	return comps
}

// profile holds, for each member i of a connected piece (by index into the
// piece), the counts and path lengths the cut search needs.
type profile struct {
	k        int
	dn, up   []int           // descendants / ancestors inside the piece
	rt       []time.Duration // runtime
	ef, tail []time.Duration // longest path ending / starting at i, inside
	dep, hgt []int           // unweighted versions of ef and tail
	cp       time.Duration
}

func (d *decomposer) profile(s []int, id int) *profile {
	k := len(s)
	g := d.g
	pr := &profile{
		k: k, dn: make([]int, k), up: make([]int, k),
		rt: make([]time.Duration, k), ef: make([]time.Duration, k), tail: make([]time.Duration, k),
		dep: make([]int, k), hgt: make([]int, k),
	}
	hi := s[k-1] >> 6
	lo := s[0] >> 6
	for _, p := range s {
		set(d.mask, p)
	}
	for i, p := range s {
		pr.dn[i] = andCount(g.desc.row(p), d.mask, p>>6, hi)
		pr.up[i] = andCount(g.anc.row(p), d.mask, lo, p>>6)
	}
	for _, p := range s {
		unset(d.mask, p)
	}
	for i, p := range s {
		pr.rt[i] = g.rt[p]
		var start time.Duration
		dep := 0
		for _, q := range g.pred[p] {
			if d.stamp[q] == id {
				start = max(start, pr.ef[d.loc[q]])
				dep = max(dep, pr.dep[d.loc[q]])
			}
		}
		pr.ef[i] = start + g.rt[p]
		pr.dep[i] = dep + 1
		pr.cp = max(pr.cp, pr.ef[i])
	}
	for i := k - 1; i >= 0; i-- {
		p := s[i]
		var after time.Duration
		h := 0
		for _, q := range g.succ[p] {
			if d.stamp[q] == id {
				after = max(after, pr.tail[d.loc[q]])
				h = max(h, pr.hgt[d.loc[q]])
			}
		}
		pr.tail[i] = after + g.rt[p]
		pr.hgt[i] = h + 1
	}
	return pr
}

// seriesParts splits piece s at every exact series cut. Positions ascend
// along every dependency, so s is a linear extension, and any series cut
// (everything before precedes everything after) is a prefix of it. Moving
// member x across a prefix cut changes the number of ordered pairs crossing
// it by dn[x] - up[x]; the cut is exact when all prefix×suffix pairs are
// ordered.
func (pr *profile) seriesParts(s []int) [][]int {
	var parts [][]int
	cross, start := 0, 0
	for i := 0; i < pr.k-1; i++ {
		cross += pr.dn[i] - pr.up[i]
		if cross == (i+1)*(pr.k-i-1) {
			parts = append(parts, s[start:i+1])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// series decomposes exact series parts left to right, handing each the
// budget left after the parts before it (as converted) and the lower bounds
// of the parts after it.
func (d *decomposer) series(parts [][]int, pr *profile, budget time.Duration) *spNode {
	lbs := make([]time.Duration, len(parts))
	var rest, prev time.Duration
	i := 0
	for j, part := range parts {
		var top time.Duration
		for range part {
			top = max(top, pr.ef[i])
			i++
		}
		lbs[j] = top - prev
		prev = top
		rest += lbs[j]
	}
	n := &spNode{kind: spSeries}
	for j, part := range parts {
		rest -= lbs[j]
		k := d.decompose(part, budget-n.cp-rest)
		n.append(k)
	}
	return n
}

// cut is one candidate split of a prime piece: the first at+1 members of
// order ord run before the rest.
type cut struct {
	ord, at    int
	added      int           // order pairs the cut adds
	p, q       int           // sizes of the two sides
	cpP, cpQ   time.Duration // critical paths of the two sides (if exact)
	considered bool
}

// better reports whether a is a better cut than b under budget: cuts that
// keep the piece within budget beat those that do not; among those within
// budget the lowest share of added pairs wins, then the shorter path; among
// those over budget the shorter path wins, then the lowest share.
//
// The share (added pairs / all prefix×suffix pairs), not the count, is what
// is minimised: the count favours peeling one task off at a time, and
// repeated peels serialise tasks into chains that add more pairs in total
// and lengthen the path (on montage: 574 pairs and +3.0 % by count, 385
// pairs and +0.0 % by share).
func better(a, b cut, budget time.Duration) bool {
	if !b.considered {
		return true
	}
	fa, fb := a.cpP+a.cpQ <= budget, b.cpP+b.cpQ <= budget
	if fa != fb {
		return fa
	}
	if fa {
		if c := cmpDensity(a, b); c != 0 {
			return c < 0
		}
		return a.cpP+a.cpQ < b.cpP+b.cpQ
	}
	if a.cpP+a.cpQ != b.cpP+b.cpQ {
		return a.cpP+a.cpQ < b.cpP+b.cpQ
	}
	return cmpDensity(a, b) < 0
}

// cmpDensity compares the share of the cuts' prefix×suffix pairs that they
// add: a cut that is nearly an exact series cut has a low share.
func cmpDensity(a, b cut) int {
	// a.added/(a.p*a.q) vs b.added/(b.p*b.q), in integers.
	return cmp.Compare(a.added*b.p*b.q, b.added*a.p*a.q)
}

// orders returns linear extensions of the piece to draw cuts from: every
// prefix of a linear extension is a down-set, so "prefix before rest" is a
// valid cut. Each is sorted by a key that never decreases along a
// dependency (ties by position), so it is a linear extension.
func (pr *profile) orders() [][]int {
	// es is the earliest start, ls the latest start (cp - tail), and
	// ls + rt the latest finish; es + ls is twice the middle of the window
	// in which the task can start.
	es := func(i int) int64 { return int64(pr.ef[i] - pr.rt[i]) }
	ls := func(i int) int64 { return int64(pr.cp - pr.tail[i]) }
	keys := []func(i int) int64{
		func(i int) int64 { return int64(pr.dep[i]) },  // ASAP level
		func(i int) int64 { return -int64(pr.hgt[i]) }, // ALAP level
		es,
		func(i int) int64 { return int64(pr.ef[i]) }, // earliest finish
		ls,
		func(i int) int64 { return ls(i) + int64(pr.rt[i]) }, // latest finish
		func(i int) int64 { return es(i) + ls(i) },           // window middle
	}
	ident := make([]int, pr.k)
	for i := range ident {
		ident[i] = i
	}
	out := make([][]int, 0, len(keys)+1)
	out = append(out, ident) // by position
	key := make([]int64, pr.k)
	for _, f := range keys {
		for i := range key {
			key[i] = f(i)
		}
		ord := slices.Clone(ident)
		slices.SortFunc(ord, func(a, b int) int {
			if c := cmp.Compare(key[a], key[b]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		out = append(out, ord)
	}
	return out
}

// forceCut splits a prime piece at the best prefix cut of several linear
// extensions, counts the pairs it adds, and decomposes both sides.
func (d *decomposer) forceCut(s []int, pr *profile, budget time.Duration) *spNode {
	k := pr.k
	orders := pr.orders()
	var best cut
	suf := make([]time.Duration, k+1)
	for oi, ord := range orders {
		suf[k] = 0
		for i := k - 1; i >= 0; i-- {
			suf[i] = max(suf[i+1], pr.tail[ord[i]])
		}
		cross := 0
		var pre time.Duration
		for i := 0; i < k-1; i++ {
			x := ord[i]
			cross += pr.dn[x] - pr.up[x]
			pre = max(pre, pr.ef[x])
			c := cut{ord: oi, at: i, p: i + 1, q: k - i - 1, added: (i+1)*(k-i-1) - cross, cpP: pre, cpQ: suf[i+1], considered: true}
			if better(c, best, budget) {
				best = c
			}
		}
	}
	ord := orders[best.ord]
	p := make([]int, 0, best.at+1)
	for _, x := range ord[:best.at+1] {
		p = append(p, s[x])
	}
	q := make([]int, 0, k-best.at-1)
	for _, x := range ord[best.at+1:] {
		q = append(q, s[x])
	}
	slices.Sort(p)
	slices.Sort(q)
	d.forced += best.added
	d.cuts++
	slack := max(0, budget-best.cpP-best.cpQ)
	pn := d.decompose(p, best.cpP+slack/2)
	qn := d.decompose(q, budget-pn.cp)
	n := &spNode{kind: spSeries}
	n.append(pn)
	n.append(qn)
	return n
}

// append adds k to series node n, splicing k's kids if k is itself a series.
func (n *spNode) append(k *spNode) {
	if k.kind == spSeries {
		n.kids = append(n.kids, k.kids...)
	} else {
		n.kids = append(n.kids, k)
	}
	n.cp += k.cp
}
