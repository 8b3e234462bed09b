package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node/explore"
	"github.com/bedwe/bedwe/node/sim"
)

func simCommand() *cli.Command {
	return &cli.Command{
		Name:  "sim",
		Usage: "explore the protocol core in the deterministic simulator, seed by seed",
		Description: "sim runs the protocol core (node/core) of N nodes in one process on a simulated\n" +
			"network, disk and clock, one seed at a time: each seed draws a workload (workflows\n" +
			"with once steps) and a fault schedule (kills and restarts, pauses, one-way and\n" +
			"two-way cuts, zone power cuts), then heals everything and lets the run converge.\n" +
			"A checker counts every service execution and every durable write: a once step run\n" +
			"twice, a step started before a majority held its hand-over, a superseded chain\n" +
			"that went on, two ends, a wrong result, or an acknowledged workflow that did not\n" +
			"end is a violation. The same seed replays the same run (the trace hash says so).\n\n" +
			"Exit status: 0 when no seed found a violation, 2 when one did, 1 on a usage error.\n\n" +
			"Examples:\n" +
			"   bedwe sim --seeds 10000                       # 10,000 seeds on every core\n" +
			"   bedwe sim --seeds 2000 --loss 0.05 --dup 0.05 --faults 8 -o json\n" +
			"   bedwe sim --seed 4711 --trace                 # replay one seed, event by event\n" +
			"   bedwe sim --scenario list                     # the named fault shapes\n" +
			"   bedwe sim --scenario holder-isolated --seed 3 --trace",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "seeds", Value: 1000, Usage: "how many seeds to run"},
			&cli.Uint64Flag{Name: "first", Value: 1, Usage: "the first seed"},
			&cli.Uint64Flag{Name: "seed", Usage: "run this one seed only (with --trace: print its events)"},
			&cli.BoolFlag{Name: "trace", Usage: "with --seed: print every event of the run"},
			&cli.StringFlag{Name: "scenario", Usage: "run a named fault shape (with --seed: that seed only; list: print them)"},
			&cli.IntFlag{Name: "nodes", Value: 12, Usage: "nodes in the simulated mesh"},
			&cli.IntFlag{Name: "zones", Value: 3, Usage: "power zones (node i is in zone i mod zones)"},
			&cli.IntFlag{Name: "workflows", Value: 6, Usage: "workflows a seed submits"},
			&cli.IntFlag{Name: "faults", Value: 4, Usage: "faults a seed injects"},
			&cli.Float64Flag{Name: "loss", Usage: "chance that a message is lost (0 to 1)"},
			&cli.Float64Flag{Name: "dup", Usage: "chance that a message arrives twice (0 to 1)"},
			&cli.IntFlag{Name: "group", Value: 3, Usage: "acceptors that keep each chain's register (a majority decides)"},
			&cli.IntFlag{Name: "workers", Usage: "seeds run in parallel (0: one per CPU)"},
			outputFlag(),
		},
		Action: runSim,
	}
}

func runSim(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	for _, f := range []string{"loss", "dup"} {
		if v := c.Float64(f); v < 0 || v >= 1 {
			return cli.Exit(fmt.Sprintf("--%s %g: want a chance from 0 up to (not including) 1", f, v), 1)
		}
	}
	for _, f := range []string{"nodes", "zones", "workflows", "faults", "group"} {
		if c.Int(f) < 1 {
			return cli.Exit(fmt.Sprintf("--%s %d: want at least 1", f, c.Int(f)), 1)
		}
	}
	if c.Int("nodes") < c.Int("group") {
		return cli.Exit(fmt.Sprintf("--nodes %d: fewer than the %d acceptors of --group", c.Int("nodes"), c.Int("group")), 1)
	}
	if c.Bool("trace") && !c.IsSet("seed") {
		return cli.Exit("--trace replays one seed: give it with --seed", 1)
	}
	opts := explore.Options{
		Nodes: c.Int("nodes"), Zones: c.Int("zones"), Workflows: c.Int("workflows"),
		Faults: c.Int("faults"), Loss: c.Float64("loss"), Dup: c.Float64("dup"), Group: c.Int("group"),
	}
	out := c.App.Writer
	if name := c.String("scenario"); name != "" {
		return runScenario(c, name, asJSON)
	}
	if c.IsSet("seed") {
		if c.Bool("trace") {
			opts.Trace = func(at sim.Time, line string) { fmt.Fprintf(out, "%12s %s\n", at.Round(time.Microsecond), line) }
		}
		r := explore.Run(c.Uint64("seed"), opts)
		if asJSON {
			if err := json.NewEncoder(out).Encode(r); err != nil {
				return cli.Exit(fmt.Sprintf("write result: %v", err), 1)
			}
		} else {
			fmt.Fprintf(out, "seed %d: hash %s, %d events, %d of %d workflows acknowledged, %d done, %d failed at a once step, %d executions (%d re-runs), %d faults\n",
				r.Seed, r.Hash, r.Events, r.Acked, r.Workflows, r.Done, r.Failed, r.Executions, r.Reruns, r.Faults)
			for _, v := range r.Violations {
				fmt.Fprintf(out, "  violation: %s\n", v)
			}
		}
		if len(r.Violations) > 0 {
			return cli.Exit("", 2)
		}
		return nil
	}
	count := c.Int("seeds")
	if count < 1 {
		return cli.Exit(fmt.Sprintf("--seeds %d: want at least 1", count), 1)
	}
	step := max(count/10, 1)
	progress := func(done int) {
		if done%step == 0 || done == count {
			fmt.Fprintf(c.App.ErrWriter, "%d/%d seeds\n", done, count)
		}
	}
	start := time.Now()
	s := explore.Seeds(c.Uint64("first"), count, c.Int("workers"), opts, progress)
	s.Timed(time.Since(start))
	if asJSON {
		if err := json.NewEncoder(out).Encode(s); err != nil {
			return cli.Exit(fmt.Sprintf("write summary: %v", err), 1)
		}
	} else {
		fmt.Fprintf(out, "%d seeds of %d nodes in %.1f s (%.0f seeds/s): %d workflows, %d acknowledged, %d done, %d failed at a once step; %d executions (%d re-runs); %d faults; %d events; %d violations\n",
			s.Seeds, s.Nodes, s.Seconds, s.SeedsPerSecond, s.Workflows, s.Acked, s.Done, s.FailedOnce, s.Executions, s.Reruns, s.Faults, s.Events, s.Violations)
		if s.Reroutes > 0 {
			fmt.Fprintf(out, "a killed holder's position held again after: p50 %.0f ms, p99 %.0f ms (%d positions)\n", s.RerouteP50, s.RerouteP99, s.Reroutes)
		}
		for _, r := range s.FailingSeeds {
			fmt.Fprintf(out, "seed %d (hash %s): %s\n  replay: bedwe sim --seed %d --trace%s\n", r.Seed, r.Hash, strings.Join(r.Violations, "; "), r.Seed, replayFlags(c))
		}
	}
	if s.Violations > 0 {
		return cli.Exit("", 2)
	}
	return nil
}

// replayFlags repeats the options that shape a seed, for its replay line.
func replayFlags(c *cli.Context) string {
	var b strings.Builder
	for _, f := range []string{"nodes", "zones", "workflows", "faults", "loss", "dup", "group"} {
		if c.IsSet(f) {
			fmt.Fprintf(&b, " --%s %v", f, c.Value(f))
		}
	}
	return b.String()
}

// runScenario runs a named scenario over --seeds seeds (or --seed alone),
// or lists the scenarios.
func runScenario(c *cli.Context, name string, asJSON bool) error {
	out := c.App.Writer
	if name == "list" {
		if asJSON {
			type entry struct {
				Name  string `json:"name"`
				Shape string `json:"shape"`
			}
			var list []entry
			for _, sc := range explore.Scenarios {
				list = append(list, entry{sc.Name, sc.Shape})
			}
			return json.NewEncoder(out).Encode(list)
		}
		for _, sc := range explore.Scenarios {
			fmt.Fprintf(out, "%-32s %s\n", sc.Name, sc.Shape)
		}
		return nil
	}
	sc, ok := explore.ScenarioNamed(name)
	if !ok {
		return cli.Exit(fmt.Sprintf("no scenario %q (bedwe sim --scenario list names them)", name), 1)
	}
	first, count := c.Uint64("first"), c.Int("seeds")
	var trace func(sim.Time, string)
	if c.IsSet("seed") {
		first, count = c.Uint64("seed"), 1
		if c.Bool("trace") {
			trace = func(at sim.Time, line string) { fmt.Fprintf(out, "%12s %s\n", at.Round(time.Microsecond), line) }
		}
	}
	failed := 0
	var results []explore.Result
	for seed := first; seed < first+uint64(count); seed++ {
		r := explore.RunScenarioWith(sc, seed, explore.Options{Trace: trace, Group: c.Int("group"), Loss: c.Float64("loss"), Dup: c.Float64("dup")})
		if err := sc.Want(r); err != nil {
			r.Violations = append(r.Violations, err.Error())
		}
		if len(r.Violations) > 0 {
			failed++
		}
		results = append(results, r)
	}
	if asJSON {
		if err := json.NewEncoder(out).Encode(results); err != nil {
			return cli.Exit(fmt.Sprintf("write results: %v", err), 1)
		}
	} else {
		for _, r := range results {
			if len(r.Violations) > 0 || count == 1 {
				fmt.Fprintf(out, "%s seed %d: hash %s, %d done, %d failed at a once step, %d executions (%d re-runs)\n", sc.Name, r.Seed, r.Hash, r.Done, r.Failed, r.Executions, r.Reruns)
				for _, v := range r.Violations {
					fmt.Fprintf(out, "  violation: %s\n", v)
				}
			}
		}
		fmt.Fprintf(out, "%s: %d of %d seeds held (%s)\n", sc.Name, count-failed, count, sc.Shape)
		var waits, ends []time.Duration
		for _, r := range results {
			waits = append(waits, r.Reroutes...)
			ends = append(ends, r.LastEnd)
		}
		slices.Sort(ends)
		fmt.Fprintf(out, "the workflow ended after: p50 %d ms, p99 %d ms\n", ends[len(ends)/2].Milliseconds(), ends[len(ends)*99/100].Milliseconds())
		if len(waits) > 0 {
			slices.Sort(waits)
			fmt.Fprintf(out, "a killed holder's position held again after: p50 %d ms, p99 %d ms (%d positions)\n",
				waits[len(waits)/2].Milliseconds(), waits[len(waits)*99/100].Milliseconds(), len(waits))
		}
	}
	if failed > 0 {
		return cli.Exit("", 2)
	}
	return nil
}
