package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/bedwe/bedwe/node/client"
	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a workflow's progress (or list the workflows a peer is origin of)",
		ArgsUsage: "[ID]",
		Description: `Asks the workflow's origin (the peer it was submitted to) how far it got.
Without an ID, lists every workflow that peer is origin of.

Examples:
   bedwe status wf-3f2a9c1e0b7d4e55
   bedwe status --testnet /tmp/tn -o json`,
		Flags: append(targetFlags(), outputFlag()),
		Action: clientAction("status", -1, func(ctx context.Context, c *cli.Context, cl *client.Client, asJSON bool) error {
			if c.NArg() == 0 {
				list, err := cl.List(ctx)
				if err != nil {
					return remoteExit(err)
				}
				if asJSON {
					if list == nil {
						return printJSON([]any{})
					}
					return printJSON(list)
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATE\tSTEPS\tSUBMITTED\tERROR")
				for _, st := range list {
					fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\n", st.ID, st.State, st.StepsDone, st.StepsTotal, st.Submitted.Local().Format(time.DateTime), st.Error)
				}
				return tw.Flush()
			}
			st, err := cl.Status(ctx, c.Args().First())
			if err != nil {
				return remoteExit(err)
			}
			if asJSON {
				return printJSON(st)
			}
			fmt.Printf("%s  %s  %d/%d steps  submitted %s\n", st.ID, st.State, st.StepsDone, st.StepsTotal, st.Submitted.Local().Format(time.DateTime))
			if st.Error != "" {
				fmt.Printf("error: %s\n", st.Error)
			}
			for _, e := range st.Recent {
				fmt.Printf("  %s\n", describeAttempt(e))
			}
			return nil
		}),
	}
}

func resultCommand() *cli.Command {
	return &cli.Command{
		Name:      "result",
		Usage:     "print a finished workflow's result (outputs by label) and trace",
		ArgsUsage: "ID",
		Description: `Prints the result JSON of a finished workflow; with --trace, also every step attempt
(peer, zone, start, end, outcome). Exit code 0 if it succeeded, 2 if it failed or was
cancelled, 3 if it is still running.

Examples:
   bedwe result wf-3f2a9c1e0b7d4e55
   bedwe result wf-3f2a9c1e0b7d4e55 -o json | jq .trace`,
		Flags: append(targetFlags(), outputFlag(), &cli.BoolFlag{Name: "trace", Usage: "also print the trace"}),
		Action: clientAction("result", 1, func(ctx context.Context, c *cli.Context, cl *client.Client, asJSON bool) error {
			st, err := cl.Result(ctx, c.Args().First())
			if err != nil {
				return remoteExit(err)
			}
			if c.Bool("trace") && !asJSON {
				tw := tabwriter.NewWriter(os.Stderr, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PATH\tSERVICE\tPEER\tZONE\tATTEMPT\tOUTCOME\tDURATION\tNOTE")
				for _, e := range st.Trace {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Path, e.Service, short(e.Peer), orDash(e.Zone), e.Attempt, e.Outcome, e.End.Sub(e.Start).Round(time.Millisecond), e.Note)
				}
				tw.Flush()
			}
			return printFinal(st, asJSON)
		}),
	}
}

func cancelCommand() *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "cancel a running workflow everywhere",
		ArgsUsage: "ID",
		Description: `Marks the workflow cancelled at its origin and broadcasts the cancellation: every
peer stops (kills) the workflow's running steps and refuses its packs.

Example:
   bedwe cancel wf-3f2a9c1e0b7d4e55`,
		Flags: append(targetFlags(), outputFlag()),
		Action: clientAction("cancel", 1, func(ctx context.Context, c *cli.Context, cl *client.Client, asJSON bool) error {
			st, err := cl.Cancel(ctx, c.Args().First())
			if err != nil {
				return remoteExit(err)
			}
			if asJSON {
				return printJSON(st)
			}
			fmt.Printf("%s %s\n", st.ID, st.State)
			return nil
		}),
	}
}
