package schedule

import (
	"fmt"
	"strings"
)

// Severity grades a Problem.
type Severity int

// The severities.
const (
	// Warning is suspicious but usable (a 30-minute block, a duplicate row).
	Warning Severity = iota
	// Error makes the schedule unusable (overlapping stage changes, bad zone).
	Error
)

// String renders "warning" or "error".
func (s Severity) String() string {
	if s == Error {
		return "error"
	}
	return "warning"
}

// Problem is one finding of Parse or Validate.
type Problem struct {
	Pos      Pos
	Severity Severity
	Msg      string
}

// String renders "LINE:COL: error: msg" (without the position when unknown).
func (p Problem) String() string {
	if p.Pos.Line == 0 {
		return fmt.Sprintf("%s: %s", p.Severity, p.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", p.Pos, p.Severity, p.Msg)
}

// ProblemError is returned by Parse and Load when a schedule has errors. It
// lists every problem found, warnings included.
type ProblemError struct {
	// File is the path given to Load, or "".
	File     string
	Problems []Problem
}

// Error renders every problem on its own line.
func (e *ProblemError) Error() string {
	var b strings.Builder
	n := 0
	for _, p := range e.Problems {
		if p.Severity == Error {
			n++
		}
	}
	prefix := "schedule"
	if e.File != "" {
		prefix = e.File
	}
	fmt.Fprintf(&b, "%s: %d error(s)", prefix, n)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// HasErrors reports whether any problem is an Error.
func HasErrors(ps []Problem) bool {
	for _, p := range ps {
		if p.Severity == Error {
			return true
		}
	}
	return false
}

// problems accumulates findings.
type problems []Problem

func (ps *problems) errorf(pos Pos, format string, args ...any) {
	*ps = append(*ps, Problem{Pos: pos, Severity: Error, Msg: fmt.Sprintf(format, args...)})
}

func (ps *problems) warnf(pos Pos, format string, args ...any) {
	*ps = append(*ps, Problem{Pos: pos, Severity: Warning, Msg: fmt.Sprintf(format, args...)})
}
