package grammar

import (
	"github.com/expr-lang/expr/ast"
	exprparser "github.com/expr-lang/expr/parser"
)

// Names returns the output labels the steps of w can name: the labels its
// services read (reads=) and those its guards name. all is true when some
// step can name any label: a service without reads= (it is given every
// earlier output), or a guard that reaches out other than as out.LABEL or
// out["LABEL"] (out[input.key], len(out)). Nil w names nothing.
//
// A node uses it to tell which outputs nobody ahead in a pack's residual
// workflow can name: such outputs may leave the pack.
func Names(w *Workflow) (names map[string]bool, all bool) {
	names = map[string]bool{}
	return names, !namesIn(w, names)
}

// namesIn adds what w names to names; false when w can name any label.
func namesIn(w *Workflow, names map[string]bool) bool {
	if w == nil {
		return true
	}
	for _, s := range w.Steps {
		switch s := s.(type) {
		case *Service:
			reads, declared := s.Reads()
			if !declared {
				return false
			}
			for _, l := range reads {
				names[l] = true
			}
		case *Fork:
			if !branchNames(s.Branches, names) {
				return false
			}
		case *First:
			if !branchNames(s.Branches, names) {
				return false
			}
		case *Failover:
			if !branchNames(s.Branches, names) {
				return false
			}
		case *Choice:
			for _, a := range s.Arms {
				if a.Kind == ArmIf && !guardNames(a.Guard, names) {
					return false
				}
				if !namesIn(a.Body, names) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

func branchNames(bs []*Workflow, names map[string]bool) bool {
	for _, b := range bs {
		if !namesIn(b, names) {
			return false
		}
	}
	return true
}

// guardNames adds the labels guard src names to names: identifiers that
// can be labels, and out.LABEL / out["LABEL"]. False when it names out in
// any other way, or does not parse.
func guardNames(src string, names map[string]bool) bool {
	tree, err := exprparser.Parse(src)
	if err != nil {
		return false
	}
	v := &guardNameVisitor{names: names, viaMember: map[*ast.IdentifierNode]bool{}}
	ast.Walk(&tree.Node, v)
	return v.outs == len(v.viaMember)
}

// guardNameVisitor collects the labels a guard names and counts its uses
// of out: every one must be an out.LABEL or out["LABEL"].
type guardNameVisitor struct {
	names     map[string]bool
	outs      int
	viaMember map[*ast.IdentifierNode]bool
}

func (v *guardNameVisitor) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.MemberNode:
		if id, ok := x.Node.(*ast.IdentifierNode); ok && id.Value == "out" {
			if s, ok := x.Property.(*ast.StringNode); ok {
				v.names[s.Value] = true
				v.viaMember[id] = true
			}
		}
	case *ast.IdentifierNode:
		switch {
		case x.Value == "out":
			v.outs++
		case IsGuardVar(x.Value):
			v.names[x.Value] = true
		}
	}
}
