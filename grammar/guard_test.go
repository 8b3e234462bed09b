package grammar

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/expr-lang/expr"
)

func TestGuardEval(t *testing.T) {
	input := json.RawMessage(`{"mode":"fast","n":3}`)
	outputs := map[string]json.RawMessage{
		"S3":     json.RawMessage(`{"size":12,"tags":["a","b"]}`),
		"my-out": json.RawMessage(`true`),
		"count":  json.RawMessage(`7`),
		"bad":    json.RawMessage(`not json`),
	}
	labels := []string{"S3", "my-out", "count", "bad"}
	tests := []struct {
		guard string
		want  bool
	}{
		{"S3.size > 10", true},
		{"out.S3.size > 10", true},
		{`out["S3"].size == S3.size`, true},
		{`input.mode == "fast" && input.n == 3`, true},
		{`out["my-out"]`, true},
		{"count + 1 == 8", true},
		{`"b" in S3.tags`, true},
		{`bad == "not json"`, true},
		{"S3.size < 10", false},
	}
	env := GuardEnv(input, outputs)
	for _, tt := range tests {
		prog, err := CompileGuard(tt.guard, labels)
		if err != nil {
			t.Fatalf("CompileGuard(%q): %v", tt.guard, err)
		}
		got, err := expr.Run(prog, env)
		if err != nil {
			t.Fatalf("Run(%q): %v", tt.guard, err)
		}
		if got != tt.want {
			t.Errorf("%q = %v, want %v", tt.guard, got, tt.want)
		}
	}
	if _, ok := env["my-out"]; ok {
		t.Error("a label that is not an identifier became a top-level variable")
	}
	if GuardEnv(nil, nil)["input"] != nil {
		t.Error("empty input should be nil")
	}
}

func TestCompileGuardErrors(t *testing.T) {
	tests := []struct {
		guard  string
		labels []string
		want   string
	}{
		{"S9 > 1", []string{"S1"}, `guard "S9 > 1" names "S9", which no step before it produces (available: S1)`},
		{`out["S9"] == 1`, []string{"S1"}, `guard "out[\"S9\"] == 1" reads out["S9"], which no step before it produces (available: S1)`},
		{"S1 +", []string{"S1"}, `guard "S1 +" does not compile: unexpected token EOF (column 4)`},
		{`"text"`, nil, `guard "\"text\"" does not compile: expected bool, but got string`},
	}
	for _, tt := range tests {
		_, err := CompileGuard(tt.guard, tt.labels)
		if err == nil || err.Error() != tt.want {
			t.Errorf("CompileGuard(%q) = %v, want %q", tt.guard, err, tt.want)
		}
	}
	many := make([]string, 20)
	for i := range many {
		many[i] = "L" + strings.Repeat("x", i)
	}
	if _, err := CompileGuard("nope", many); err == nil || !strings.Contains(err.Error(), "and 12 more") {
		t.Errorf("long label list not shortened: %v", err)
	}
}

func TestIsGuardVar(t *testing.T) {
	for l, want := range map[string]bool{
		"S3": true, "_x": true, "été": true, "mProject_ID0000001": true,
		"my-out": false, "a.b": false, "1st": false, "": false,
		"input": false, "out": false, "in": false, "not": false, "true": false,
	} {
		if got := IsGuardVar(l); got != want {
			t.Errorf("IsGuardVar(%q) = %v, want %v", l, got, want)
		}
	}
}
