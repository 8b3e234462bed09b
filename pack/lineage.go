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

// Lineage names the chain a pack belongs to. Two packs of the same step
// and attempt can belong to two chains, and only their lineages tell them
// apart:
//
//   - a guardian re-routed a step while its holder, cut off, carried on:
//     the chains differ in Marks, the re-routes in their past (each
//     step's highest attempt above 0, in the order the chain met them);
//     the chain re-routed at the earlier step, or to the higher attempt
//     there, is the newer one;
//   - a join copy took over from an actor that was only cut off, and both
//     dispatched the same branch start or continuation: the packs differ
//     in Actor, the join actor that dispatched them (from the settle item
//     naming the join); the higher token (epoch, then peer ID, as join J7
//     orders actors) is the newer one.
//
// The other chain is superseded.
type Lineage struct {
	Marks []Mark
	// Actor is the join actor that dispatched the pack (nil when no join
	// did: a plain hand-off).
	Actor *JoinActor
}

// JoinActor names the actor of join Join that dispatched a pack: its
// takeover epoch and peer ID.
type JoinActor struct {
	Join  string
	Epoch int
	Actor string
}

// Lineage returns the lineage of p, read from its trace and its settle
// items (the zero Lineage for nil).
func (p *Pack) Lineage() Lineage {
	var l Lineage
	if p == nil {
		return l
	}
	for _, e := range p.Trace {
		if e.Attempt <= 0 {
			continue
		}
		if n := len(l.Marks); n > 0 && l.Marks[n-1].Path == e.Path {
			l.Marks[n-1].Attempt = max(l.Marks[n-1].Attempt, e.Attempt)
			continue
		}
		l.Marks = append(l.Marks, Mark{Path: e.Path, Attempt: e.Attempt})
	}
	for _, s := range p.Settle {
		if s.Kind == SettleJoinForwarded || s.Kind == SettleBranchStarted {
			l.Actor = &JoinActor{Join: s.Key, Epoch: s.Epoch, Actor: s.Actor}
		}
	}
	return l
}

// String renders l as "PATH@ATTEMPT,PATH@ATTEMPT[;JOIN:EPOCH:ACTOR]" (""
// when empty), the form ParseLineage reads.
func (l Lineage) String() string {
	var b strings.Builder
	for i, m := range l.Marks {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.Path)
		b.WriteByte('@')
		b.WriteString(strconv.Itoa(m.Attempt))
	}
	if a := l.Actor; a != nil {
		fmt.Fprintf(&b, ";%s:%d:%s", a.Join, a.Epoch, a.Actor)
	}
	return b.String()
}

// ParseLineage reads the form String writes.
func ParseLineage(s string) (Lineage, error) {
	var l Lineage
	marks, actor, hasActor := strings.Cut(s, ";")
	if hasActor {
		parts := strings.Split(actor, ":")
		if len(parts) != 3 || parts[0] == "" {
			return Lineage{}, fmt.Errorf("lineage %q: bad join actor %q (want JOIN:EPOCH:ACTOR)", s, actor)
		}
		epoch, err := strconv.Atoi(parts[1])
		if err != nil || epoch < 0 {
			return Lineage{}, fmt.Errorf("lineage %q: bad join epoch %q", s, parts[1])
		}
		l.Actor = &JoinActor{Join: parts[0], Epoch: epoch, Actor: parts[2]}
	}
	if marks == "" {
		return l, nil
	}
	for _, part := range strings.Split(marks, ",") {
		path, att, ok := strings.Cut(part, "@")
		a, err := strconv.Atoi(att)
		if !ok || path == "" || err != nil || a <= 0 {
			return Lineage{}, fmt.Errorf("lineage %q: bad mark %q (want PATH@ATTEMPT, attempt above 0)", s, part)
		}
		l.Marks = append(l.Marks, Mark{Path: path, Attempt: a})
	}
	return l, nil
}

// Compare orders two lineages of packs of the same step: 0 when they are
// the same chain (or cannot be told apart), +1 when l is the newer chain
// (o was superseded), -1 when l is the older one. Both share the re-routes
// before they parted; at the first mark where they differ, the higher
// attempt of the same step is newer, and of two different steps the one
// earlier in the workflow is (the other chain still ran that step at the
// attempt before); a lineage that ends where the other goes on is the
// older one. With the same marks, the packs' join actors decide when both
// name the same join: the higher (epoch, actor) is newer (join J7).
func (l Lineage) Compare(o Lineage) int {
	if c := compareMarks(l.Marks, o.Marks); c != 0 {
		return c
	}
	a, b := l.Actor, o.Actor
	if a == nil || b == nil || a.Join != b.Join {
		return 0
	}
	switch {
	case a.Epoch != b.Epoch:
		return cmpSign(a.Epoch - b.Epoch)
	case a.Actor > b.Actor:
		return 1
	case a.Actor < b.Actor:
		return -1
	}
	return 0
}

func cmpSign(d int) int {
	switch {
	case d > 0:
		return 1
	case d < 0:
		return -1
	}
	return 0
}

func compareMarks(l, o []Mark) int {
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
