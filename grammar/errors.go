package grammar

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// maxErrors bounds how many errors one parse or check reports; the rest are
// summarised by a final "too many errors" entry.
const maxErrors = 50

// Error is one problem found in a workflow, with its position.
type Error struct {
	File string
	Pos  Pos
	Msg  string
}

// Error renders the error as "FILE:LINE:COL: message". The file is left out
// when empty and the position when unknown (trees built in code).
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Pos.Line, e.Pos.Col)
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is a list of errors sorted by position. Parse, ParseWithLimits,
// ParseFile and Check return one (never empty) when the workflow is invalid.
type ErrorList []*Error

// Error joins the errors one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes the individual errors to errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// errorSink collects errors up to maxErrors.
type errorSink struct {
	file string
	list ErrorList
	more int // errors dropped beyond maxErrors
}

func (s *errorSink) add(pos Pos, format string, args ...any) {
	if len(s.list) >= maxErrors {
		s.more++
		return
	}
	s.list = append(s.list, &Error{File: s.file, Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

func (s *errorSink) full() bool { return len(s.list) >= maxErrors }

// err returns the sorted list, or nil when there were no errors.
func (s *errorSink) err() error {
	if len(s.list) == 0 {
		return nil
	}
	list := slices.Clone(s.list)
	slices.SortStableFunc(list, func(a, b *Error) int {
		if c := cmp.Compare(a.Pos.Line, b.Pos.Line); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Pos.Col, b.Pos.Col); c != 0 {
			return c
		}
		return strings.Compare(a.Msg, b.Msg)
	})
	if s.more > 0 {
		last := list[len(list)-1]
		list = append(list, &Error{File: s.file, Pos: last.Pos, Msg: fmt.Sprintf("too many errors (%d more not shown)", s.more)})
	}
	return list
}
