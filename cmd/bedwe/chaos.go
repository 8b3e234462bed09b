package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/testnet"
)

func chaosFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "scenario", Usage: "one of " + strings.Join(testnet.Scenarios, ", ") + ", or timetable (required)"},
		&cli.IntFlag{Name: "workflows", Usage: "workflows to run through the faults", Value: 5},
		&cli.IntFlag{Name: "step-ms", Usage: "duration of every sleep step (kills land inside steps)", Value: 600},
		&cli.Uint64Flag{Name: "seed", Usage: "seed for victim choice (0: random)"},
		&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for every workflow", Value: 3 * time.Minute},
		&cli.DurationFlag{Name: "flap-for", Usage: "how long the flap scenario kills and restarts", Value: 15 * time.Second},
		&cli.DurationFlag{Name: "for", Usage: "timetable scenario: how long to follow the timetable (0: until interrupted)"},
		outputFlag(),
	}
}

func chaosCommand() *cli.Command {
	return &cli.Command{
		Name:  "chaos",
		Usage: "kill testnet nodes with SIGKILL while workflows run, and report what survived",
		Description: `Submits workflows (sequence, FORK, sequence; every step a sleep), then kills real
node processes with SIGKILL as the scenario says, restarts them, waits for every
workflow and prints a summary: submitted, completed, failed, lost, duplicate_outputs,
killed_pids, detection_ms_p50/p99 (kill to first suspicion, from the nodes' logs),
makespan_ms, steps re-run.

Scenarios:
   executor     the peer running a step
   consecutive  that peer and the peer that handed it the work, together
   join-holder  a peer holding a FORK's join record
   origin       the peer the workflows were submitted to
   zone         every node of one zone at once
   blackout     every node, then all restart
   flap         random kills and restarts for --flap-for
   timetable    no workflows: kill each zone at its cuts and restart it at its restores,
                following the testnet's timetable for --for (see 'bedwe testnet follow')

Examples:
   bedwe testnet chaos run --nodes 8 --scenario zone --workflows 10 -o json
   bedwe testnet chaos --dir /tmp/tn --scenario executor
   bedwe testnet chaos --dir /tmp/tt --scenario timetable --for 2m -o json`,
		Flags: append(chaosFlags(), &cli.StringFlag{Name: "dir", Usage: "directory of a running testnet"}),
		Action: func(c *cli.Context) error {
			if c.String("dir") == "" {
				return cli.Exit("chaos needs --dir of a running testnet, or use `bedwe testnet chaos run` to start one", 1)
			}
			if c.String("scenario") == "timetable" {
				return runFollow(c)
			}
			m, err := testnet.LoadManifest(c.String("dir"))
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return runChaos(c, m)
		},
		Subcommands: []*cli.Command{{
			Name:  "run",
			Usage: "start a testnet, run one chaos scenario on it, stop it",
			Flags: append(chaosFlags(),
				&cli.IntFlag{Name: "nodes", Usage: "number of node processes", Value: 8},
				&cli.IntFlag{Name: "zones", Usage: "number of zones", Value: 3},
			),
			Action: func(c *cli.Context) error {
				if c.String("scenario") == "" {
					return cli.Exit("--scenario is required: one of "+strings.Join(testnet.Scenarios, ", "), 1)
				}
				if c.String("scenario") == "timetable" {
					return cli.Exit("the timetable scenario needs a testnet started with a timetable: `bedwe testnet up --schedule FILE --clock-speed X`, then `bedwe testnet chaos --dir DIR --scenario timetable`", 1)
				}
				dir, err := os.MkdirTemp("", "bedwe-chaos-")
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				defer os.RemoveAll(dir)
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
				defer stop()
				m, err := testnet.Up(ctx, testnet.Options{Nodes: c.Int("nodes"), Zones: c.Int("zones"), Dir: dir, Progress: os.Stderr})
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				defer m.Down()
				return runChaos(c, m)
			},
		}},
	}
}

func runChaos(c *cli.Context, m *testnet.Manifest) error {
	if c.String("scenario") == "" {
		return cli.Exit("--scenario is required: one of "+strings.Join(testnet.Scenarios, ", "), 1)
	}
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sum, err := m.Chaos(ctx, testnet.ChaosOptions{
		Scenario: c.String("scenario"), Workflows: c.Int("workflows"), StepMillis: c.Int("step-ms"),
		Seed: c.Uint64("seed"), Timeout: c.Duration("timeout"), FlapFor: c.Duration("flap-for"), Progress: os.Stderr,
	})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if asJSON {
		if err := printJSON(sum); err != nil {
			return err
		}
	} else {
		fmt.Printf("scenario %s on %d nodes: %d submitted, %d completed, %d failed, %d lost, %d duplicate outputs, %d results differ\n",
			sum.Scenario, sum.Nodes, sum.Submitted, sum.Completed, sum.Failed, sum.Lost, sum.DuplicateOutputs, sum.ResultMismatches)
		fmt.Printf("killed pids %v; detection p50 %.0f ms, p99 %.0f ms; %d steps re-run; makespan %d ms\n",
			sum.KilledPIDs, sum.DetectionMsP50, sum.DetectionMsP99, sum.StepsRerun, sum.MakespanMs)
		for _, e := range sum.Errors {
			fmt.Println("  " + e)
		}
	}
	if sum.Lost > 0 || sum.Completed != sum.Submitted || sum.DuplicateOutputs > 0 {
		return cli.Exit("", 2)
	}
	return nil
}
