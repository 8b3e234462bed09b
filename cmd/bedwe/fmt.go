package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/urfave/cli/v2"
)

func fmtCommand() *cli.Command {
	return &cli.Command{
		Name:      "fmt",
		Usage:     "print workflow files in canonical layout",
		ArgsUsage: "FILE... (- for standard input)",
		Description: "fmt prints each workflow in the canonical layout: consecutive services share a\n" +
			"line, every pattern starts a line, short patterns stay on one line and long\n" +
			"ones put each branch on its own indented lines. '#' comments are kept.\n" +
			"An invalid workflow is reported (FILE:LINE:COL: message) and never rewritten.\n\n" +
			"Examples:\n" +
			"   bedwe fmt wf.bedwe            # print the formatted workflow\n" +
			"   bedwe fmt -w examples/*.bedwe # rewrite files in place\n" +
			"   bedwe fmt -l examples/*.bedwe # list files that need formatting (exit 1 if any)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "write", Aliases: []string{"w"}, Usage: "rewrite each file in place (atomically) instead of printing it"},
			&cli.BoolFlag{Name: "list", Aliases: []string{"l", "check"}, Usage: "list files whose layout differs from fmt's and exit 1 if there are any"},
		},
		Action: runFmt,
	}
}

func runFmt(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.Exit("fmt needs a workflow FILE (or - for standard input); see bedwe fmt --help", 1)
	}
	write, list := c.Bool("write"), c.Bool("list")
	failed := false
	for _, name := range c.Args().Slice() {
		if write && name == "-" {
			return cli.Exit("fmt -w cannot rewrite standard input", 1)
		}
		src, display, err := readWorkflowSource(c, name)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		f, perr := grammar.ParseFile(display, src, grammar.DefaultLimits())
		if _, err := workflowErrors(perr); err != nil {
			return cli.Exit(err.Error(), 1)
		}
		if perr != nil {
			fmt.Fprintln(c.App.ErrWriter, perr)
			failed = true
			continue
		}
		out := []byte(grammar.FormatFile(f))
		changed := !bytes.Equal(out, src)
		if list && changed {
			fmt.Fprintln(c.App.Writer, display)
			failed = true
		}
		if write && changed {
			if err := rewriteFile(name, out); err != nil {
				return cli.Exit(err.Error(), 1)
			}
		}
		if !write && !list {
			c.App.Writer.Write(out)
		}
	}
	if failed {
		return cli.Exit("", 1)
	}
	return nil
}

// rewriteFile replaces path with data atomically, keeping its mode, so a
// crash leaves either the old or the new content.
func rewriteFile(path string, data []byte) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", path, err)
	}
	return atomicfile.Write(path, data, info.Mode().Perm())
}
