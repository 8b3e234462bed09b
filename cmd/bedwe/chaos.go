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
		&cli.StringFlag{Name: "scenario", Usage: "one of " + strings.Join(testnet.Scenarios, ", ") + ", timetable, or on a --netns testnet " + strings.Join(testnet.NetnsScenarios, ", ") + " (required)"},
		&cli.IntFlag{Name: "workflows", Usage: "workflows to run through the faults", Value: 5},
		&cli.IntFlag{Name: "step-ms", Usage: "duration of every sleep step (kills land inside steps)", Value: 600},
		&cli.Uint64Flag{Name: "seed", Usage: "seed for victim choice (0: random)"},
		&cli.DurationFlag{Name: "timeout", Usage: "how long to wait for every workflow", Value: 3 * time.Minute},
		&cli.DurationFlag{Name: "flap-for", Usage: "how long the flap scenario kills and restarts", Value: 15 * time.Second},
		&cli.DurationFlag{Name: "cut-for", Usage: "how long the network scenarios keep a cut before healing", Value: testnet.IsolateFor},
		&cli.DurationFlag{Name: "for", Usage: "timetable scenario: how long to follow the timetable (0: until interrupted)"},
		&cli.BoolFlag{Name: "reads", Usage: "give every step of the chaos workflow reads=() (it reads no earlier output), so nodes started with a low --stash-min drop outputs from the packs (the result must still equal the fault-free one)"},
		outputFlag(),
	}
}

func chaosCommand() *cli.Command {
	return &cli.Command{
		Name:  "chaos",
		Usage: "kill testnet nodes with SIGKILL while workflows run, and report what survived",
		Description: `Runs the chaos workflow once without faults (its result is the one every run must
produce), submits --workflows copies of it
   sleepA oneB[once=true] FORK(sleepC sleepD, sleepE oneF[once=true]) SYNC oneG[once=true] quickI sleepH
(sleep* steps sleep --step-ms, one* steps echo and are at-most-once), then kills real
node processes with SIGKILL as the scenario says, restarts them once every workflow
ended, and prints a summary.

Outputs, from the results: completed, failed, failed_at_most_once (failed with the
at-most-once refusal: ended, not lost), lost, duplicate_outputs, result_mismatches,
steps_rerun (superseded attempts in the traces), makespan_ms.
Executions, from the invocation record (every service invocation appends a line before
it runs) and the nodes' events files:
   executions             invocations of the run's workflows
   executions_duplicated  invocations of a step that started after the step had been
                          handed on (a handed-on event, or an accepted, delivery or
                          completed event whose after is the step); a re-run because
                          the holder died before handing on is not counted
   once_violations        invocations of an at-most-once step beyond its first
   chains_superseded      reroute events
   stashes, stashes_kept  times a holder dropped outputs nobody ahead reads from its pack
                          after the origin copies stored them, or kept them (a copy
                          was down); only with --reads on nodes with a low --stash-min
   detection_ms_p50/p99   SIGKILL to the first suspect event naming the killed peer

Scenarios:
   executor          the peer running a step
   consecutive       that peer and the peer that handed it the work, together
   join-holder       a peer holding a FORK's join record
   origin            the peer the workflows were submitted to
   zone              every node of one zone at once
   blackout          every node, then all restart
   flap              random kills and restarts for --flap-for
   sender-after-ack  the sender of the first pack accepted from a peer other than the
                     entry, the moment the accepted event shows (it may not have
                     released its guardians yet)
   join-and-branch   a peer (not the entry) acting for a join, then 50 ms later the peer
                     running branch 0 of that join's workflow
   pair-random       two random peers (not the entry) holding work, at two random
                     instants within the first three step durations
   zone-plus-one     the zone of a peer holding work (not the entry's zone) plus one
                     more peer holding work in another zone
   timetable         no workflows: kill each zone at its cuts and restart it at its
                     restores, following the testnet's timetable for --for (see
                     'bedwe testnet follow')

Scenarios on a testnet in network namespaces (--netns; root): links are cut or made
lossy, nothing is killed, and every cut is healed after --cut-for (longer than
detection under a partition, which is slower than after a SIGKILL):
   isolate-holder       a peer (not the entry) running the first step is cut off from
                        every other node both ways, then healed while it still runs the
                        step (which lasts --cut-for plus 1.5 s); its chain must stop at its next
                        hop: isolated_chain_stopped (a superseded event, or no hand-on
                        of the isolated attempt)
   isolate-join-holder  a peer (not the entry) acting for a join is cut off, then healed
   split-zones          the zone of a peer running a step and the entry's zone are cut
                        from each other; both still see the third zone
   lossy                5 % of the packets every node receives are dropped until every
                        workflow ended

Exit status 2 when a workflow was lost or failed other than by the at-most-once
refusal, or an output was counted twice, a result differs, an execution was
duplicated or an at-most-once step ran twice, or an isolated chain went on.

Examples:
   bedwe testnet chaos run --nodes 8 --scenario zone --workflows 10 -o json
   bedwe testnet chaos --dir /tmp/tn --scenario executor
   bedwe testnet chaos --dir /tmp/tt --scenario timetable --for 2m -o json
   sudo bedwe testnet chaos run --netns --nodes 6 --scenario isolate-holder -o json`,
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
				&cli.BoolFlag{Name: "netns", Usage: "run every node in a network namespace of its own (root; needed by the link scenarios)"},
				&cli.StringFlag{Name: "subnet", Usage: "with --netns: private IPv4 `PREFIX` for the nodes", Value: testnet.DefaultSubnet},
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
				m, err := testnet.Up(ctx, testnet.Options{Nodes: c.Int("nodes"), Zones: c.Int("zones"), Dir: dir, Progress: os.Stderr, Netns: c.Bool("netns"), Subnet: c.String("subnet")})
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
		Scenario: c.String("scenario"), Workflows: c.Int("workflows"), StepMillis: c.Int("step-ms"), Reads: c.Bool("reads"),
		Seed: c.Uint64("seed"), Timeout: c.Duration("timeout"), FlapFor: c.Duration("flap-for"), CutFor: c.Duration("cut-for"), Progress: os.Stderr,
	})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if asJSON {
		if err := printJSON(sum); err != nil {
			return err
		}
	} else {
		printChaos(sum)
	}
	if sum.Lost > 0 || sum.Completed+sum.FailedAtMostOnce != sum.Submitted || sum.DuplicateOutputs > 0 ||
		sum.ResultMismatches > 0 || sum.ExecutionsDuplicated > 0 || sum.OnceViolations > 0 ||
		(sum.IsolatedStep != "" && !sum.IsolatedChainStopped) {
		return cli.Exit("", 2)
	}
	return nil
}

// printChaos prints a chaos summary for people.
func printChaos(sum *testnet.ChaosSummary) {
	fmt.Printf("scenario %s on %d nodes (seed %d): %d submitted, %d completed, %d failed (%d at-most-once), %d lost\n",
		sum.Scenario, sum.Nodes, sum.Seed, sum.Submitted, sum.Completed, sum.Failed, sum.FailedAtMostOnce, sum.Lost)
	fmt.Printf("outputs: %d duplicate outputs, %d results differ, %d steps re-run\n",
		sum.DuplicateOutputs, sum.ResultMismatches, sum.StepsRerun)
	fmt.Printf("executions: %d, %d duplicated after hand-on, %d at-most-once violations, %d chains superseded\n",
		sum.Executions, sum.ExecutionsDuplicated, sum.OnceViolations, sum.ChainsSuperseded)
	fmt.Printf("killed nodes %v (pids %v); detection p50 %.0f ms, p99 %.0f ms over %d kills; makespan %d ms\n",
		sum.KilledNodes, sum.KilledPIDs, sum.DetectionMsP50, sum.DetectionMsP99, sum.Detections, sum.MakespanMs)
	if len(sum.IsolatedNodes) > 0 {
		fmt.Printf("cut off nodes %v; isolated step %q re-routed %v, superseded events %d, hand-ons of the isolated attempt %d, chain stopped %v\n",
			sum.IsolatedNodes, sum.IsolatedStep, sum.IsolatedRerouted, sum.IsolatedSuperseded, sum.IsolatedHandOns, sum.IsolatedChainStopped)
	}
	for _, e := range sum.Errors {
		fmt.Println("  error: " + e)
	}
	for _, d := range sum.ExecutionDetails {
		fmt.Println("  " + d)
	}
	for _, n := range sum.Notes {
		fmt.Println("  note: " + n)
	}
}
