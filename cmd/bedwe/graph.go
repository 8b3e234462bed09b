package main

import (
	"fmt"
	"io"

	"github.com/bedwe/bedwe/grammar"
	"github.com/urfave/cli/v2"
)

func graphCommand() *cli.Command {
	return &cli.Command{
		Name:      "graph",
		Usage:     "draw a workflow as a Graphviz or Mermaid graph",
		ArgsUsage: "FILE (- for standard input)",
		Description: "graph prints the control flow of a workflow: a box per service, diamonds for\n" +
			"FORK/SYNC, CHOICE/ENDCHOICE, FIRST/ENDFIRST and FAILOVER/ENDFAILOVER. CHOICE\n" +
			"edges carry their guard (or ELSE); FAILOVER edges carry the order of the tries.\n\n" +
			"Examples:\n" +
			"   bedwe graph examples/fig2.bedwe | dot -Tsvg > fig2.svg\n" +
			"   bedwe graph --format mermaid examples/fig2-guarded.bedwe",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "dot", Usage: "dot (Graphviz) or mermaid"},
		},
		Action: runGraph,
	}
}

func runGraph(c *cli.Context) error {
	format := c.String("format")
	if format != "dot" && format != "mermaid" {
		return cli.Exit(fmt.Sprintf("unknown --format %q: use dot or mermaid", format), 1)
	}
	if c.NArg() != 1 {
		return cli.Exit("graph needs exactly one workflow FILE (or - for standard input); see bedwe graph --help", 1)
	}
	src, display, err := readWorkflowSource(c, c.Args().First())
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	w, perr := grammar.Parse(display, src)
	if _, err := workflowErrors(perr); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if perr != nil {
		fmt.Fprintln(c.App.ErrWriter, perr)
		return cli.Exit("", 1)
	}
	g := grammar.BuildGraph(w)
	if format == "mermaid" {
		_, err = io.WriteString(c.App.Writer, g.Mermaid())
	} else {
		_, err = io.WriteString(c.App.Writer, g.DOT(display))
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("write graph: %v", err), 1)
	}
	return nil
}
