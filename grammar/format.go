package grammar

import (
	"sort"
	"strings"
)

// Format layout constants.
const (
	formatWidth  = 80   // a pattern or branch stays on one line if it fits
	formatIndent = "  " // one level of nesting
)

// Format prints w in the canonical multi-line form used by `bedwe fmt`:
// consecutive services share a line (wrapped at 80 columns), every pattern
// starts on a line of its own, a pattern that fits on the line stays on one
// line, and longer ones put each branch or arm on its own indented lines:
//
//	S1 S2
//	FORK(
//	  S3 CHOICE(S4, S5) ENDCHOICE S6,
//	  S7 S8
//	) SYNC
//	S9 S10
//
// The output ends with a newline, parses to a tree Equal to w, and is a fixed
// point: Format(Parse(Format(w))) == Format(w).
func Format(w *Workflow) string {
	return FormatFile(&File{Workflow: w})
}

// FormatFile is Format keeping the file's '#' comments: a comment that
// followed a step on its line stays at the end of that line, any other
// comment goes on a line of its own before the step that followed it (blank
// lines before such comments are kept, one at most). Comments inside guard
// expressions (expr's // and /* */) are not kept.
func FormatFile(f *File) string {
	p := &printer{comments: f.Comments, ends: f.ends}
	if f.Workflow != nil {
		p.sequence(f.Workflow, 0)
	}
	p.flush(int(^uint(0) >> 1))
	p.newline()
	return p.out.String()
}

// printer accumulates output lines; comments are emitted as the walk passes
// their source offsets.
type printer struct {
	out       strings.Builder
	line      strings.Builder // the current line, without indentation
	indent    int             // nesting level for the next line started
	lineLevel int             // nesting level of the current line
	mustBreak bool            // the next word starts a new line
	lastLine  int             // source line of the last thing printed
	comments  []Comment
	ci        int // next comment to print
	ends      map[Step]endPos
}

// newline ends the current line, if any.
func (p *printer) newline() {
	p.mustBreak = false
	if p.line.Len() == 0 {
		return
	}
	for range p.lineLevel {
		p.out.WriteString(formatIndent)
	}
	p.out.WriteString(p.line.String())
	p.out.WriteByte('\n')
	p.line.Reset()
}

// write appends s to the current line, starting the line at the current
// indent when it is empty.
func (p *printer) write(s string) {
	if p.line.Len() == 0 {
		p.lineLevel = p.indent
	}
	p.line.WriteString(s)
}

// width is the room left on the current line (or on a new line).
func (p *printer) width() int {
	if p.line.Len() == 0 {
		return formatWidth - p.indent*len(formatIndent)
	}
	return formatWidth - p.lineLevel*len(formatIndent) - p.line.Len()
}

// word appends s to the current line, separated by a space, wrapping when
// the line would grow past formatWidth.
func (p *printer) word(s string) {
	if p.mustBreak || (p.line.Len() > 0 && p.width() < len(s)+1) {
		p.newline()
	}
	if p.line.Len() > 0 {
		p.line.WriteByte(' ')
	}
	p.write(s)
}

// flush prints the comments that start before offset off.
func (p *printer) flush(off int) {
	for p.ci < len(p.comments) && p.comments[p.ci].Pos.Offset < off {
		c := p.comments[p.ci]
		p.ci++
		if p.line.Len() > 0 && c.Pos.Line == p.lastLine {
			p.line.WriteByte(' ')
			p.line.WriteString(c.Text)
			p.newline()
			continue
		}
		p.newline()
		if p.out.Len() > 0 && p.lastLine > 0 && c.Pos.Line > p.lastLine+1 {
			p.out.WriteByte('\n')
		}
		p.write(c.Text)
		p.newline()
		p.lastLine = c.Pos.Line
	}
}

// hasComment reports whether a comment starts in [lo, hi).
func (p *printer) hasComment(lo, hi int) bool {
	i := sort.Search(len(p.comments), func(i int) bool { return p.comments[i].Pos.Offset >= lo })
	return i < len(p.comments) && p.comments[i].Pos.Offset < hi
}

// end returns where step s ends in the source (its start for services and
// for trees without positions).
func (p *printer) end(s Step) endPos {
	if e, ok := p.ends[s]; ok {
		return e
	}
	pos := s.Position()
	return endPos{off: pos.Offset, line: pos.Line}
}

// sequence prints the steps of w in multi-line form at the given level.
func (p *printer) sequence(w *Workflow, level int) {
	for _, s := range w.Steps {
		p.indent = level
		p.flush(s.Position().Offset)
		if svc, ok := s.(*Service); ok {
			p.word(svc.String())
			p.lastLine = svc.Pos.Line
			continue
		}
		p.newline()
		p.pattern(s, level)
		p.lastLine = p.end(s).line
		p.mustBreak = true
	}
}

// pattern prints a FORK, CHOICE, FIRST or FAILOVER starting on a fresh line.
func (p *printer) pattern(s Step, level int) {
	one := s.String()
	pos := s.Position()
	if len(one) <= p.width() && !p.hasComment(pos.Offset, p.end(s).off) {
		p.write(one)
		return
	}
	var open, close string
	var bodies []*Workflow
	var prefixes []string
	switch s := s.(type) {
	case *Fork:
		open, close, bodies = "FORK(", ") SYNC", s.Branches
	case *First:
		open, close, bodies = "FIRST(", ") ENDFIRST", s.Branches
	case *Failover:
		open, close, bodies = "FAILOVER(", ") ENDFAILOVER", s.Branches
	case *Choice:
		open, close = "CHOICE(", ") ENDCHOICE"
		for _, a := range s.Arms {
			bodies = append(bodies, a.Body)
			switch a.Kind {
			case ArmIf:
				prefixes = append(prefixes, "IF("+a.Guard+")")
			case ArmElse:
				prefixes = append(prefixes, "ELSE")
			default:
				prefixes = append(prefixes, "")
			}
		}
	}
	p.write(open)
	p.lastLine = pos.Line
	p.mustBreak = true
	endOff := p.end(s).off
	for i, body := range bodies {
		next := endOff
		if i+1 < len(bodies) {
			next = startOf(bodies[i+1], endOff)
		}
		prefix := ""
		if prefixes != nil {
			prefix = prefixes[i]
		}
		p.branch(body, prefix, level+1, next)
		if i+1 < len(bodies) {
			p.line.WriteByte(',')
			p.mustBreak = true
		}
		p.flush(next)
	}
	p.newline()
	p.indent = level
	p.write(close)
	p.lastLine = p.end(s).line
}

// startOf is the source offset where w begins, or def without positions.
func startOf(w *Workflow, def int) int {
	if w == nil || len(w.Steps) == 0 {
		return def
	}
	if pos := w.Steps[0].Position(); pos.Line > 0 {
		return pos.Offset
	}
	return def
}

// branch prints one branch or arm (with its IF/ELSE prefix) on fresh lines at
// level; next is where the following branch (or the pattern's end) starts.
func (p *printer) branch(body *Workflow, prefix string, level int, next int) {
	start := startOf(body, next)
	p.indent = level
	p.flush(start)
	p.newline()
	one := body.String()
	if prefix != "" {
		one = prefix + " " + one
	}
	if len(one)+1 <= p.width() && !p.hasComment(start, next) {
		p.write(one)
		if n := len(body.Steps); n > 0 {
			p.lastLine = p.end(body.Steps[n-1]).line
		}
		return
	}
	if prefix != "" {
		p.write(prefix)
		p.lastLine = p.lastLineOfPrefix(body)
		p.mustBreak = true
		level++
	}
	p.sequence(body, level)
	p.indent = level
}

// lastLineOfPrefix approximates the source line of an arm's IF/ELSE: the
// line of its body's first step, so a comment after IF(...) on that line
// stays trailing.
func (p *printer) lastLineOfPrefix(body *Workflow) int {
	if len(body.Steps) == 0 {
		return 0
	}
	return body.Steps[0].Position().Line
}
