package grammar

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer follows Go's text/template/parse: a state machine whose states are
// functions returning the next state, emitting typed items that carry their
// position. Lexical errors are items too, so the parser reports them with a
// position like any other unexpected token.

// itemType identifies the type of lex items.
type itemType int

const (
	itemError       itemType = iota // lexical error; val holds the message
	itemEOF                         // end of input
	itemName                        // NAME: service name, attribute key or value
	itemLParen                      // (
	itemRParen                      // )
	itemComma                       // ,
	itemLBracket                    // [
	itemRBracket                    // ]
	itemAssign                      // =
	itemGuard                       // guard expression text between IF( and its matching )
	itemKeyword                     // marks the start of the keywords; not emitted
	itemFork                        // FORK
	itemSync                        // SYNC
	itemChoice                      // CHOICE
	itemEndChoice                   // ENDCHOICE
	itemIf                          // IF
	itemElse                        // ELSE
	itemFirst                       // FIRST
	itemEndFirst                    // ENDFIRST
	itemFailover                    // FAILOVER
	itemEndFailover                 // ENDFAILOVER
)

// keywords maps each reserved word to its item type.
var keywords = map[string]itemType{
	"FORK":        itemFork,
	"SYNC":        itemSync,
	"CHOICE":      itemChoice,
	"ENDCHOICE":   itemEndChoice,
	"IF":          itemIf,
	"ELSE":        itemElse,
	"FIRST":       itemFirst,
	"ENDFIRST":    itemEndFirst,
	"FAILOVER":    itemFailover,
	"ENDFAILOVER": itemEndFailover,
}

// IsKeyword reports whether s is a reserved word of the language.
func IsKeyword(s string) bool {
	_, ok := keywords[s]
	return ok
}

// item is a token returned from the lexer.
type item struct {
	typ itemType
	pos Pos
	val string
}

// describe renders the item for "found ..." in error messages.
func (i item) describe() string {
	switch i.typ {
	case itemEOF:
		return "end of input"
	case itemError:
		return i.val
	case itemName:
		return fmt.Sprintf("%q", i.val)
	case itemGuard:
		return "guard expression"
	}
	return fmt.Sprintf("%q", i.val)
}

// Comment is a '#' comment kept by ParseFile so that Format can put it back.
// Text includes the leading '#' and excludes the newline.
type Comment struct {
	Pos  Pos
	Text string
}

const eof = -1

// stateFn represents the state of the lexer as a function returning the next
// state.
type stateFn func(*lexer) stateFn

// lexer holds the state of the scanner.
type lexer struct {
	input     string
	pos       int // current position in input
	start     int // start of the current item
	line      int // line of pos (1-based)
	lineStart int // offset of the first byte of pos's line
	startLine int // line of start
	startCol  int // column of start (1-based, bytes)
	afterIF   bool
	ifPos     Pos // position of the last IF, for unterminated guards
	item      item
	hasItem   bool
	state     stateFn
	comments  []Comment
}

func newLexer(input string) *lexer {
	return &lexer{input: input, line: 1, startLine: 1, startCol: 1, state: lexAny}
}

// nextItem runs the state machine until it emits an item. After EOF or an
// error it keeps returning that item.
func (l *lexer) nextItem() item {
	for !l.hasItem {
		if l.state == nil {
			return l.item
		}
		l.state = l.state(l)
	}
	l.hasItem = false
	return l.item
}

// next consumes the next rune.
func (l *lexer) next() rune {
	if l.pos >= len(l.input) {
		return eof
	}
	r, w := utf8.DecodeRuneInString(l.input[l.pos:])
	l.pos += w
	if r == '\n' {
		l.line++
		l.lineStart = l.pos
	}
	return r
}

// peek returns the next rune without consuming it.
func (l *lexer) peek() rune {
	if l.pos >= len(l.input) {
		return eof
	}
	r, _ := utf8.DecodeRuneInString(l.input[l.pos:])
	return r
}

func (l *lexer) startPos() Pos {
	return Pos{Offset: l.start, Line: l.startLine, Col: l.startCol}
}

// ignore skips the pending input.
func (l *lexer) ignore() {
	l.start = l.pos
	l.startLine = l.line
	l.startCol = l.pos - l.lineStart + 1
}

func (l *lexer) emit(t itemType) { l.emitVal(t, l.input[l.start:l.pos]) }

func (l *lexer) emitVal(t itemType, val string) {
	l.item = item{typ: t, pos: l.startPos(), val: val}
	l.hasItem = true
	if t != itemIf {
		l.afterIF = false
	}
	l.ignore()
}

// errorf emits an error item at the start of the pending input and stops.
func (l *lexer) errorf(format string, args ...any) stateFn {
	l.item = item{typ: itemError, pos: l.startPos(), val: fmt.Sprintf(format, args...)}
	l.hasItem = true
	return nil
}

// lexAny scans between tokens.
func lexAny(l *lexer) stateFn {
	switch r := l.next(); {
	case r == eof:
		l.emit(itemEOF)
		return nil
	case r == ' ' || r == '\t' || r == '\r' || r == '\n':
		l.ignore()
		return lexAny
	case r == '#':
		return lexComment
	case r == '(':
		if l.afterIF {
			l.emit(itemLParen)
			return lexGuard
		}
		l.emit(itemLParen)
	case r == ')':
		l.emit(itemRParen)
	case r == ',':
		l.emit(itemComma)
	case r == '[':
		l.emit(itemLBracket)
	case r == ']':
		l.emit(itemRBracket)
	case r == '=':
		l.emit(itemAssign)
	case isNameRune(r):
		return lexName
	default:
		return l.errorf("unexpected character %q", r)
	}
	return lexAny
}

// lexComment scans a '#' comment to the end of the line.
func lexComment(l *lexer) stateFn {
	for {
		r := l.peek()
		if r == '\n' || r == eof {
			break
		}
		l.next()
	}
	l.comments = append(l.comments, Comment{Pos: l.startPos(), Text: strings.TrimRight(l.input[l.start:l.pos], " \t\r")})
	l.ignore()
	return lexAny
}

// lexName scans a NAME or keyword; the first rune is already consumed.
func lexName(l *lexer) stateFn {
	for isNameRune(l.peek()) {
		l.next()
	}
	word := l.input[l.start:l.pos]
	if t, ok := keywords[word]; ok {
		if t == itemIf {
			l.ifPos = l.startPos()
			l.emit(t)
			l.afterIF = true
			return lexAny
		}
		l.emit(t)
		return lexAny
	}
	l.emit(itemName)
	return lexAny
}

// lexGuard scans a guard expression up to (not including) the ')' matching
// the '(' after IF, honouring nested brackets, string literals and expr
// comments.
func lexGuard(l *lexer) stateFn {
	for r := l.peek(); r == ' ' || r == '\t' || r == '\r' || r == '\n'; r = l.peek() {
		l.next()
	}
	l.ignore()
	end, msg := scanGuard(l.input, l.pos)
	if msg != "" {
		return l.errorf("%s (IF at %s)", msg, l.ifPos)
	}
	for l.pos < end {
		l.next()
	}
	l.emitVal(itemGuard, normalizeGuard(l.input[l.start:l.pos]))
	return lexGuardClose
}

// lexGuardClose emits the ')' that closes a guard.
func lexGuardClose(l *lexer) stateFn {
	l.next()
	l.emit(itemRParen)
	return lexAny
}

// isNameRune reports whether r may appear in a NAME.
func isNameRune(r rune) bool {
	return r == '_' || r == '-' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// scanGuard finds the offset of the ')' that closes a guard starting at
// offset start of src. It returns a message when the guard is unterminated.
func scanGuard(src string, start int) (end int, msg string) {
	depth := 0
	for i := start; i < len(src); {
		c := src[i]
		switch c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				if c == ')' {
					return i, ""
				}
				return 0, fmt.Sprintf("unbalanced %q in guard expression", c)
			}
			depth--
		case '"', '\'':
			j := i + 1
			for ; j < len(src) && src[j] != c; j++ {
				if src[j] == '\\' {
					j++
				} else if src[j] == '\n' {
					return 0, "unterminated string in guard expression"
				}
			}
			if j >= len(src) {
				return 0, "unterminated string in guard expression"
			}
			i = j + 1
			continue
		case '`':
			j := strings.IndexByte(src[i+1:], '`')
			if j < 0 {
				return 0, "unterminated raw string in guard expression"
			}
			i += j + 2
			continue
		case '/':
			if strings.HasPrefix(src[i:], "//") {
				j := strings.IndexByte(src[i:], '\n')
				if j < 0 {
					return 0, `unterminated guard expression: expected ")"`
				}
				i += j
				continue
			}
			if strings.HasPrefix(src[i:], "/*") {
				j := strings.Index(src[i+2:], "*/")
				if j < 0 {
					return 0, "unterminated comment in guard expression"
				}
				i += j + 4
				continue
			}
		}
		i++
	}
	return 0, `unterminated guard expression: expected ")"`
}

// normalizeGuard returns the canonical text of a guard: expr comments
// removed, runs of white space outside string literals collapsed to one
// space, and the result trimmed. The text is assumed balanced (scanGuard).
func normalizeGuard(src string) string {
	var b strings.Builder
	space := false
	flush := func() {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			space = true
			i++
		case c == '/' && strings.HasPrefix(src[i:], "//"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			space = true
			i += j
		case c == '/' && strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				j = len(src) - i - 4
			}
			space = true
			i += j + 4
		case c == '"' || c == '\'':
			j := i + 1
			for ; j < len(src) && src[j] != c; j++ {
				if src[j] == '\\' {
					j++
				}
			}
			j = min(j+1, len(src))
			flush()
			b.WriteString(src[i:j])
			i = j
		case c == '`':
			j := strings.IndexByte(src[i+1:], '`')
			end := len(src)
			if j >= 0 {
				end = i + j + 2
			}
			flush()
			b.WriteString(src[i:end])
			i = end
		default:
			flush()
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}
