package service

import (
	"fmt"
	"strings"
)

// Error is one problem in a services file, with its position.
type Error struct {
	// File is the services file's path; empty for Parse.
	File string
	// Line and Col are 1-based; 0 when unknown.
	Line, Col int
	// Field is the dotted path of the offending field, e.g.
	// "services.resize.timeout" or "patterns[0].match"; empty for the whole
	// file.
	Field string
	// Msg says what is wrong and what was expected.
	Msg string
}

// Error renders FILE:LINE:COL: FIELD: MSG ("line LINE:COL" without a file;
// YAML syntax errors have a line but no column).
func (e *Error) Error() string {
	var b strings.Builder
	pos := ""
	switch {
	case e.Line > 0 && e.Col > 0:
		pos = fmt.Sprintf("%d:%d", e.Line, e.Col)
	case e.Line > 0:
		pos = fmt.Sprintf("%d", e.Line)
	}
	switch {
	case e.File != "" && pos != "":
		fmt.Fprintf(&b, "%s:%s: ", e.File, pos)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case pos != "":
		fmt.Fprintf(&b, "line %s: ", pos)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in a services file, in file order. Parse
// and LoadFile return one when the file is invalid.
type ErrorList []*Error

// maxErrors bounds how many problems one parse reports.
const maxErrors = 20

// Error renders one problem per line.
func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}
