package grammar

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// gen builds random valid workflows for property tests and benchmarks. Every
// service gets a unique label so parallel branches never clash, and guards
// read only input, so every generated tree passes the static checks.
type gen struct {
	r        *rand.Rand
	n        int // services made so far
	maxDepth int
}

func newGen(seed uint64, maxDepth int) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), maxDepth: maxDepth}
}

var (
	genNameParts = []string{"S", "mProject_ID", "tile-index.v", "x", "FORKED", "IFfy", "été", "a.b-c_"}
	genGuards    = []string{
		`input.x > 3`,
		`input.s == "a) b, c"`,
		`input.s != 'it\'s ( here'`,
		"len(input.list) >= 2 || input.flag",
		`all(input.xs, {# > (1)})`,
		`input.m["k"] in ["a", "b"]`,
		"input.raw == `x)(y`",
		`not input.off`,
	}
	genDurations = []string{"1s", "500ms", "1m30s", "2h0m0s", "1.5s", "10µs"}
)

func (g *gen) service() *Service {
	g.n++
	s := &Service{Name: fmt.Sprintf("%s%d", genNameParts[g.r.IntN(len(genNameParts))], g.n)}
	if g.r.IntN(4) == 0 {
		keys := g.r.Perm(len(KnownAttrs))[:1+g.r.IntN(3)]
		for _, k := range keys {
			key := KnownAttrs[k]
			var v string
			switch key {
			case AttrTimeout, AttrExpect:
				v = genDurations[g.r.IntN(len(genDurations))]
			case AttrRetries:
				v = fmt.Sprint(g.r.IntN(MaxRetries + 1))
			case AttrBackoff:
				v = "100ms.." + genDurations[g.r.IntN(len(genDurations)-1)]
			case AttrOnce:
				v = []string{"true", "false"}[g.r.IntN(2)]
			case AttrOut:
				v = fmt.Sprintf("lbl-%d", g.n)
			case AttrReads:
				v = "()"
			}
			canon, msg := canonicalAttr(key, v)
			if msg != "" {
				panic(msg)
			}
			s.Attrs = append(s.Attrs, Attr{Key: key, Value: canon})
		}
	}
	return s
}

// workflow returns a sequence of 1..maxLen steps at nesting depth d.
func (g *gen) workflow(d, maxLen int) *Workflow {
	w := &Workflow{}
	n := 1 + g.r.IntN(maxLen)
	for range n {
		w.Steps = append(w.Steps, g.step(d))
	}
	return w
}

func (g *gen) step(d int) Step {
	if d >= g.maxDepth || g.r.IntN(3) > 0 {
		return g.service()
	}
	arms := 2 + g.r.IntN(3)
	branches := func() []*Workflow {
		out := make([]*Workflow, arms)
		for i := range out {
			out[i] = g.workflow(d+1, 3)
		}
		return out
	}
	switch g.r.IntN(4) {
	case 0:
		return &Fork{Branches: branches()}
	case 1:
		return &First{Branches: branches()}
	case 2:
		return &Failover{Branches: branches()}
	}
	c := &Choice{}
	guarded := g.r.IntN(2) == 0
	for i := range arms {
		a := &Arm{Body: g.workflow(d+1, 3)}
		if guarded {
			a.Kind = ArmIf
			a.Guard = genGuards[g.r.IntN(len(genGuards))]
			if i == arms-1 && g.r.IntN(2) == 0 {
				a.Kind, a.Guard = ArmElse, ""
			}
		}
		c.Arms = append(c.Arms, a)
	}
	return c
}

// sequenceOf returns a workflow of n services, with a FORK every 100.
func sequenceOf(n int) *Workflow {
	w := &Workflow{}
	for i := 0; i < n; i++ {
		if i%100 == 50 && i+2 < n {
			w.Steps = append(w.Steps, &Fork{Branches: []*Workflow{
				{Steps: []Step{&Service{Name: fmt.Sprintf("mDiff_ID%07d", i)}}},
				{Steps: []Step{&Service{Name: fmt.Sprintf("mDiff_ID%07d", i+1)}}},
			}})
			i++
			continue
		}
		w.Steps = append(w.Steps, &Service{Name: fmt.Sprintf("mProject_ID%07d", i), Attrs: []Attr{{Key: AttrTimeout, Value: "30s"}}})
	}
	return w
}

// nestedSource returns depth nested patterns, cycling through the kinds.
func nestedSource(depth int) string {
	var b strings.Builder
	closers := make([]string, 0, depth)
	for i := range depth {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "FORK(A%d, ", i)
			closers = append(closers, ") SYNC")
		case 1:
			fmt.Fprintf(&b, "CHOICE(A%d, ", i)
			closers = append(closers, ") ENDCHOICE")
		case 2:
			fmt.Fprintf(&b, "FIRST(A%d, ", i)
			closers = append(closers, ") ENDFIRST")
		case 3:
			fmt.Fprintf(&b, "FAILOVER(A%d, ", i)
			closers = append(closers, ") ENDFAILOVER")
		}
	}
	b.WriteString("leaf")
	for i := len(closers) - 1; i >= 0; i-- {
		b.WriteString(closers[i])
	}
	return b.String()
}
