package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	exprparser "github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"
)

// Guard data model. A guard expression (expr-lang/expr) sees:
//   - input: the workflow input, decoded from JSON;
//   - out: a map from output label to that step's decoded JSON output;
//   - every label that is a valid expr identifier (and is not input, out or
//     an expr keyword) as a top-level variable, so `tiles.count > 3` and
//     `out.tiles.count > 3` mean the same; other labels (with '-' or '.')
//     are reachable as out["my-label"].
//
// A guard must evaluate to a bool.

// exprReserved are words expr-lang gives a meaning of its own.
var exprReserved = map[string]bool{
	"not": true, "in": true, "or": true, "and": true, "matches": true, "contains": true,
	"startsWith": true, "endsWith": true, "let": true, "if": true, "else": true,
	"true": true, "false": true, "nil": true, "input": true, "out": true,
}

// IsGuardVar reports whether output label l is visible to guards as a
// top-level variable (besides out[l]).
func IsGuardVar(l string) bool {
	if l == "" || exprReserved[l] {
		return false
	}
	for i, r := range l {
		if r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r)) {
			continue
		}
		return false
	}
	return true
}

// CompileGuard compiles a guard expression for a CHOICE arm whose
// predecessors produce the given output labels. It fails when the text does
// not compile, does not yield a bool, or names a label not in labels (as a
// variable or as out.LABEL / out["LABEL"]).
func CompileGuard(src string, labels []string) (*vm.Program, error) {
	known := make(map[string]bool, len(labels))
	for _, l := range labels {
		known[l] = true
	}
	return compileGuard(src, func(l string) bool { return known[l] }, func() []string { return labels })
}

// compileGuard is CompileGuard with label membership as a function, so the
// checker can pass its live set without copying it; list is only called to
// word an error.
func compileGuard(src string, known func(string) bool, list func() []string) (*vm.Program, error) {
	env := types.Map{"input": types.Any, "out": types.Map{types.Extra: types.Any}}
	// Declare only the identifiers the guard uses, so compiling costs the
	// size of the guard, not of the workflow.
	if tree, err := exprparser.Parse(src); err == nil {
		ast.Walk(&tree.Node, identVisitor(func(name string) {
			if IsGuardVar(name) && known(name) {
				env[name] = types.Any
			}
		}))
	}
	prog, err := expr.Compile(src, expr.Env(env), expr.AsBool())
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			if name, ok := strings.CutPrefix(fe.Message, "unknown name "); ok {
				return nil, fmt.Errorf("guard %s names %q, which no step before it produces%s", short(src), name, knownHint(list()))
			}
			return nil, fmt.Errorf("guard %s does not compile: %s (column %d)", short(src), fe.Message, fe.Column+1)
		}
		return nil, fmt.Errorf("guard %s does not compile: %w", short(src), err)
	}
	v := &outVisitor{known: known}
	node := prog.Node()
	ast.Walk(&node, v)
	if v.missing != "" {
		return nil, fmt.Errorf("guard %s reads out[%q], which no step before it produces%s", short(src), v.missing, knownHint(list()))
	}
	return prog, nil
}

// identVisitor calls itself for every identifier in an expression.
type identVisitor func(name string)

func (f identVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		f(id.Value)
	}
}

// knownHint lists a few of the labels a guard could use.
func knownHint(labels []string) string {
	if len(labels) == 0 {
		return " (no output labels are available here)"
	}
	l := append([]string(nil), labels...)
	sort.Strings(l)
	if len(l) > 8 {
		return fmt.Sprintf(" (available: %s, and %d more)", strings.Join(l[:8], ", "), len(l)-8)
	}
	return " (available: " + strings.Join(l, ", ") + ")"
}

// outVisitor finds out.LABEL and out["LABEL"] with a label not known.
type outVisitor struct {
	known   func(string) bool
	missing string
}

func (v *outVisitor) Visit(n *ast.Node) {
	m, ok := (*n).(*ast.MemberNode)
	if !ok || v.missing != "" {
		return
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok || id.Value != "out" {
		return
	}
	if s, ok := m.Property.(*ast.StringNode); ok && !v.known(s.Value) {
		v.missing = s.Value
	}
}

// GuardEnv builds the environment a guard runs in from the workflow input and
// the outputs so far (label -> JSON). Values that are not valid JSON are
// passed as strings; an empty input is nil.
func GuardEnv(input json.RawMessage, outputs map[string]json.RawMessage) map[string]any {
	out := make(map[string]any, len(outputs))
	env := make(map[string]any, len(outputs)+2)
	for l, raw := range outputs {
		v := decodeJSON(raw)
		out[l] = v
		if IsGuardVar(l) {
			env[l] = v
		}
	}
	env["input"] = decodeJSON(input)
	env["out"] = out
	return env
}

func decodeJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}
