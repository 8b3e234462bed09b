package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/testnet"
)

func soakCommand() *cli.Command {
	return &cli.Command{
		Name:  "soak",
		Usage: "keep workflows running on a testnet with no faults and count false alarms",
		Description: `Keeps --per-node workflows in flight at every node for --for (sequences and small
FORKs of sleep steps of --min-step to --max-step each, so there are always held packs
with guardians and heartbeats), kills nothing, waits for the workflows still running,
and counts from the nodes' events files (and, for what has no event, their logs) what
the failure detector did meanwhile. With no faults every suspicion is false and every
re-route needless.

Without --dir it starts its own testnet (--nodes, --zones, --profile, --announce) and
stops it afterwards; with --dir it uses a running one and leaves it running.

The summary (-o json for the JSON) has: submitted, completed, failed, lost,
duplicate_outputs, result_mismatches, steps_rerun, false_suspicions, needless_reroutes,
join_takeovers, spared_by_ping (late holders that answered the confirmation ping),
unconfirmed (failed confirmations by reason), stale_watches_dropped,
reconciled_copies_dropped, late_ticks and late_confirms (a watcher that blamed itself),
the machine's load average (start, end, min/mean/max of the 1-minute average) and the
first false suspicions in detail. Exit status 2 when a workflow was lost or failed or
a suspicion was raised.

Examples:
   bedwe testnet soak --nodes 40 --for 10m -o json > soak.json
   bedwe testnet soak --dir /tmp/tn --for 2m --per-node 1`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "use the running testnet in `DIR` instead of starting one"},
			&cli.IntFlag{Name: "nodes", Usage: "number of node processes of the testnet it starts", Value: 40},
			&cli.IntFlag{Name: "zones", Usage: "zones of the testnet it starts", Value: 4},
			&cli.StringFlag{Name: "profile", Usage: "node timing of the testnet it starts: testnet or mesh", Value: "testnet"},
			&cli.DurationFlag{Name: "announce", Usage: "presence interval of the testnet it starts", Value: 5 * time.Second},
			&cli.BoolFlag{Name: "keep", Usage: "keep the directory (logs, journals) of the testnet it starts"},
			&cli.DurationFlag{Name: "for", Usage: "how long to keep submitting workflows", Value: 10 * time.Minute},
			&cli.IntFlag{Name: "per-node", Usage: "workflows each node keeps in flight as origin", Value: 2},
			&cli.DurationFlag{Name: "min-step", Usage: "shortest sleep step", Value: 200 * time.Millisecond},
			&cli.DurationFlag{Name: "max-step", Usage: "longest sleep step", Value: 800 * time.Millisecond},
			&cli.DurationFlag{Name: "drain", Usage: "how long to wait for the workflows in flight at the end", Value: 2 * time.Minute},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the workflow mix (0: random)"},
			outputFlag(),
		},
		Action: runSoak,
	}
}

func runSoak(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var m *testnet.Manifest
	if dir := c.String("dir"); dir != "" {
		if m, err = testnet.LoadManifest(dir); err != nil {
			return cli.Exit(err.Error(), 1)
		}
	} else {
		dir, err := os.MkdirTemp("", "bedwe-soak-")
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		if c.Bool("keep") {
			fmt.Fprintf(os.Stderr, "keeping the testnet directory %s\n", dir)
		} else {
			defer os.RemoveAll(dir)
		}
		m, err = testnet.Up(ctx, testnet.Options{
			Nodes: c.Int("nodes"), Zones: c.Int("zones"), Dir: dir, Progress: os.Stderr,
			Profile: c.String("profile"), Announce: c.Duration("announce"),
		})
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		defer m.Down()
	}
	sum, err := m.Soak(ctx, testnet.SoakOptions{
		For: c.Duration("for"), PerNode: c.Int("per-node"), MinStep: c.Duration("min-step"),
		MaxStep: c.Duration("max-step"), Drain: c.Duration("drain"), Seed: c.Uint64("seed"),
		Progress: os.Stderr,
	})
	if sum == nil {
		return cli.Exit(err.Error(), 1)
	}
	if asJSON {
		if err := printJSON(sum); err != nil {
			return err
		}
	} else {
		printSoak(sum)
	}
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if sum.Lost > 0 || sum.Failed > 0 || sum.FalseSuspicions > 0 {
		return cli.Exit("", 2)
	}
	return nil
}

func printSoak(s *testnet.SoakSummary) {
	fmt.Printf("soak of %s on %d nodes (%s profile, %d zones, %d in flight per node, %d cores)\n",
		s.Duration, s.Nodes, s.Profile, s.Zones, s.PerNode, s.Cores)
	fmt.Printf("workflows: %d submitted, %d completed, %d failed, %d lost; %d duplicate outputs, %d results differ, %d steps re-run; p50 %.0f ms, p99 %.0f ms\n",
		s.Submitted, s.Completed, s.Failed, s.Lost, s.DuplicateOutputs, s.ResultMismatches, s.StepsRerun, s.WorkflowMsP50, s.WorkflowMsP99)
	fmt.Printf("detector: %d false suspicions, %d needless re-routes, %d join takeovers, %d spared by ping, %d stale watches dropped, %d copies reconciled away, %d late ticks, %d late confirmations\n",
		s.FalseSuspicions, s.NeedlessReroutes, s.JoinTakeovers, s.SparedByPing, s.StaleWatchesDropped, s.ReconciledCopiesDropped, s.LateTicks, s.LateConfirms)
	reasons := make([]string, 0, len(s.Unconfirmed))
	for r := range s.Unconfirmed {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Printf("  unconfirmed (%s): %d\n", r, s.Unconfirmed[r])
	}
	fmt.Printf("load average: start %.1f, end %.1f, 1-minute min/mean/max %.1f/%.1f/%.1f\n",
		s.Load.Start[0], s.Load.End[0], s.Load.Min1, s.Load.Mean1, s.Load.Max1)
	for _, x := range s.Suspicions {
		fmt.Printf("  node %d suspected %s after %d ms (guarded %d, joins %d, reason %q) at %s\n",
			x.Node, x.Peer, x.SilenceMs, x.Guarded, x.Joins, x.Reason, x.At)
	}
	for _, e := range s.WorkflowErrors {
		fmt.Println("  " + e)
	}
}
