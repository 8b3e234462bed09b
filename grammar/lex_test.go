package grammar

import (
	"fmt"
	"strings"
	"testing"
)

// lexAll renders every item as TYPE:VALUE@LINE:COL until EOF or an error.
func lexAll(src string) string {
	l := newLexer(src)
	var out []string
	for {
		it := l.nextItem()
		out = append(out, fmt.Sprintf("%d:%q@%s", it.typ, it.val, it.pos))
		if it.typ == itemEOF || it.typ == itemError {
			return strings.Join(out, " ")
		}
	}
}

func TestLexer(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"name and attrs", "S1[a=1]", `2:"S1"@1:1 6:"["@1:3 2:"a"@1:4 8:"="@1:5 2:"1"@1:6 7:"]"@1:7 1:""@1:8`},
		{"keywords", "FORK(A,B)SYNC", `11:"FORK"@1:1 3:"("@1:5 2:"A"@1:6 5:","@1:7 2:"B"@1:8 4:")"@1:9 12:"SYNC"@1:10 1:""@1:14`},
		{"lines and comments", "A # x\n\tB", `2:"A"@1:1 2:"B"@2:2 1:""@2:3`},
		{"guard", "IF ( a(1) == \")\" )B", `15:"IF"@1:1 3:"("@1:4 9:"a(1) == \")\""@1:6 4:")"@1:18 2:"B"@1:19 1:""@1:20`},
		{"paren after name is not a guard", "IF A (", `15:"IF"@1:1 2:"A"@1:4 3:"("@1:6 1:""@1:7`},
		{"error", "A $", `2:"A"@1:1 0:"unexpected character '$'"@1:3`},
		{"unterminated guard", "IF(a", `15:"IF"@1:1 3:"("@1:3 0:"unterminated guard expression: expected \")\" (IF at 1:1)"@1:4`},
		{"unbalanced bracket", "IF(a])", `15:"IF"@1:1 3:"("@1:3 0:"unbalanced ']' in guard expression (IF at 1:1)"@1:4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lexAll(tt.src); got != tt.want {
				t.Errorf("lex(%q)\n got %s\nwant %s", tt.src, got, tt.want)
			}
		})
	}
}

func TestNormalizeGuard(t *testing.T) {
	tests := map[string]string{
		"  a  >\n\t1 ":             "a > 1",
		`a == "x  y"`:              `a == "x  y"`,
		`a == 'it\'s  '`:           `a == 'it\'s  '`,
		"a /* c ) */ > 1 // tail":  "a > 1",
		"`raw  text` == a":         "`raw  text` == a",
		"a\n// only comment\n&& b": "a && b",
	}
	for in, want := range tests {
		if got := normalizeGuard(in); got != want {
			t.Errorf("normalizeGuard(%q) = %q, want %q", in, got, want)
		}
	}
}
