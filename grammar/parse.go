package grammar

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// File is a parsed workflow together with its source comments, so that
// FormatFile can put the comments back. Trees built in code have no File.
type File struct {
	// Name is the file name used in error messages.
	Name string
	// Workflow is the checked tree.
	Workflow *Workflow
	// Comments are the '#' comments in source order.
	Comments []Comment
	// ends holds, for every pattern step, where its closing keyword ends,
	// so the formatter knows which comments sit inside it.
	ends map[Step]endPos
}

// endPos is where a pattern's closing keyword ends: the offset just past it
// and its line.
type endPos struct{ off, line int }

// Parse parses and checks a workflow with DefaultLimits. The error, if any,
// is an ErrorList whose entries read "FILE:LINE:COL: message".
func Parse(filename string, src []byte) (*Workflow, error) {
	return ParseWithLimits(filename, src, DefaultLimits())
}

// ParseWithLimits is Parse with explicit limits.
func ParseWithLimits(filename string, src []byte, lim Limits) (*Workflow, error) {
	f, err := ParseFile(filename, src, lim)
	if err != nil {
		return nil, err
	}
	return f.Workflow, nil
}

// ParseFile parses and checks a workflow and keeps its comments for
// FormatFile.
func ParseFile(filename string, src []byte, lim Limits) (*File, error) {
	return parseFile(filename, src, lim, false)
}

// ParseResidual parses a residual workflow: what is left of a checked
// workflow after some of its steps ran (a join's stored branches and
// continuation). Its guards and reads may name labels produced by steps no
// longer in it, so names are not checked against what it produces itself;
// every other check runs as in Parse, with DefaultLimits.
func ParseResidual(filename string, src []byte) (*Workflow, error) {
	f, err := parseFile(filename, src, DefaultLimits(), true)
	if err != nil {
		return nil, err
	}
	return f.Workflow, nil
}

func parseFile(filename string, src []byte, lim Limits, residual bool) (*File, error) {
	lim = lim.resolved()
	sink := &errorSink{file: filename}
	if exceeds(len(src), lim.MaxInputBytes) {
		sink.add(Pos{Offset: 0, Line: 1, Col: 1}, "input is %d bytes, exceeds the limit of %d bytes", len(src), lim.MaxInputBytes)
		return nil, sink.err()
	}
	if pos, msg := badInput(src); msg != "" {
		sink.add(pos, "%s", msg)
		return nil, sink.err()
	}
	p := &parser{lex: newLexer(string(src)), sink: sink, lim: lim, ends: map[Step]endPos{}}
	w := p.parse()
	if w == nil {
		return nil, sink.err()
	}
	c := &checker{sink: sink, lim: lim, residual: residual}
	c.run(w)
	if err := sink.err(); err != nil {
		return nil, err
	}
	return &File{Name: filename, Workflow: w, Comments: p.lex.comments, ends: p.ends}, nil
}

// badInput finds the first NUL byte or invalid UTF-8 sequence.
func badInput(src []byte) (Pos, string) {
	line, lineStart := 1, 0
	for i := 0; i < len(src); {
		c := src[i]
		pos := Pos{Offset: i, Line: line, Col: i - lineStart + 1}
		if c == 0 {
			return pos, "NUL byte in input"
		}
		if c == '\n' {
			line++
			lineStart = i + 1
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, w := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && w <= 1 {
			return pos, fmt.Sprintf("invalid UTF-8 byte 0x%02x in input", c)
		}
		i += w
	}
	return Pos{}, ""
}

// parser is a recursive-descent parser with one token of look-ahead. Syntax
// errors stop the parse (errorf panics with errStop, recovered in parse);
// attribute value errors are recorded and parsing goes on.
type parser struct {
	lex    *lexer
	tok    item // look-ahead token
	peeked bool
	sink   *errorSink
	lim    Limits
	depth  int
	ends   map[Step]endPos
	last   item // the last token consumed
}

var errStop = errors.New("stop parsing")

// errorf records a syntax error at pos and stops the parse.
func (p *parser) errorf(pos Pos, format string, args ...any) {
	p.sink.add(pos, format, args...)
	panic(errStop)
}

func (p *parser) peek() item {
	if !p.peeked {
		p.tok = p.lex.nextItem()
		p.peeked = true
	}
	return p.tok
}

func (p *parser) next() item {
	t := p.peek()
	if t.typ == itemError {
		p.errorf(t.pos, "%s", t.val)
	}
	p.peeked = false
	p.last = t
	return t
}

// expect consumes a token of type typ or fails with "expected WHAT, found
// ...".
func (p *parser) expect(typ itemType, what string) item {
	t := p.peek()
	if t.typ != typ {
		p.unexpected(t, what)
	}
	return p.next()
}

// unexpected fails at t with "expected WANT, found T".
func (p *parser) unexpected(t item, want string) {
	if t.typ == itemError {
		p.errorf(t.pos, "%s", t.val)
	}
	p.errorf(t.pos, "expected %s, found %s", want, t.describe())
}

// parse parses the whole input; it returns nil after a syntax error.
func (p *parser) parse() (w *Workflow) {
	defer func() {
		if r := recover(); r != nil {
			if r != errStop {
				panic(r)
			}
			w = nil
		}
	}()
	w = p.sequence(func() string { return "a service or pattern" })
	if t := p.peek(); t.typ == itemError {
		p.next()
	} else if t.typ != itemEOF {
		p.errorf(t.pos, "expected a service, a pattern or end of input, found %s%s", t.describe(), strayHint(t))
	}
	return w
}

// strayHint explains a closing keyword or punctuation found at the top level.
func strayHint(t item) string {
	switch t.typ {
	case itemSync:
		return " (SYNC without a matching FORK)"
	case itemEndChoice:
		return " (ENDCHOICE without a matching CHOICE)"
	case itemEndFirst:
		return " (ENDFIRST without a matching FIRST)"
	case itemEndFailover:
		return " (ENDFAILOVER without a matching FAILOVER)"
	case itemRParen:
		return " (unbalanced \")\")"
	case itemComma:
		return " (\",\" outside a pattern)"
	case itemIf, itemElse:
		return " (IF and ELSE only start CHOICE arms)"
	}
	return ""
}

// startsStep reports whether t can begin a step.
func startsStep(t item) bool {
	switch t.typ {
	case itemName, itemFork, itemChoice, itemFirst, itemFailover:
		return true
	}
	return false
}

// sequence parses step { step }. want says, for the error when no step
// starts, what was expected and where ("a service or pattern to start FORK
// branch 2"); it is only called on error.
func (p *parser) sequence(want func() string) *Workflow {
	w := &Workflow{}
	for startsStep(p.peek()) {
		w.Steps = append(w.Steps, p.step())
	}
	if len(w.Steps) == 0 {
		t := p.peek()
		if t.typ == itemIf || t.typ == itemElse {
			p.errorf(t.pos, "%s is only allowed at the start of a CHOICE arm", t.val)
		}
		p.unexpected(t, want())
	}
	return w
}

// step parses one service or pattern.
func (p *parser) step() Step {
	t := p.peek()
	switch t.typ {
	case itemName:
		return p.service()
	case itemChoice:
		return p.choice()
	case itemFork:
		return p.branches(itemFork, itemSync)
	case itemFirst:
		return p.branches(itemFirst, itemEndFirst)
	case itemFailover:
		return p.branches(itemFailover, itemEndFailover)
	}
	p.unexpected(t, "a service or pattern")
	return nil
}

// enter raises the nesting depth for a pattern opened at pos.
func (p *parser) enter(pos Pos) {
	p.depth++
	if exceeds(p.depth, p.lim.MaxDepth) {
		p.errorf(pos, "nesting depth %d exceeds the limit of %d", p.depth, p.lim.MaxDepth)
	}
}

// service parses NAME [ "[" attr { "," attr } "]" ].
func (p *parser) service() *Service {
	t := p.next()
	s := &Service{Pos: t.pos, Name: t.val}
	if p.peek().typ != itemLBracket {
		return s
	}
	p.next()
	var seen []string
	for {
		if t := p.peek(); t.typ != itemName {
			p.unexpected(t, "attribute name in the attributes of "+s.Name)
		}
		key := p.next()
		if t := p.peek(); t.typ != itemAssign {
			p.unexpected(t, `"=" after attribute `+key.val)
		}
		p.next()
		val := p.peek()
		switch val.typ {
		case itemName:
			p.next()
		case itemLParen:
			val = p.attrList(key.val, s.Name)
		default:
			p.unexpected(val, fmt.Sprintf("a value for attribute %s", key.val))
		}
		switch canon, msg := canonicalAttr(key.val, val.val); {
		case msg != "" && !isKnownAttr(key.val):
			p.sink.add(key.pos, "%s", msg)
		case msg != "":
			p.sink.add(val.pos, "%s", msg)
		case slices.Contains(seen, key.val):
			p.sink.add(key.pos, "duplicate attribute %s on %s", key.val, s.Name)
		default:
			seen = append(seen, key.val)
			s.Attrs = append(s.Attrs, Attr{Key: key.val, Value: canon})
		}
		switch t := p.peek(); t.typ {
		case itemComma:
			p.next()
		case itemRBracket:
			p.next()
			return s
		default:
			p.unexpected(t, `"," or "]" after attribute `+key.val)
		}
	}
}

// attrList parses a list value "(" [ NAME { "," NAME } ] ")" of attribute
// key on service svc (reads=(tiles, index)) and returns it as one item at
// the "(", its text "(a, b)" for canonicalAttr to check.
func (p *parser) attrList(key, svc string) item {
	open := p.next()
	var names []string
	if p.peek().typ == itemRParen {
		p.next()
		return item{typ: itemName, pos: open.pos, val: "()"}
	}
	for {
		t := p.peek()
		if t.typ != itemName {
			p.unexpected(t, fmt.Sprintf("an output label in the %s list of %s", key, svc))
		}
		names = append(names, p.next().val)
		switch t := p.peek(); t.typ {
		case itemComma:
			p.next()
		case itemRParen:
			p.next()
			return item{typ: itemName, pos: open.pos, val: formatReads(names)}
		default:
			p.unexpected(t, fmt.Sprintf(`"," or ")" in the %s list of %s`, key, svc))
		}
	}
}

// branches parses OPEN "(" branch { "," branch } ")" CLOSE for FORK, FIRST
// and FAILOVER. A single branch parses; the checker reports it.
func (p *parser) branches(open, close itemType) Step {
	kw := p.next()
	p.enter(kw.pos)
	p.expect(itemLParen, `"(" after `+kw.val)
	var list []*Workflow
	for {
		n := len(list) + 1
		t := p.peek()
		if t.typ == itemIf || t.typ == itemElse {
			p.errorf(t.pos, "%s guards are only allowed on CHOICE arms, not in %s", t.val, kw.val)
		}
		list = append(list, p.sequence(func() string { return fmt.Sprintf("a service or pattern to start %s branch %d", kw.val, n) }))
		if p.closeList(kw) {
			break
		}
	}
	closeName := keywordName(close)
	if t := p.peek(); t.typ != close {
		p.unexpected(t, fmt.Sprintf("%q to close %s at %s", closeName, kw.val, kw.pos))
	}
	p.next()
	p.depth--
	var s Step
	switch open {
	case itemFork:
		s = &Fork{Pos: kw.pos, Branches: list}
	case itemFirst:
		s = &First{Pos: kw.pos, Branches: list}
	default:
		s = &Failover{Pos: kw.pos, Branches: list}
	}
	p.ends[s] = endPos{off: p.last.pos.Offset + len(p.last.val), line: p.last.pos.Line}
	return s
}

// closeList consumes the "," between branches (returning false) or the ")"
// ending the list (returning true).
func (p *parser) closeList(kw item) bool {
	switch t := p.peek(); t.typ {
	case itemComma:
		p.next()
		return false
	case itemRParen:
		p.next()
		return true
	default:
		what := "branch"
		if kw.typ == itemChoice {
			what = "arm"
		}
		p.unexpected(t, fmt.Sprintf(`"," or ")" after %s %s`, kw.val, what))
		return true
	}
}

// choice parses "CHOICE" "(" arm "," arm { "," arm } ")" "ENDCHOICE".
func (p *parser) choice() Step {
	kw := p.next()
	p.enter(kw.pos)
	p.expect(itemLParen, `"(" after CHOICE`)
	c := &Choice{Pos: kw.pos}
	for {
		n := len(c.Arms) + 1
		ctx := "to start"
		t := p.peek()
		arm := &Arm{Pos: t.pos}
		switch t.typ {
		case itemIf:
			p.next()
			p.expect(itemLParen, `"(" after IF`)
			g := p.expect(itemGuard, "a guard expression")
			if g.val == "" {
				p.errorf(g.pos, "empty guard expression after IF")
			}
			p.expect(itemRParen, `")" after the guard`)
			arm.Kind, arm.Guard = ArmIf, g.val
			ctx = "after IF(...) in"
		case itemElse:
			p.next()
			arm.Kind = ArmElse
			ctx = "after ELSE in"
		}
		arm.Body = p.sequence(func() string { return fmt.Sprintf("a service or pattern %s CHOICE arm %d", ctx, n) })
		c.Arms = append(c.Arms, arm)
		if p.closeList(kw) {
			break
		}
	}
	if t := p.peek(); t.typ != itemEndChoice {
		p.unexpected(t, fmt.Sprintf(`"ENDCHOICE" to close CHOICE at %s`, kw.pos))
	}
	p.next()
	p.depth--
	p.ends[c] = endPos{off: p.last.pos.Offset + len(p.last.val), line: p.last.pos.Line}
	return c
}

// keywordName returns the spelling of a keyword item type.
func keywordName(t itemType) string {
	for k, v := range keywords {
		if v == t {
			return k
		}
	}
	return "?"
}
