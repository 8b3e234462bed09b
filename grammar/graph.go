package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

// NodeKind tells what a node of a workflow Graph stands for.
type NodeKind int

const (
	// NodeService is a service call.
	NodeService NodeKind = iota
	// NodeOpen opens a pattern: FORK, CHOICE, FIRST or FAILOVER.
	NodeOpen
	// NodeClose closes a pattern: SYNC, ENDCHOICE, ENDFIRST or ENDFAILOVER.
	NodeClose
	// NodeStart is where the workflow begins.
	NodeStart
	// NodeEnd is where the workflow ends.
	NodeEnd
)

// GraphNode is one node of a Graph.
type GraphNode struct {
	ID    string
	Label string
	Kind  NodeKind
}

// GraphEdge is one edge of a Graph; Label is the guard or ELSE on CHOICE
// arms and the try order on FAILOVER branches.
type GraphEdge struct {
	From, To string
	Label    string
}

// Graph is the control-flow graph of a workflow, for drawing.
type Graph struct {
	Nodes []GraphNode
	Edges []GraphEdge
}

// BuildGraph draws w: a start node, a node per service, an opening and a
// closing node per pattern with an edge to and from each branch, and an end
// node.
func BuildGraph(w *Workflow) *Graph {
	g := &Graph{}
	start := g.node("start", NodeStart)
	out := g.seq(w, start, "")
	g.edge(out, g.node("end", NodeEnd), "")
	return g
}

func (g *Graph) node(label string, kind NodeKind) string {
	id := "n" + strconv.Itoa(len(g.Nodes))
	g.Nodes = append(g.Nodes, GraphNode{ID: id, Label: label, Kind: kind})
	return id
}

func (g *Graph) edge(from, to, label string) {
	g.Edges = append(g.Edges, GraphEdge{From: from, To: to, Label: label})
}

// seq adds a sequence entered from node from along an edge labelled label,
// and returns its last node.
func (g *Graph) seq(w *Workflow, from, label string) string {
	if w == nil {
		return from
	}
	for _, s := range w.Steps {
		from = g.step(s, from, label)
		label = ""
	}
	return from
}

// step adds s entered from node from and returns the node it leaves by.
func (g *Graph) step(s Step, from, label string) string {
	var open, close string
	var bodies []*Workflow
	var labels []string
	switch s := s.(type) {
	case *Service:
		id := g.node(s.Name, NodeService)
		g.edge(from, id, label)
		return id
	case *Fork:
		open, close, bodies = "FORK", "SYNC", s.Branches
	case *First:
		open, close, bodies = "FIRST", "ENDFIRST", s.Branches
	case *Failover:
		open, close, bodies = "FAILOVER", "ENDFAILOVER", s.Branches
		for i := range bodies {
			labels = append(labels, strconv.Itoa(i+1))
		}
	case *Choice:
		open, close = "CHOICE", "ENDCHOICE"
		for _, a := range s.Arms {
			bodies = append(bodies, a.Body)
			switch a.Kind {
			case ArmIf:
				labels = append(labels, a.Guard)
			case ArmElse:
				labels = append(labels, "ELSE")
			default:
				labels = append(labels, "")
			}
		}
	default:
		return from
	}
	in := g.node(open, NodeOpen)
	g.edge(from, in, label)
	outs := make([]string, len(bodies))
	for i, b := range bodies {
		l := ""
		if labels != nil {
			l = labels[i]
		}
		outs[i] = g.seq(b, in, l)
	}
	out := g.node(close, NodeClose)
	for _, o := range outs {
		g.edge(o, out, "")
	}
	return out
}

// DOT renders the graph for Graphviz; name becomes the graph's title.
func (g *Graph) DOT(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(name))
	b.WriteString("  rankdir=LR;\n")
	b.WriteString("  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=10];\n")
	for _, n := range g.Nodes {
		attrs := "label=" + dotQuote(n.Label)
		switch n.Kind {
		case NodeOpen, NodeClose:
			attrs += ", shape=diamond, style=filled, fillcolor=\"#eeeeee\""
		case NodeStart, NodeEnd:
			attrs += ", shape=circle"
		}
		fmt.Fprintf(&b, "  %s [%s];\n", n.ID, attrs)
	}
	for _, e := range g.Edges {
		if e.Label != "" {
			fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", e.From, e.To, dotQuote(e.Label))
		} else {
			fmt.Fprintf(&b, "  %s -> %s;\n", e.From, e.To)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// Mermaid renders the graph as a Mermaid flowchart.
func (g *Graph) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	for _, n := range g.Nodes {
		l := mermaidQuote(n.Label)
		switch n.Kind {
		case NodeOpen, NodeClose:
			fmt.Fprintf(&b, "  %s{%s}\n", n.ID, l)
		case NodeStart, NodeEnd:
			fmt.Fprintf(&b, "  %s((%s))\n", n.ID, l)
		default:
			fmt.Fprintf(&b, "  %s[%s]\n", n.ID, l)
		}
	}
	for _, e := range g.Edges {
		if e.Label != "" {
			fmt.Fprintf(&b, "  %s -->|%s| %s\n", e.From, mermaidQuote(e.Label), e.To)
		} else {
			fmt.Fprintf(&b, "  %s --> %s\n", e.From, e.To)
		}
	}
	return b.String()
}

// mermaidQuote quotes a label, writing '#' and '"' as Mermaid entity codes.
func mermaidQuote(s string) string {
	return `"` + strings.NewReplacer("#", "#35;", `"`, "#quot;", "\n", " ").Replace(s) + `"`
}
