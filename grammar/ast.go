// Package grammar owns the bedwe workflow language: its lexer, parser, abstract
// syntax tree, canonical printer, static checks and Peel, the operation that
// splits a workflow into the head pattern to run now and the residual to
// forward (the BEDWE paper, §3.1).
//
// The package knows nothing about networks, nodes or data encodings: it turns
// text into a checked tree and trees back into text.
package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Pos is a position in the source text. Line and Col are 1-based; Col counts
// bytes. The zero Pos means "no position" (trees built in code).
type Pos struct {
	Offset int
	Line   int
	Col    int
}

// String renders the position as LINE:COL.
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Workflow is a non-empty sequence of steps. It is both a whole workflow and
// a branch or arm inside a pattern.
type Workflow struct {
	Steps []Step
}

// Step is one element of a sequence: a *Service, *Fork, *Choice, *First or
// *Failover.
type Step interface {
	// Position is where the step starts in the source.
	Position() Pos
	// String prints the step in canonical single-line source form.
	String() string
	// CopyStep returns a deep copy.
	CopyStep() Step
	step()
}

// Attr is one service attribute, KEY=VALUE. Value holds the canonical text of
// the value (durations normalised by the parser).
type Attr struct {
	Key   string
	Value string
}

// Known attribute keys.
const (
	AttrTimeout = "timeout" // per-attempt time limit, a duration: timeout=30s
	AttrRetries = "retries" // extra attempts after a failure, an integer: retries=3
	AttrBackoff = "backoff" // retry delay range MIN..MAX, durations: backoff=500ms..10s
	AttrOnce    = "once"    // at-most-once: never re-run on unknown outcome: once=true
	AttrOut     = "out"     // output label; defaults to the service name: out=tiles
	AttrExpect  = "expect"  // expected run time, used for power-aware peer choice: expect=2m
	AttrReads   = "reads"   // the earlier outputs the step reads: reads=(tiles, index), reads=()
)

// Service is a call of a named service, possibly with attributes.
type Service struct {
	Pos   Pos
	Name  string
	Attrs []Attr
	// Path identifies this step inside the submitted workflow (for example
	// "3/f1/0"); it is assigned by AssignPaths, is not printed, and travels
	// with residual workflows so that every invocation keeps a stable
	// idempotency key.
	Path string
}

// Fork runs its branches in parallel and waits for all of them at SYNC.
type Fork struct {
	Pos      Pos
	Branches []*Workflow
}

// ArmKind tells how a CHOICE arm is selected.
type ArmKind int

const (
	// ArmPlain is an unguarded arm (the paper's form): chosen by availability.
	ArmPlain ArmKind = iota
	// ArmIf is guarded by an expr-lang boolean expression.
	ArmIf
	// ArmElse is taken when no guard holds.
	ArmElse
)

// Arm is one alternative of a CHOICE.
type Arm struct {
	Pos   Pos
	Kind  ArmKind
	Guard string // expression source text, for ArmIf only
	Body  *Workflow
}

// Choice runs exactly one of its arms.
type Choice struct {
	Pos  Pos
	Arms []*Arm
}

// First starts all branches and keeps the first success, cancelling the rest.
type First struct {
	Pos      Pos
	Branches []*Workflow
}

// Failover tries its branches in order until one succeeds.
type Failover struct {
	Pos      Pos
	Branches []*Workflow
}

func (*Service) step()  {}
func (*Fork) step()     {}
func (*Choice) step()   {}
func (*First) step()    {}
func (*Failover) step() {}

// Position implements Step.
func (s *Service) Position() Pos { return s.Pos }

// Position implements Step.
func (f *Fork) Position() Pos { return f.Pos }

// Position implements Step.
func (c *Choice) Position() Pos { return c.Pos }

// Position implements Step.
func (f *First) Position() Pos { return f.Pos }

// Position implements Step.
func (f *Failover) Position() Pos { return f.Pos }

// String prints the workflow in canonical single-line form.
func (w *Workflow) String() string {
	var b strings.Builder
	w.write(&b)
	return b.String()
}

func (w *Workflow) write(b *strings.Builder) {
	for i, s := range w.Steps {
		if i > 0 {
			b.WriteByte(' ')
		}
		writeStep(b, s)
	}
}

func writeStep(b *strings.Builder, s Step) {
	switch s := s.(type) {
	case *Service:
		s.write(b)
	case *Fork:
		writeBranches(b, "FORK", s.Branches, "SYNC")
	case *First:
		writeBranches(b, "FIRST", s.Branches, "ENDFIRST")
	case *Failover:
		writeBranches(b, "FAILOVER", s.Branches, "ENDFAILOVER")
	case *Choice:
		b.WriteString("CHOICE(")
		for i, a := range s.Arms {
			if i > 0 {
				b.WriteString(", ")
			}
			switch a.Kind {
			case ArmIf:
				b.WriteString("IF(")
				b.WriteString(a.Guard)
				b.WriteString(") ")
			case ArmElse:
				b.WriteString("ELSE ")
			}
			a.Body.write(b)
		}
		b.WriteString(") ENDCHOICE")
	}
}

func writeBranches(b *strings.Builder, open string, branches []*Workflow, close string) {
	b.WriteString(open)
	b.WriteByte('(')
	for i, br := range branches {
		if i > 0 {
			b.WriteString(", ")
		}
		br.write(b)
	}
	b.WriteString(") ")
	b.WriteString(close)
}

func (s *Service) write(b *strings.Builder) {
	b.WriteString(s.Name)
	if len(s.Attrs) == 0 {
		return
	}
	b.WriteByte('[')
	for i, a := range s.Attrs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.Key)
		b.WriteByte('=')
		b.WriteString(a.Value)
	}
	b.WriteByte(']')
}

// String implements Step.
func (s *Service) String() string { var b strings.Builder; s.write(&b); return b.String() }

// String implements Step.
func (f *Fork) String() string { var b strings.Builder; writeStep(&b, f); return b.String() }

// String implements Step.
func (c *Choice) String() string { var b strings.Builder; writeStep(&b, c); return b.String() }

// String implements Step.
func (f *First) String() string { var b strings.Builder; writeStep(&b, f); return b.String() }

// String implements Step.
func (f *Failover) String() string { var b strings.Builder; writeStep(&b, f); return b.String() }

// Copy returns a deep copy of the workflow (nil stays nil).
func (w *Workflow) Copy() *Workflow {
	if w == nil {
		return nil
	}
	out := &Workflow{Steps: make([]Step, len(w.Steps))}
	for i, s := range w.Steps {
		out.Steps[i] = s.CopyStep()
	}
	return out
}

func copyBranches(in []*Workflow) []*Workflow {
	out := make([]*Workflow, len(in))
	for i, w := range in {
		out[i] = w.Copy()
	}
	return out
}

// CopyStep implements Step.
func (s *Service) CopyStep() Step {
	c := *s
	c.Attrs = append([]Attr(nil), s.Attrs...)
	return &c
}

// CopyStep implements Step.
func (f *Fork) CopyStep() Step { return &Fork{Pos: f.Pos, Branches: copyBranches(f.Branches)} }

// CopyStep implements Step.
func (f *First) CopyStep() Step { return &First{Pos: f.Pos, Branches: copyBranches(f.Branches)} }

// CopyStep implements Step.
func (f *Failover) CopyStep() Step {
	return &Failover{Pos: f.Pos, Branches: copyBranches(f.Branches)}
}

// CopyStep implements Step.
func (c *Choice) CopyStep() Step {
	out := &Choice{Pos: c.Pos, Arms: make([]*Arm, len(c.Arms))}
	for i, a := range c.Arms {
		out.Arms[i] = &Arm{Pos: a.Pos, Kind: a.Kind, Guard: a.Guard, Body: a.Body.Copy()}
	}
	return out
}

// Attr returns the value of attribute key and whether it is set.
func (s *Service) Attr(key string) (string, bool) {
	for _, a := range s.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Label is the name under which the service's output is recorded: the out
// attribute when set, else the service name.
func (s *Service) Label() string {
	if v, ok := s.Attr(AttrOut); ok {
		return v
	}
	return s.Name
}

// Reads returns the output labels the step declares it reads (reads=) and
// whether it declares any: a step without the attribute reads every
// earlier output on its path; with reads=() it reads none. The workflow
// input is given to every step either way.
func (s *Service) Reads() ([]string, bool) {
	v, ok := s.Attr(AttrReads)
	if !ok {
		return nil, false
	}
	labels, msg := parseReads(v)
	if msg != "" {
		return nil, false
	}
	return labels, true
}

// Timeout is the per-attempt time limit (0 = the node's default).
func (s *Service) Timeout() time.Duration { return s.duration(AttrTimeout) }

// Expect is the declared expected run time (0 = unknown).
func (s *Service) Expect() time.Duration { return s.duration(AttrExpect) }

// Retries is the number of extra attempts after a failure.
func (s *Service) Retries() int {
	v, _ := s.Attr(AttrRetries)
	n, _ := strconv.Atoi(v)
	return n
}

// Backoff is the retry delay range; zero values mean the node's default.
func (s *Service) Backoff() (min, max time.Duration) {
	v, ok := s.Attr(AttrBackoff)
	if !ok {
		return 0, 0
	}
	lo, hi, _ := strings.Cut(v, "..")
	min, _ = time.ParseDuration(lo)
	max, _ = time.ParseDuration(hi)
	return min, max
}

// Once reports whether the step is at-most-once.
func (s *Service) Once() bool {
	v, _ := s.Attr(AttrOnce)
	return v == "true"
}

func (s *Service) duration(key string) time.Duration {
	v, _ := s.Attr(key)
	d, _ := time.ParseDuration(v)
	return d
}
