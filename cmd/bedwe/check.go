package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/bedwe/bedwe/grammar"
	"github.com/urfave/cli/v2"
)

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "validate workflow files",
		ArgsUsage: "FILE... (- for standard input)",
		Description: "check parses each workflow and runs the static checks: every pattern has at\n" +
			"least two branches, no output label is produced by two parallel branches,\n" +
			"guards compile and name only labels produced before them, and the workflow\n" +
			"is within the size and nesting limits. A valid file prints one summary line;\n" +
			"an invalid one prints FILE:LINE:COL: message lines on standard error and the\n" +
			"command exits with status 1.\n\n" +
			"Examples:\n" +
			"   bedwe check examples/fig2.bedwe\n" +
			"   bedwe check -o json wf.bedwe\n" +
			"   echo 'S1 FORK(S2, S3) SYNC S4' | bedwe check -",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "output format: text or json"},
		},
		Action: runCheck,
	}
}

// checkResult is the JSON form of one file's check.
type checkResult struct {
	File     string       `json:"file"`
	Valid    bool         `json:"valid"`
	Services int          `json:"services"`
	Depth    int          `json:"depth"`
	Widest   int          `json:"widest"`
	Errors   []checkError `json:"errors"`
}

type checkError struct {
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

func runCheck(c *cli.Context) error {
	format := c.String("output")
	if format != "text" && format != "json" {
		return cli.Exit(fmt.Sprintf("unknown output format %q: use text or json", format), 1)
	}
	if c.NArg() == 0 {
		return cli.Exit("check needs a workflow FILE (or - for standard input); see bedwe check --help", 1)
	}
	failed := false
	for _, name := range c.Args().Slice() {
		src, display, err := readWorkflowSource(c, name)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		res := checkResult{File: display, Errors: []checkError{}}
		w, perr := grammar.Parse(display, src)
		list, err := workflowErrors(perr)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		if perr == nil {
			res.Valid = true
			res.Services, res.Depth, res.Widest = grammar.Stats(w)
		}
		for _, e := range list {
			res.Errors = append(res.Errors, checkError{Line: e.Pos.Line, Col: e.Pos.Col, Message: e.Msg})
		}
		failed = failed || !res.Valid
		if format == "json" {
			out, _ := json.Marshal(res)
			fmt.Fprintln(c.App.Writer, string(out))
			continue
		}
		if !res.Valid {
			fmt.Fprintln(c.App.ErrWriter, perr)
			continue
		}
		fmt.Fprintf(c.App.Writer, "%s: ok — %d %s, depth %d, widest pattern %d\n",
			display, res.Services, plural(res.Services, "service", "services"), res.Depth, res.Widest)
	}
	if failed {
		return cli.Exit("", 1)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// workflowErrors unpacks a parse error into its list; an error that is not
// about the workflow text is returned as err.
func workflowErrors(perr error) (grammar.ErrorList, error) {
	if perr == nil {
		return nil, nil
	}
	var list grammar.ErrorList
	if !errors.As(perr, &list) {
		return nil, perr
	}
	return list, nil
}

// readWorkflowSource reads a workflow file, or standard input for "-". It
// reads at most one byte past the default input limit so that an enormous
// input is refused by the parser without being held in memory.
func readWorkflowSource(c *cli.Context, name string) (src []byte, display string, err error) {
	limit := int64(grammar.DefaultLimits().MaxInputBytes) + 1
	if name == "-" {
		r := c.App.Reader
		if r == nil {
			r = os.Stdin
		}
		src, err = io.ReadAll(io.LimitReader(r, limit))
		if err != nil {
			return nil, "", fmt.Errorf("read standard input: %w", err)
		}
		return src, "<stdin>", nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, "", fmt.Errorf("read workflow: %w", err)
	}
	defer f.Close()
	src, err = io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, "", fmt.Errorf("read workflow %s: %w", name, err)
	}
	return src, name, nil
}
