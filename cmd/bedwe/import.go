package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/grammar/wfcommons"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "convert workflows from other systems into the bedwe language",
		Description: "Importers read another system's workflow description and write an equivalent\n" +
			"bedwe workflow. Available: wfcommons (WfFormat JSON from the WfCommons project).\n\n" +
			"Example:\n   bedwe import wfcommons montage.json -o montage.bedwe",
		Subcommands:     []*cli.Command{importWfcommonsCommand()},
		HideHelpCommand: true,
	}
}

func importWfcommonsCommand() *cli.Command {
	return &cli.Command{
		Name:      "wfcommons",
		Usage:     "convert a WfCommons instance (WfFormat 1.3-1.6 JSON) into a bedwe workflow",
		ArgsUsage: "FILE.json",
		Description: "Every task becomes a service named after it, carrying expect=<runtime x --scale>.\n" +
			"Series-parallel DAGs convert exactly. Others cannot be written with FORK/SYNC as they\n" +
			"are: the importer adds as few dependencies as it can while keeping the critical path,\n" +
			"and reports what it added. The workflow goes to stdout (or -o FILE) after a '#' header;\n" +
			"a one-line summary goes to stderr.\n\n" +
			"To replay the workflow on a testnet with sleep builtins, write the input with --input\n" +
			"and declare on every node:  patterns: [{match: \"*\", kind: sleep, from_request: true}]\n\n" +
			"Examples:\n" +
			"   bedwe import wfcommons montage.json > montage.bedwe\n" +
			"   bedwe import wfcommons montage.json --scale 0.01 --prefix wf. -o montage.bedwe\n" +
			"   bedwe import wfcommons cycles.json --scale 0.01 --input sleeps.json -o cycles.bedwe\n" +
			"   bedwe import wfcommons --json blast.json -o /dev/null    # summary as JSON",
		Flags: []cli.Flag{
			&cli.Float64Flag{Name: "scale", Value: 1, Usage: "multiply recorded runtimes by `FACTOR` for expect= (0.01 replays 6 min in 3.6 s)"},
			&cli.StringFlag{Name: "prefix", Usage: "put `P` in front of every service name (letters, digits, _ - .)"},
			&cli.DurationFlag{Name: "min-sleep", Usage: "write no expect= below `DURATION` (never below 1ms)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the workflow to `FILE` instead of stdout"},
			&cli.StringFlag{Name: "input", Usage: "also write the workflow input {\"sleep_ms\": {service: ms}} to `FILE`"},
			&cli.BoolFlag{Name: "json", Usage: "print the summary on stderr as one JSON object"},
		},
		Action: runImportWfcommons,
	}
}

// importOptions are the verb's flags.
type importOptions struct {
	scale    float64
	prefix   string
	minSleep time.Duration
	output   string
	input    string
	json     bool
}

// trailingFlags parses flags written after FILE (urfave/cli stops at the
// first argument) over the values already parsed, and returns the
// remaining arguments.
func (o *importOptions) trailingFlags(args []string) ([]string, error) {
	fs := flag.NewFlagSet("wfcommons", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Float64Var(&o.scale, "scale", o.scale, "")
	fs.StringVar(&o.prefix, "prefix", o.prefix, "")
	fs.DurationVar(&o.minSleep, "min-sleep", o.minSleep, "")
	fs.StringVar(&o.output, "output", o.output, "")
	fs.StringVar(&o.output, "o", o.output, "")
	fs.StringVar(&o.input, "input", o.input, "")
	fs.BoolVar(&o.json, "json", o.json, "")
	var rest []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			rest = append(rest, args[0])
			args = args[1:]
		}
	}
	return rest, nil
}

// importSummary is the --json summary.
type importSummary struct {
	File                   string  `json:"file"`
	Name                   string  `json:"name,omitempty"`
	Output                 string  `json:"output,omitempty"`
	Tasks                  int     `json:"tasks"`
	Edges                  int     `json:"edges"`
	TransitiveEdges        int     `json:"transitive_edges"`
	AddedEdges             int     `json:"added_edges"`
	AddedPairs             int     `json:"added_pairs"`
	SeriesParallel         bool    `json:"series_parallel"`
	CriticalPathS          float64 `json:"critical_path_s"`
	ConvertedCriticalPathS float64 `json:"converted_critical_path_s"`
	Growth                 float64 `json:"critical_path_growth"`
	Scale                  float64 `json:"scale"`
}

func runImportWfcommons(c *cli.Context) error {
	fail := func(format string, a ...any) error {
		return cli.Exit("import wfcommons: "+fmt.Sprintf(format, a...), 1)
	}
	o := importOptions{
		scale:    c.Float64("scale"),
		prefix:   c.String("prefix"),
		minSleep: c.Duration("min-sleep"),
		output:   c.String("output"),
		input:    c.String("input"),
		json:     c.Bool("json"),
	}
	args := c.Args().Slice()
	if len(args) == 0 {
		return fail("missing FILE.json (see bedwe import wfcommons --help)")
	}
	file := args[0]
	rest, err := o.trailingFlags(args[1:])
	if err != nil {
		return fail("%v", err)
	}
	if len(rest) > 0 {
		return fail("one FILE expected, also got %q", rest)
	}
	if !(o.scale > 0) {
		return fail("--scale %v: want a number greater than 0, e.g. 0.01", o.scale)
	}
	if o.minSleep < 0 {
		return fail("--min-sleep %v: want a non-negative duration", o.minSleep)
	}

	f, err := os.Open(file)
	if err != nil {
		return fail("%v", err)
	}
	inst, err := wfcommons.Load(f)
	f.Close()
	if err != nil {
		return fail("%s: %v", file, err)
	}
	res, err := wfcommons.Convert(inst, wfcommons.Options{Scale: o.scale, ServicePrefix: o.prefix, MinSleep: o.minSleep})
	if err != nil {
		return fail("%s: %v", file, err)
	}

	var text bytes.Buffer
	if err := wfcommons.WriteText(&text, res, filepath.Base(file)); err != nil {
		return fail("%v", err)
	}
	if o.output == "" || o.output == "-" {
		if _, err := c.App.Writer.Write(text.Bytes()); err != nil {
			return fail("writing the workflow: %v", err)
		}
	} else if err := os.WriteFile(o.output, text.Bytes(), 0o644); err != nil {
		return fail("%v", err)
	}
	if o.input != "" {
		data, err := json.MarshalIndent(map[string]any{"sleep_ms": res.SleepMillis()}, "", "  ")
		if err != nil {
			return fail("encoding the input: %v", err)
		}
		if err := os.WriteFile(o.input, append(data, '\n'), 0o644); err != nil {
			return fail("%v", err)
		}
	}
	return writeImportSummary(c.App.ErrWriter, file, o, res)
}

func writeImportSummary(w io.Writer, file string, o importOptions, res *wfcommons.Result) error {
	if w == nil {
		w = os.Stderr
	}
	var err error
	if o.json {
		err = json.NewEncoder(w).Encode(importSummary{
			File: file, Name: res.Name, Output: o.output,
			Tasks: res.Tasks, Edges: res.Edges, TransitiveEdges: res.TransitiveEdges,
			AddedEdges: res.AddedEdges, AddedPairs: res.AddedPairs, SeriesParallel: res.SeriesParallel,
			CriticalPathS: res.CriticalPath.Seconds(), ConvertedCriticalPathS: res.ConvertedCriticalPath.Seconds(),
			Growth: res.Growth(), Scale: res.Scale,
		})
	} else {
		_, err = fmt.Fprintf(w, "imported %s: %s\n", file, res.Summary())
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("import wfcommons: writing the summary: %v", err), 1)
	}
	return nil
}
