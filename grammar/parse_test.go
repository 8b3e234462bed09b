package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const fig2 = "S1 S2 FORK(S3 CHOICE(S4, S5) ENDCHOICE S6, S7 S8) SYNC S9 S10"

// svc builds a service for expected trees.
func svc(name string, attrs ...Attr) *Service { return &Service{Name: name, Attrs: attrs} }

func seq(steps ...Step) *Workflow { return &Workflow{Steps: steps} }

func TestParsePaperWorkflow(t *testing.T) {
	w, err := Parse("fig2.bedwe", []byte(fig2))
	if err != nil {
		t.Fatal(err)
	}
	want := seq(svc("S1"), svc("S2"),
		&Fork{Branches: []*Workflow{
			seq(svc("S3"), &Choice{Arms: []*Arm{{Body: seq(svc("S4"))}, {Body: seq(svc("S5"))}}}, svc("S6")),
			seq(svc("S7"), svc("S8")),
		}},
		svc("S9"), svc("S10"))
	if !w.Equal(want) {
		t.Fatalf("tree mismatch:\n got %s\nwant %s", w, want)
	}
	if got := w.String(); got != fig2 {
		t.Errorf("String() = %q, want the paper's text", got)
	}
	if n, d, wide := Stats(w); n != 10 || d != 2 || wide != 2 {
		t.Errorf("Stats = %d, %d, %d; want 10, 2, 2", n, d, wide)
	}
	wantLabels := "S1 S2 S3 S4 S5 S6 S7 S8 S9 S10"
	if got := strings.Join(Labels(w), " "); got != wantLabels {
		t.Errorf("Labels = %q, want %q", got, wantLabels)
	}
	// Positions point at the tokens.
	fork := w.Steps[2].(*Fork)
	if fork.Pos != (Pos{Offset: 6, Line: 1, Col: 7}) {
		t.Errorf("FORK at %+v", fork.Pos)
	}
	if s6 := fork.Branches[0].Steps[2].(*Service); s6.Pos.Col != 40 {
		t.Errorf("S6 at col %d, want 40", s6.Pos.Col)
	}
}

// TestParseTrees checks that each input parses to the tree whose canonical
// form is want.
func TestParseTrees(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"single", "S1", "S1"},
		{"whitespace and comments", "  # head\n S1 # one\n\tS2\r\n# tail", "S1 S2"},
		{"names", "mProject_ID0000001 tile-index.v2 a.b-c_d 42 été", "mProject_ID0000001 tile-index.v2 a.b-c_d 42 été"},
		{"keyword prefix is a name", "FORKS SYNCED IFfy ELSEWHERE", "FORKS SYNCED IFfy ELSEWHERE"},
		{"attrs canonical", "S1[ timeout = 90s , retries=03, backoff=500ms..1m, once=false, out=x, expect=1h30m ]",
			"S1[timeout=1m30s, retries=3, backoff=500ms..1m0s, once=false, out=x, expect=1h30m0s]"},
		{"attrs keep order", "S1[out=a, timeout=1s]", "S1[out=a, timeout=1s]"},
		{"fork three", "FORK(A,B,C)SYNC", "FORK(A, B, C) SYNC"},
		{"first", "FIRST(A B, C) ENDFIRST D", "FIRST(A B, C) ENDFIRST D"},
		{"failover", "FAILOVER(A, B[timeout=1s]) ENDFAILOVER", "FAILOVER(A, B[timeout=1s]) ENDFAILOVER"},
		{"nested", "FORK(CHOICE(FIRST(A, B) ENDFIRST, C) ENDCHOICE, FAILOVER(D, E) ENDFAILOVER) SYNC",
			"FORK(CHOICE(FIRST(A, B) ENDFIRST, C) ENDCHOICE, FAILOVER(D, E) ENDFAILOVER) SYNC"},
		{"guards", "A CHOICE( IF( A.n  >\n 1 ) B , IF (input.s == 'x)y') C, ELSE D ) ENDCHOICE",
			`A CHOICE(IF(A.n > 1) B, IF(input.s == 'x)y') C, ELSE D) ENDCHOICE`},
		{"guard keeps string spacing", `A CHOICE(IF(A == "a  b") B, ELSE C) ENDCHOICE`, `A CHOICE(IF(A == "a  b") B, ELSE C) ENDCHOICE`},
		{"guard drops expr comments", "A CHOICE(IF(A > 1 // big\n) B, IF(/* (( */ true) C) ENDCHOICE",
			"A CHOICE(IF(A > 1) B, IF(true) C) ENDCHOICE"},
		{"guard nested parens and hash", "A CHOICE(IF(all(A.xs, {# > (1)})) B, ELSE C) ENDCHOICE",
			"A CHOICE(IF(all(A.xs, {# > (1)})) B, ELSE C) ENDCHOICE"},
		{"guard without else", "A CHOICE(IF(A) B, IF(!A) C) ENDCHOICE", "A CHOICE(IF(A) B, IF(!A) C) ENDCHOICE"},
		{"guard on out label", "A[out=my-x] CHOICE(IF(out[\"my-x\"] != nil) B, ELSE C) ENDCHOICE",
			`A[out=my-x] CHOICE(IF(out["my-x"] != nil) B, ELSE C) ENDCHOICE`},
		{"label from earlier fork and choice", "FORK(A, B) SYNC CHOICE(C, D) ENDCHOICE CHOICE(IF(A && B && C && D) E, ELSE F) ENDCHOICE",
			"FORK(A, B) SYNC CHOICE(C, D) ENDCHOICE CHOICE(IF(A && B && C && D) E, ELSE F) ENDCHOICE"},
		{"sequential reuse", "A A FORK(B, C) SYNC B", "A A FORK(B, C) SYNC B"},
		{"same label in choice arms", "CHOICE(A, A) ENDCHOICE FAILOVER(B, B) ENDFAILOVER", "CHOICE(A, A) ENDCHOICE FAILOVER(B, B) ENDFAILOVER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse("t", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.src, err)
			}
			if got := w.String(); got != tt.want {
				t.Errorf("Parse(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	deep := strings.Repeat("FORK(", 65) + "A"
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", `wf.bedwe:1:1: expected a service or pattern, found end of input`},
		{"only comment", "# nothing\n", `wf.bedwe:2:1: expected a service or pattern, found end of input`},
		{"fork missing paren", "S1 S2\nFORK(S3, S4\n  SYNC", `wf.bedwe:3:3: expected "," or ")" after FORK branch, found "SYNC"`},
		{"wrong closer", "FORK(A, B) ENDCHOICE", `wf.bedwe:1:12: expected "SYNC" to close FORK at 1:1, found "ENDCHOICE"`},
		{"missing closer", "FIRST(A, B)", `wf.bedwe:1:12: expected "ENDFIRST" to close FIRST at 1:1, found end of input`},
		{"failover closer", "FAILOVER(A, B) SYNC", `wf.bedwe:1:16: expected "ENDFAILOVER" to close FAILOVER at 1:1, found "SYNC"`},
		{"no paren", "FORK A, B) SYNC", `wf.bedwe:1:6: expected "(" after FORK, found "A"`},
		{"stray sync", "S1 SYNC", `wf.bedwe:1:4: expected a service, a pattern or end of input, found "SYNC" (SYNC without a matching FORK)`},
		{"stray paren", "S1 )", `wf.bedwe:1:4: expected a service, a pattern or end of input, found ")" (unbalanced ")")`},
		{"empty branch", "FORK(A, ) SYNC", `wf.bedwe:1:9: expected a service or pattern to start FORK branch 2, found ")"`},
		{"one branch", "FORK(A) SYNC", `wf.bedwe:1:1: FORK needs at least 2 branches, found 1`},
		{"one arm", "CHOICE(A B) ENDCHOICE", `wf.bedwe:1:1: CHOICE needs at least 2 arms, found 1`},
		{"choice arm separator", "CHOICE(A; B) ENDCHOICE", `wf.bedwe:1:9: unexpected character ';'`},
		{"unknown attr", "S1[foo=1]", `wf.bedwe:1:4: unknown attribute "foo" (known: timeout, retries, backoff, once, out, expect, reads)`},
		{"bad attr values", "S1[timeout=0s, retries=101,\nbackoff=5s..1s, once=yes]",
			"wf.bedwe:1:12: timeout must be greater than zero, found \"0s\"\n" +
				"wf.bedwe:1:24: retries must be an integer from 0 to 100, found \"101\"\n" +
				"wf.bedwe:2:9: backoff minimum 5s is greater than its maximum 1s\n" +
				"wf.bedwe:2:22: once must be true or false, found \"yes\""},
		{"bad duration", "S1[expect=soon]", `wf.bedwe:1:11: expect must be a duration such as 30s, 500ms or 2m, found "soon"`},
		{"bad backoff", "S1[backoff=5s]", `wf.bedwe:1:12: backoff must be MIN..MAX durations such as 500ms..10s, found "5s"`},
		{"negative duration", "S1[timeout=-5s]", `wf.bedwe:1:12: timeout must be greater than zero, found "-5s"`},
		{"keyword out", "S1[out=IF]", `wf.bedwe:1:8: expected a value for attribute out, found "IF"`},
		{"duplicate attr", "S1[timeout=1s, timeout=2s]", `wf.bedwe:1:16: duplicate attribute timeout on S1`},
		{"empty attrs", "S1[]", `wf.bedwe:1:4: expected attribute name in the attributes of S1, found "]"`},
		{"attr trailing comma", "S1[timeout=3s,]", `wf.bedwe:1:15: expected attribute name in the attributes of S1, found "]"`},
		{"attr missing equals", "S1[timeout 3s]", `wf.bedwe:1:12: expected "=" after attribute timeout, found "3s"`},
		{"attr unclosed", "S1[timeout=3s S2", `wf.bedwe:1:15: expected "," or "]" after attribute timeout, found "S2"`},
		{"reads unknown label", "A B[reads=(A, Z)]", `wf.bedwe:1:3: B reads "Z", which no step before it produces (available: A)`},
		{"reads sibling branch", "FORK(A, B[reads=(A)]) SYNC", `wf.bedwe:1:9: B reads "A", which no step before it produces (no output labels are available here)`},
		{"reads trailing comma", "A B[reads=(A,)]", `wf.bedwe:1:14: expected an output label in the reads list of B, found ")"`},
		{"reads no comma", "A B[reads=(A A)]", `wf.bedwe:1:14: expected "," or ")" in the reads list of B, found "A"`},
		{"reads twice", "A B[reads=(A, A)]", `wf.bedwe:1:11: reads names "A" twice`},
		{"reads unclosed", "A B[reads=(A]", `wf.bedwe:1:13: expected "," or ")" in the reads list of B, found "]"`},
		{"list for timeout", "A B[timeout=(A)]", `wf.bedwe:1:13: timeout must be a duration such as 30s, 500ms or 2m, found "(A)"`},
		{"parallel label", "FORK(A, B C A) SYNC", `wf.bedwe:1:13: output label "A" is produced by parallel branches 1 and 2 of FORK at 1:1 (set out=... to tell them apart)`},
		{"parallel out label", "FIRST(A[out=x], FORK(B[out=x], C) SYNC) ENDFIRST",
			`wf.bedwe:1:22: output label "x" is produced by parallel branches 1 and 2 of FIRST at 1:1 (set out=... to tell them apart)`},
		{"unknown guard label", "A FORK(B, C) SYNC CHOICE(IF(B > 1) D, IF(Z) E) ENDCHOICE",
			`wf.bedwe:1:39: guard "Z" names "Z", which no step before it produces (available: A, B, C)`},
		{"guard sees only earlier", "CHOICE(IF(B) A, ELSE B) ENDCHOICE", `wf.bedwe:1:8: guard "B" names "B", which no step before it produces (no output labels are available here)`},
		{"guard sibling branch", "FORK(A, CHOICE(IF(A) B, ELSE C) ENDCHOICE) SYNC", `wf.bedwe:1:16: guard "A" names "A", which no step before it produces (no output labels are available here)`},
		{"guard out label", "A CHOICE(IF(out.zz) D, ELSE E) ENDCHOICE", `wf.bedwe:1:10: guard "out.zz" reads out["zz"], which no step before it produces (available: A)`},
		{"guard syntax", "A CHOICE(IF(A +) D, ELSE E) ENDCHOICE", `wf.bedwe:1:10: guard "A +" does not compile: unexpected token EOF (column 3)`},
		{"guard not bool", "A CHOICE(IF(1 + 2) D, ELSE E) ENDCHOICE", `wf.bedwe:1:10: guard "1 + 2" does not compile: expected bool, but got int`},
		{"empty guard", "A CHOICE(IF( ) D, ELSE E) ENDCHOICE", `wf.bedwe:1:14: empty guard expression after IF`},
		{"unterminated guard", "A CHOICE(IF(A > (1 D, ELSE E) ENDCHOICE", `wf.bedwe:1:13: unterminated guard expression: expected ")" (IF at 1:10)`},
		{"unterminated guard string", "A CHOICE(IF(A == \"x) D, ELSE E) ENDCHOICE", `wf.bedwe:1:13: unterminated string in guard expression (IF at 1:10)`},
		{"mixed arms", "A CHOICE(IF(A > 1) D, E) ENDCHOICE", `wf.bedwe:1:23: CHOICE at 1:3 mixes guarded and unguarded arms: arm 2 needs IF(...) or ELSE (or drop every guard)`},
		{"else not last", "A CHOICE(ELSE D, IF(A) E) ENDCHOICE", `wf.bedwe:1:10: ELSE must be the last arm of CHOICE at 1:3`},
		{"two else", "A CHOICE(IF(A) C, ELSE D, ELSE E) ENDCHOICE", `wf.bedwe:1:19: ELSE must be the last arm of CHOICE at 1:3`},
		{"else without body", "A CHOICE(IF(true) A, ELSE) ENDCHOICE", `wf.bedwe:1:26: expected a service or pattern after ELSE in CHOICE arm 2, found ")"`},
		{"if without paren", "A CHOICE(IF A, B) ENDCHOICE", `wf.bedwe:1:13: expected "(" after IF, found "A"`},
		{"if in fork", "A FORK(IF(A) D, E) SYNC", `wf.bedwe:1:8: IF guards are only allowed on CHOICE arms, not in FORK`},
		{"if at top", "A IF(x) B", `wf.bedwe:1:3: expected a service, a pattern or end of input, found "IF" (IF and ELSE only start CHOICE arms)`},
		{"bad char", "A @ B", `wf.bedwe:1:3: unexpected character '@'`},
		{"nul", "A\nB\x00", `wf.bedwe:2:2: NUL byte in input`},
		{"bad utf8", "A \xff", `wf.bedwe:1:3: invalid UTF-8 byte 0xff in input`},
		{"depth", deep, `wf.bedwe:1:321: nesting depth 65 exceeds the limit of 64`},
		{"several", "FORK(A) SYNC CHOICE(B) ENDCHOICE",
			"wf.bedwe:1:1: FORK needs at least 2 branches, found 1\nwf.bedwe:1:14: CHOICE needs at least 2 arms, found 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse("wf.bedwe", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse(%q) = %s, want error %q", tt.src, w, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse(%q) error\n got %s\nwant %s", tt.src, got, tt.want)
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is %T, want a non-empty ErrorList", err)
			}
			if list[0].File != "wf.bedwe" || list[0].Pos.Line == 0 {
				t.Errorf("first error lacks file or position: %+v", list[0])
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
		src  string
		want string
	}{
		{"input size", Limits{MaxInputBytes: 10}, "S1 S2 S3 S4 S5", "f:1:1: input is 14 bytes, exceeds the limit of 10 bytes"},
		{"name length", Limits{MaxNameLen: 4}, "S1 LONGNAME", `f:1:4: service name "LONGNAME" is 8 bytes long, exceeds the limit of 4`},
		{"out length", Limits{MaxNameLen: 4}, "S1[out=LONGLABEL]", `f:1:1: output label "LONGLABEL" is 9 bytes long, exceeds the limit of 4`},
		{"services", Limits{MaxServices: 3}, "A B C D E", "f:1:7: service count exceeds the limit of 3"},
		{"arms", Limits{MaxArms: 2}, "FORK(A, B, C) SYNC", "f:1:1: FORK has 3 branches, exceeds the limit of 2"},
		{"depth", Limits{MaxDepth: 1}, "FORK(A, CHOICE(B, C) ENDCHOICE) SYNC", "f:1:9: nesting depth 2 exceeds the limit of 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithLimits("f", []byte(tt.src), tt.lim)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %s", err, tt.want)
			}
			// Negative limits switch the check off.
			off := Limits{MaxInputBytes: -1, MaxNameLen: -1, MaxServices: -1, MaxArms: -1, MaxDepth: -1}
			if _, err := ParseWithLimits("f", []byte(tt.src), off); err != nil {
				t.Errorf("with limits off: %v", err)
			}
		})
	}
	// The default depth limit is exactly reachable.
	var b strings.Builder
	for i := range 64 {
		fmt.Fprintf(&b, "FORK(A%d, ", i)
	}
	src := b.String() + "B" + strings.Repeat(") SYNC", 64)
	if _, err := Parse("f", []byte(src)); err != nil {
		t.Errorf("64-deep nesting: %v", err)
	}
}

func TestTooManyErrors(t *testing.T) {
	src := strings.Repeat("S[foo=1] ", maxErrors+5)
	_, err := Parse("f", []byte(src))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("got %v", err)
	}
	if len(list) != maxErrors+1 || !strings.Contains(list[maxErrors].Msg, "too many errors (5 more not shown)") {
		t.Errorf("got %d errors, last %q", len(list), list[len(list)-1].Msg)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "a.bedwe", Pos: Pos{Line: 3, Col: 14}, Msg: "boom"}, "a.bedwe:3:14: boom"},
		{Error{Pos: Pos{Line: 3, Col: 14}, Msg: "boom"}, "3:14: boom"},
		{Error{File: "a.bedwe", Msg: "boom"}, "a.bedwe: boom"},
		{Error{Msg: "boom"}, "boom"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
	list := ErrorList{&tt0, &tt1}
	if got := list.Error(); got != "f:1:1: one\nf:2:1: two" {
		t.Errorf("ErrorList.Error() = %q", got)
	}
	var e *Error
	if !errors.As(error(list), &e) || e.Msg != "one" {
		t.Errorf("errors.As through ErrorList failed: %v", e)
	}
}

var (
	tt0 = Error{File: "f", Pos: Pos{Line: 1, Col: 1}, Msg: "one"}
	tt1 = Error{File: "f", Pos: Pos{Line: 2, Col: 1}, Msg: "two"}
)

// A residual (a join's stored continuation) may name labels produced
// before it; everything else is still checked.
func TestParseResidualAcceptsEarlierLabels(t *testing.T) {
	src := `CHOICE(IF(S1.ok && out["tile-index"] != nil) S4, ELSE S5) ENDCHOICE S6`
	if _, err := Parse("whole", []byte(src)); err == nil {
		t.Fatal("Parse must refuse a guard naming labels no step before it produces")
	}
	w, err := ParseResidual("rest", []byte(src))
	if err != nil {
		t.Fatalf("ParseResidual: %v", err)
	}
	if got := w.String(); got != src {
		t.Errorf("residual = %q, want %q", got, src)
	}
	for _, bad := range []string{
		`CHOICE(IF(S1.ok) S4) ENDCHOICE`,         // one arm
		`CHOICE(IF(S1 +) S4, ELSE S5) ENDCHOICE`, // does not compile
		`FORK(A, A) SYNC`,                        // one label from two branches
	} {
		if _, err := ParseResidual("rest", []byte(bad)); err == nil {
			t.Errorf("ParseResidual(%q) accepted it", bad)
		}
	}
}

// reads= takes a list, "()" or a single label; its canonical form is the
// parenthesised list, which parses back to the same tree.
func TestParseReads(t *testing.T) {
	for _, tt := range []struct{ src, canon string }{
		{"A B C[reads=(A, B)]", "A B C[reads=(A, B)]"},
		{"A B C[reads=( B ,A )]", "A B C[reads=(B, A)]"},
		{"A B[reads=()]", "A B[reads=()]"},
		{"A B[reads=A, timeout=1s]", "A B[reads=(A), timeout=1s]"},
		{"A[out=x] FORK(B[reads=(x)], C) SYNC D[reads=(B, C, x)]", "A[out=x] FORK(B[reads=(x)], C) SYNC D[reads=(B, C, x)]"},
	} {
		w, err := Parse("wf", []byte(tt.src))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.src, err)
		}
		if got := w.String(); got != tt.canon {
			t.Errorf("Parse(%q) = %q, want %q", tt.src, got, tt.canon)
		}
		again, err := Parse("wf", []byte(w.String()))
		if err != nil || !again.Equal(w) {
			t.Errorf("canonical %q does not parse back to the same tree: %v", w, err)
		}
	}
	w, _ := Parse("wf", []byte("A B C[reads=(B, A)] D[reads=()] E"))
	for i, want := range []struct {
		labels   []string
		declared bool
	}{{nil, false}, {nil, false}, {[]string{"B", "A"}, true}, {[]string{}, true}, {nil, false}} {
		got, declared := w.Steps[i].(*Service).Reads()
		if declared != want.declared || !slices.Equal(got, want.labels) {
			t.Errorf("step %d Reads() = %v, %v; want %v, %v", i, got, declared, want.labels, want.declared)
		}
	}
}
