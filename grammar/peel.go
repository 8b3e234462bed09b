package grammar

import (
	"errors"
	"fmt"
	"strconv"
)

// HeadKind says what Peel found at the front of a workflow.
type HeadKind int

const (
	// HeadService is a single service to run now.
	HeadService HeadKind = iota
	// HeadFork is a parallel pattern: run every branch, join at SYNC.
	HeadFork
	// HeadFirst starts every branch and keeps the first success.
	HeadFirst
	// HeadFailover tries branches in order until one succeeds.
	HeadFailover
)

// String names the head kind as the language spells it.
func (k HeadKind) String() string {
	switch k {
	case HeadService:
		return "service"
	case HeadFork:
		return "FORK"
	case HeadFirst:
		return "FIRST"
	case HeadFailover:
		return "FAILOVER"
	}
	return "HeadKind(" + strconv.Itoa(int(k)) + ")"
}

// Head is the pattern Peel extracted. For HeadService, Service is set; for
// the other kinds, Branches holds the pattern's branches (not copied).
type Head struct {
	Kind     HeadKind
	Service  *Service
	Branches []*Workflow
}

// Selector picks the arm of a CHOICE to run, returning its index. Guarded
// choices evaluate guards against the data so far; unguarded ones ask which
// arm's head service has a live, powered provider. Returning an error fails
// the peel.
type Selector func(c *Choice) (int, error)

// ErrEmpty is returned by Peel for an empty workflow.
var ErrEmpty = errors.New("empty workflow")

// Peel splits w into its head pattern and the residual workflow that runs
// after it (nil when nothing remains), per the BEDWE paper's §3.1:
//   - a sequence yields its first service;
//   - a FORK, FIRST or FAILOVER yields its branch list, and the residual is the
//     continuation after SYNC / ENDFIRST / ENDFAILOVER;
//   - a CHOICE asks choose for an arm, prepends that arm to the rest and peels
//     again, so the head is always one of the kinds above.
//
// w is not modified; the residual shares subtrees with w.
func Peel(w *Workflow, choose Selector) (Head, *Workflow, error) {
	for {
		if w == nil || len(w.Steps) == 0 {
			return Head{}, nil, ErrEmpty
		}
		first, rest := w.Steps[0], w.Steps[1:]
		var residual *Workflow
		if len(rest) > 0 {
			residual = &Workflow{Steps: rest}
		}
		switch s := first.(type) {
		case *Service:
			return Head{Kind: HeadService, Service: s}, residual, nil
		case *Fork:
			return Head{Kind: HeadFork, Branches: s.Branches}, residual, nil
		case *First:
			return Head{Kind: HeadFirst, Branches: s.Branches}, residual, nil
		case *Failover:
			return Head{Kind: HeadFailover, Branches: s.Branches}, residual, nil
		case *Choice:
			if choose == nil {
				return Head{}, nil, fmt.Errorf("%s: CHOICE needs a selector", s.Pos)
			}
			i, err := choose(s)
			if err != nil {
				return Head{}, nil, err
			}
			if i < 0 || i >= len(s.Arms) {
				return Head{}, nil, fmt.Errorf("%s: selector chose arm %d of %d", s.Pos, i, len(s.Arms))
			}
			steps := make([]Step, 0, len(s.Arms[i].Body.Steps)+len(rest))
			steps = append(steps, s.Arms[i].Body.Steps...)
			steps = append(steps, rest...)
			w = &Workflow{Steps: steps}
		default:
			return Head{}, nil, fmt.Errorf("unknown step type %T", first)
		}
	}
}

// AssignPaths gives every service in w a Path that is unique within w and
// stable under Peel: top-level step i of the sequence gets "i"; branch or arm
// j of a pattern at step i prefixes its own steps with "i.j/". Paths already
// set are overwritten.
func AssignPaths(w *Workflow) { assignPaths(w, "") }

func assignPaths(w *Workflow, prefix string) {
	if w == nil {
		return
	}
	for i, s := range w.Steps {
		here := prefix + strconv.Itoa(i)
		switch s := s.(type) {
		case *Service:
			s.Path = here
		case *Fork:
			assignBranchPaths(s.Branches, here)
		case *First:
			assignBranchPaths(s.Branches, here)
		case *Failover:
			assignBranchPaths(s.Branches, here)
		case *Choice:
			for j, a := range s.Arms {
				assignPaths(a.Body, here+"."+strconv.Itoa(j)+"/")
			}
		}
	}
}

func assignBranchPaths(branches []*Workflow, here string) {
	for j, b := range branches {
		assignPaths(b, here+"."+strconv.Itoa(j)+"/")
	}
}
