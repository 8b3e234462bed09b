package grammar

import (
	"fmt"
	"sort"
)

// Check runs the static checks on a tree built in code (Parse runs them
// itself): names and attributes are valid, every pattern has at least two and
// at most lim.MaxArms branches, CHOICE arms are all unguarded or all
// guarded with ELSE only last, no output label is produced by two parallel
// branches of one FORK or FIRST, every guard compiles and names only labels
// produced before it, and the tree is within lim. The error, if any, is an
// ErrorList.
func Check(w *Workflow, lim Limits) error {
	sink := &errorSink{}
	c := &checker{sink: sink, lim: lim.resolved(), code: true}
	c.run(w)
	return sink.err()
}

// checker walks a tree once, tracking which output labels are available to
// guards (avail, with an undo stack for leaving branches).
type checker struct {
	sink *errorSink
	lim  Limits
	code bool // tree built in code: also check what the parser guarantees
	// residual: the tree is what is left of a checked workflow, so labels
	// produced before it count as available (ParseResidual).
	residual bool
	services int
	avail    map[string]int
	stack    []string
}

func (c *checker) run(w *Workflow) {
	c.avail = map[string]int{}
	if w == nil || len(w.Steps) == 0 {
		c.sink.add(Pos{}, "empty workflow")
		return
	}
	c.seq(w, 0, func() string { return "workflow" }, nil)
}

func (c *checker) push(label string) {
	c.avail[label]++
	c.stack = append(c.stack, label)
}

// undo forgets the labels pushed since mark.
func (c *checker) undo(mark int) {
	for _, l := range c.stack[mark:] {
		if c.avail[l]--; c.avail[l] == 0 {
			delete(c.avail, l)
		}
	}
	c.stack = c.stack[:mark]
}

// labels returns the labels available now, sorted.
func (c *checker) labels() []string {
	out := make([]string, 0, len(c.avail))
	for l := range c.avail {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// seq checks a sequence at nesting depth. When produced is not nil it
// records there the labels the sequence produces (including inside its
// patterns), each with its first producer. where names the sequence for
// errors.
func (c *checker) seq(w *Workflow, depth int, where func() string, produced map[string]*Service) {
	if w == nil || len(w.Steps) == 0 {
		c.sink.add(Pos{}, "empty %s", where())
		return
	}
	for _, s := range w.Steps {
		if c.sink.full() {
			return
		}
		switch s := s.(type) {
		case *Service:
			c.service(s)
			l := s.Label()
			c.push(l)
			if _, ok := produced[l]; !ok && produced != nil {
				produced[l] = s
			}
		case *Fork:
			c.branches("FORK", s.Pos, s.Branches, depth+1, true, produced)
		case *First:
			c.branches("FIRST", s.Pos, s.Branches, depth+1, true, produced)
		case *Failover:
			c.branches("FAILOVER", s.Pos, s.Branches, depth+1, false, produced)
		case *Choice:
			c.choice(s, depth+1, produced)
		default:
			c.sink.add(Pos{}, "invalid step %T in %s", s, where())
		}
	}
}

func (c *checker) service(s *Service) {
	c.services++
	if c.services == c.lim.MaxServices+1 && c.lim.MaxServices >= 0 {
		c.sink.add(s.Pos, "service count exceeds the limit of %d", c.lim.MaxServices)
	}
	if c.code {
		if msg := checkName(s.Name); msg != "" {
			c.sink.add(s.Pos, "service %s", msg)
		}
		seen := map[string]bool{}
		for _, a := range s.Attrs {
			if _, msg := canonicalAttr(a.Key, a.Value); msg != "" {
				c.sink.add(s.Pos, "%s: %s", s.Name, msg)
			} else if seen[a.Key] {
				c.sink.add(s.Pos, "duplicate attribute %s on %s", a.Key, s.Name)
			}
			seen[a.Key] = true
		}
	}
	if exceeds(len(s.Name), c.lim.MaxNameLen) {
		c.sink.add(s.Pos, "service name %s is %d bytes long, exceeds the limit of %d", short(s.Name), len(s.Name), c.lim.MaxNameLen)
	}
	if out, ok := s.Attr(AttrOut); ok && exceeds(len(out), c.lim.MaxNameLen) {
		c.sink.add(s.Pos, "output label %s is %d bytes long, exceeds the limit of %d", short(out), len(out), c.lim.MaxNameLen)
	}
	if reads, ok := s.Reads(); ok && !c.residual {
		for _, l := range reads {
			if c.avail[l] == 0 {
				c.sink.add(s.Pos, "%s reads %q, which no step before it produces%s", s.Name, l, knownHint(c.labels()))
			}
		}
	}
}

// short quotes s, cutting it to a readable length.
func short(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q...", s[:40])
	}
	return fmt.Sprintf("%q", s)
}

// pattern checks what every pattern shares: depth and arm counts. It
// returns false when the pattern must not be descended into.
func (c *checker) pattern(kind string, pos Pos, n, depth int, what string) bool {
	if exceeds(depth, c.lim.MaxDepth) {
		c.sink.add(pos, "nesting depth %d exceeds the limit of %d", depth, c.lim.MaxDepth)
		return false
	}
	if n < 2 {
		c.sink.add(pos, "%s needs at least 2 %s, found %d", kind, what, n)
	}
	if exceeds(n, c.lim.MaxArms) {
		c.sink.add(pos, "%s has %d %s, exceeds the limit of %d", kind, n, what, c.lim.MaxArms)
	}
	return true
}

// branches checks FORK, FIRST and FAILOVER. parallel marks the kinds whose
// branches run at the same time and so must not share output labels.
func (c *checker) branches(kind string, pos Pos, list []*Workflow, depth int, parallel bool, produced map[string]*Service) {
	if !c.pattern(kind, pos, len(list), depth, "branches") {
		return
	}
	mark := len(c.stack)
	owner := map[string]int{}
	union := map[string]*Service{}
	for j, b := range list {
		bp := map[string]*Service{}
		c.seq(b, depth, func() string { return fmt.Sprintf("%s branch %d", kind, j+1) }, bp)
		c.undo(mark)
		for l, svc := range bp {
			if k, ok := owner[l]; ok && parallel && k != j {
				c.sink.add(svc.Pos, "output label %q is produced by parallel branches %d and %d of %s at %s (set out=... to tell them apart)", l, k+1, j+1, kind, pos)
				continue
			}
			if _, ok := owner[l]; !ok {
				owner[l] = j
				union[l] = svc
			}
		}
	}
	c.merge(union, produced)
}

// merge makes the labels of a finished pattern available and records them
// as produced by the enclosing sequence.
func (c *checker) merge(union, produced map[string]*Service) {
	for l, s := range union {
		c.push(l)
		if _, ok := produced[l]; !ok && produced != nil {
			produced[l] = s
		}
	}
}

func (c *checker) choice(ch *Choice, depth int, produced map[string]*Service) {
	if !c.pattern("CHOICE", ch.Pos, len(ch.Arms), depth, "arms") {
		return
	}
	firstPlain, guarded := -1, false
	for i, a := range ch.Arms {
		if a == nil {
			c.sink.add(ch.Pos, "CHOICE arm %d is nil", i+1)
			return
		}
		switch a.Kind {
		case ArmPlain:
			if firstPlain < 0 {
				firstPlain = i
			}
		case ArmIf:
			guarded = true
		case ArmElse:
			guarded = true
			if i != len(ch.Arms)-1 {
				c.sink.add(a.Pos, "ELSE must be the last arm of CHOICE at %s", ch.Pos)
			}
		default:
			c.sink.add(a.Pos, "CHOICE arm %d has invalid kind %d", i+1, a.Kind)
		}
	}
	if guarded && firstPlain >= 0 {
		c.sink.add(ch.Arms[firstPlain].Pos, "CHOICE at %s mixes guarded and unguarded arms: arm %d needs IF(...) or ELSE (or drop every guard)", ch.Pos, firstPlain+1)
	}
	mark := len(c.stack)
	union := map[string]*Service{}
	for i, a := range ch.Arms {
		if a.Kind == ArmIf {
			c.guard(a)
		}
		ap := map[string]*Service{}
		c.seq(a.Body, depth, func() string { return fmt.Sprintf("CHOICE arm %d", i+1) }, ap)
		c.undo(mark)
		for l, s := range ap {
			if _, ok := union[l]; !ok {
				union[l] = s
			}
		}
	}
	c.merge(union, produced)
}

// guard checks that an IF arm's expression is well formed, compiles and
// names only labels available here.
func (c *checker) guard(a *Arm) {
	if c.code {
		if a.Guard == "" {
			c.sink.add(a.Pos, "empty guard expression")
			return
		}
		if end, msg := scanGuard(a.Guard+")", 0); msg != "" || end != len(a.Guard) {
			c.sink.add(a.Pos, "guard %s is not a balanced expression", short(a.Guard))
			return
		}
	}
	known := func(l string) bool { return c.residual || c.avail[l] > 0 }
	if _, err := compileGuard(a.Guard, known, c.labels); err != nil {
		c.sink.add(a.Pos, "%v", err)
	}
}
