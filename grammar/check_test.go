package grammar

import (
	"strings"
	"testing"
)

// TestCheckCodeBuilt runs the static checks on trees built in code, which
// may hold what the parser would never produce.
func TestCheckCodeBuilt(t *testing.T) {
	arm := func(k ArmKind, g string, body ...Step) *Arm { return &Arm{Kind: k, Guard: g, Body: seq(body...)} }
	tests := []struct {
		name string
		w    *Workflow
		want string // "" = valid
	}{
		{"valid", seq(svc("A"), &Fork{Branches: []*Workflow{seq(svc("B")), seq(svc("C"))}}), ""},
		{"nil", nil, "empty workflow"},
		{"empty", seq(), "empty workflow"},
		{"empty branch", seq(&Fork{Branches: []*Workflow{seq(svc("B")), seq()}}), "empty FORK branch 2"},
		{"nil step", seq(nil), "invalid step <nil> in workflow"},
		{"bad name", seq(svc("a b")), `service name "a b" contains ' ' (allowed: letters, digits, '_', '-', '.')`},
		{"keyword name", seq(svc("SYNC")), `service name "SYNC" is a reserved keyword`},
		{"empty name", seq(svc("")), "service name is empty"},
		{"unknown attr", seq(svc("A", Attr{"colour", "red"})), `A: unknown attribute "colour" (known: timeout, retries, backoff, once, out, expect, reads)`},
		{"bad attr", seq(svc("A", Attr{AttrRetries, "-1"})), `A: retries must be an integer from 0 to 100, found "-1"`},
		{"dup attr", seq(svc("A", Attr{AttrOnce, "true"}, Attr{AttrOnce, "false"})), "duplicate attribute once on A"},
		{"bad out", seq(svc("A", Attr{AttrOut, "x y"})), `A: out name "x y" contains ' ' (allowed: letters, digits, '_', '-', '.')`},
		{"one branch", seq(&First{Branches: []*Workflow{seq(svc("A"))}}), "FIRST needs at least 2 branches, found 1"},
		{"parallel labels", seq(&Fork{Branches: []*Workflow{seq(svc("A")), seq(svc("A"))}}),
			`output label "A" is produced by parallel branches 1 and 2 of FORK at 0:0 (set out=... to tell them apart)`},
		{"failover may share", seq(&Failover{Branches: []*Workflow{seq(svc("A")), seq(svc("A"))}}), ""},
		{"unbalanced guard", seq(svc("A"), &Choice{Arms: []*Arm{arm(ArmIf, "A) B (", svc("B")), arm(ArmElse, "", svc("C"))}}),
			`guard "A) B (" is not a balanced expression`},
		{"empty guard", seq(svc("A"), &Choice{Arms: []*Arm{arm(ArmIf, "", svc("B")), arm(ArmElse, "", svc("C"))}}), "empty guard expression"},
		{"good guard", seq(svc("A"), &Choice{Arms: []*Arm{arm(ArmIf, "A.ok", svc("B")), arm(ArmElse, "", svc("C"))}}), ""},
		{"bad kind", seq(&Choice{Arms: []*Arm{arm(7, "", svc("B")), arm(ArmPlain, "", svc("C"))}}), "CHOICE arm 1 has invalid kind 7"},
		{"nil arm", seq(&Choice{Arms: []*Arm{nil, arm(ArmPlain, "", svc("C"))}}), "CHOICE arm 1 is nil"},
		{"depth", func() *Workflow {
			w := seq(svc("leaf"))
			for i := range 65 {
				w = seq(&Failover{Branches: []*Workflow{w, seq(svc("x" + strings.Repeat("y", i)))}})
			}
			return w
		}(), "nesting depth 65 exceeds the limit of 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.w, DefaultLimits())
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("Check = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestCheckAcceptsParsedTrees: whatever Parse accepts, Check accepts.
func TestCheckAcceptsParsedTrees(t *testing.T) {
	for _, src := range []string{fig2, "A CHOICE(IF(A.n > 1) B, ELSE C) ENDCHOICE", nestedSource(64)} {
		w, err := Parse("t", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(w, DefaultLimits()); err != nil {
			t.Errorf("Check(%q): %v", src, err)
		}
	}
}
