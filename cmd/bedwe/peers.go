package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bedwe/bedwe/node/client"
	"github.com/urfave/cli/v2"
)

func peersCommand() *cli.Command {
	return &cli.Command{
		Name:  "peers",
		Usage: "list the peers a node sees (itself first)",
		Description: `Shows the peer's live view of the mesh, as gossiped presence: zone, services,
load, whether the peer is draining before a power cut, and what the timetable in force
says of its zone now (powered and until when, dark, unknown).

Examples:
   bedwe peers
   bedwe peers --testnet /tmp/tn -o json`,
		Flags: append(targetFlags(), outputFlag()),
		Action: clientAction("peers", 0, func(ctx context.Context, c *cli.Context, cl *client.Client, asJSON bool) error {
			peers, err := cl.Peers(ctx)
			if err != nil {
				return remoteExit(err)
			}
			if asJSON {
				return printJSON(peers)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PEER\tZONE\tSERVICES\tCPU%\tQUEUE\tSEEN\tSTATE\tPOWER")
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
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%d\t%s\t%s\t%s\n", short(p.ID), orDash(p.Zone), list, p.CPU, p.Queue, seen, state, orDash(p.Power))
			}
			return tw.Flush()
		}),
	}
}
