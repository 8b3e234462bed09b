package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/testnet"
	"github.com/bedwe/bedwe/testnet/bench"
)

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:  "compare",
		Usage: "measure timetable-aware routing against heartbeat-only routing under a rotating power cut",
		Description: `Runs the same workload once per routing mode, each on a fresh testnet of --nodes real
'bedwe node' processes: a generated rotation timetable (zones north and south, each dark
2 h of every 6 h, offset by 3 h, so one half of the mesh is dark at a time with an hour of
full power between cuts) played on a virtual clock at --speed, with every process of a
zone SIGKILLed at its cut and restarted at its restore (as 'bedwe testnet follow' does).
--workflows seeded mixed workflows (sequences of 3-6 sleeps of 100-400 ms, FORKs of 2-4
branches, an unguarded CHOICE, a few 2-3 s steps with expect=3s) are submitted at --rate
per second to nodes that are up; then it waits up to --timeout for all to end.

Per mode: submitted, completed, failed, lost, completion rate, makespan (first submission
to last completion), p50/p95 latency, steps re-run (attempts superseded by a re-route plus
steps that succeeded twice), kills. Written to --out: comparison.json, comparison.csv,
workflows.csv, completions.svg (completions over time, cuts shaded), latency.svg,
rotation.yaml and results.md. A summary goes to stdout (-o json for the full JSON),
progress to stderr. Exit status 2 if a workflow was lost.

Examples:
   bedwe testnet compare --nodes 16 --workflows 1000 --out docs/timetable
   bedwe testnet compare --nodes 8 --workflows 100 --rate 5 -o json --out /tmp/cmp
   bedwe testnet compare --modes heartbeat --nodes 4 --workflows 20 --speed 1800 --out ""`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Usage: "testnet size of every mode (split over the two zones)", Value: 16},
			&cli.IntFlag{Name: "workflows", Usage: "workflows per mode", Value: 1000},
			&cli.Float64Flag{Name: "rate", Usage: "submissions per real second", Value: 10},
			&cli.Float64Flag{Name: "speed", Usage: "virtual clock speed (360: a timetable hour in 10 s)", Value: 360},
			&cli.StringFlag{Name: "modes", Usage: "comma-separated routing modes to run, in order", Value: strings.Join(testnet.CompareModes, ",")},
			&cli.Uint64Flag{Name: "seed", Usage: "workload seed (the same in every mode)", Value: 1},
			&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for the workflows after the last submission", Value: 5 * time.Minute},
			&cli.StringFlag{Name: "out", Usage: "`DIR` for the JSON, CSV, SVG and Markdown (empty: write nothing)", Value: "docs/timetable"},
			&cli.StringFlag{Name: "dir", Usage: "`DIR` for the testnets' directories (default: a temporary one)"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the testnets' directories (node logs) after the run"},
			&cli.StringFlag{Name: "profile", Usage: "node timing profile: testnet or mesh", Value: "testnet"},
			&cli.DurationFlag{Name: "announce", Usage: "presence interval of the nodes", Value: time.Second},
			&cli.StringFlag{Name: "binary", Usage: "bedwe `EXECUTABLE` for the nodes", DefaultText: "this one"},
			outputFlag(),
		},
		Action: runCompare,
	}
}

func runCompare(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	if c.Args().Present() {
		return cli.Exit(fmt.Sprintf("compare takes no arguments (got %q)", c.Args().First()), 1)
	}
	var modes []string
	for _, m := range strings.Split(c.String("modes"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			modes = append(modes, m)
		}
	}
	dir := c.String("dir")
	if dir != "" {
		if _, err := os.Stat(dir); err == nil {
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				return cli.Exit(fmt.Sprintf("--dir %s is not empty: give a new directory", dir), 1)
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmp, err := testnet.Compare(ctx, testnet.CompareOptions{
		Nodes: c.Int("nodes"), Workflows: c.Int("workflows"), Rate: c.Float64("rate"), Speed: c.Float64("speed"),
		Modes: modes, Seed: c.Uint64("seed"), Timeout: c.Duration("timeout"),
		Dir: dir, Keep: c.Bool("keep") || dir != "", Binary: c.String("binary"),
		Profile: c.String("profile"), Announce: c.Duration("announce"), Progress: os.Stderr,
	})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if out := c.String("out"); out != "" {
		files, err := bench.WriteComparison(out, cmp)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", strings.Join(files, ", "))
	}
	if asJSON {
		if err := printJSON(cmp); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MODE\tSUBMITTED\tCOMPLETED\tFAILED\tLOST\tRATE\tMAKESPAN S\tP50 MS\tP95 MS\tRE-RUN\tKILLS")
		for _, m := range cmp.Modes {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f%%\t%.1f\t%.0f\t%.0f\t%d (%d+%d)\t%d\n", m.Mode, m.Submitted, m.Completed, m.Failed, m.Lost,
				100*m.CompletionRate, float64(m.MakespanMs)/1000, m.LatencyP50Ms, m.LatencyP95Ms, m.StepsRerun, m.Superseded, m.Duplicates, m.Kills)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, m := range cmp.Modes {
		if m.Lost > 0 {
			return cli.Exit(fmt.Sprintf("mode %s lost %d workflows", m.Mode, m.Lost), 2)
		}
	}
	return nil
}
