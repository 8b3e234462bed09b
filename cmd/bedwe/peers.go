package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
)

func peersCommand() *cli.Command {
	return &cli.Command{
		Name:  "peers",
		Usage: "list the peers a node sees (itself first)",
		Description: `Shows the peer's live view of the mesh, as gossiped presence: zone, services,
load, whether the peer is draining before a power cut, and what the timetable in force
says of its zone now (powered and until when, dark, unknown). Peers the node refused
within the last hour (not in its --trusted-peers, unauthorized clients) follow the
table; --refused lists only them.

Examples:
   bedwe peers
   bedwe peers --testnet /tmp/tn -o json
   bedwe peers --refused -o json`,
		Flags: append(targetFlags(), outputFlag(),
			&cli.BoolFlag{Name: "refused", Usage: "list the peers the node refused recently (connections gated, client requests refused)"}),
		Action: clientAction("peers", 0, func(ctx context.Context, c *cli.Context, cl *client.Client, asJSON bool) error {
			refused, err := cl.Refused(ctx)
			if err != nil {
				return remoteExit(err)
			}
			if c.Bool("refused") {
				if asJSON {
					if refused == nil {
						refused = []api.RefusedPeer{}
					}
					return printJSON(refused)
				}
				return printRefused(refused, true)
			}
			peers, err := cl.Peers(ctx)
			if err != nil {
				return remoteExit(err)
			}
			if asJSON {
				return printJSON(peers)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PEER\tZONE\tSERVICES\tCPU%\tQUEUE\tFREE\tSEEN\tSTATE\tPOWER")
			for _, p := range peers {
				svcs := append(append([]string{}, p.Services...), p.Patterns...)
				list := strings.Join(svcs, ",")
				if len(list) > 40 {
					list = list[:39] + "…"
				}
				state := "live"
				switch {
				case p.Self:
					state = "self"
				case p.Draining:
					state = "draining"
				case p.Breaker == "open" || p.Breaker == "half-open":
					state = "breaker " + p.Breaker
				}
				seen := "-"
				if !p.Self {
					seen = time.Since(p.LastSeen).Round(100*time.Millisecond).String() + " ago"
				}
				// FREE: free execution slots of the limit, "full" when its
				// queue refuses more ("-": a peer that announces none).
				free := "-"
				switch {
				case p.Slots > 0 && p.Free == 0 && p.Room == 0:
					free = "full"
				case p.Slots > 0:
					free = fmt.Sprintf("%d/%d", p.Free, p.Slots)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%d\t%s\t%s\t%s\t%s\n", short(p.ID), orDash(p.Zone), list, p.CPU, p.Queue, free, seen, state, orDash(p.Power))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return printRefused(refused, false)
		}),
	}
}

// printRefused prints the refused peers as a table (always when all, else
// only if there are some, after a blank line).
func printRefused(refused []api.RefusedPeer, all bool) error {
	if len(refused) == 0 {
		if all {
			fmt.Println("no peer refused in the last hour")
		}
		return nil
	}
	if !all {
		fmt.Println("\nrefused in the last hour:")
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tADDR\tREASON\tCOUNT\tLAST")
	for _, r := range refused {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s ago\n", r.ID, orDash(r.Addr), r.Reason, r.Count, time.Since(r.Last).Round(time.Second))
	}
	return tw.Flush()
}
