package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/testnet"
)

// netnsCommands are the testnet verbs that act on the links of a testnet
// started with --netns.
func netnsCommands() []*cli.Command {
	dir := func() cli.Flag { return &cli.StringFlag{Name: "dir", Usage: "testnet directory", Required: true} }
	return []*cli.Command{
		{
			Name:      "partition",
			Usage:     "cut the links between a node or zone and the rest (or --from another node or zone)",
			ArgsUsage: " ",
			Description: `Drops every packet between the nodes named by --isolate and those named by
--from (default: every other node), both ways, with nftables rules in each receiving
node's namespace. The processes keep running: to them it looks like the others went
silent. Partitions add up until 'bedwe testnet heal'. With --for, waits that long and
heals. NODE is a node index or a peer ID prefix; ZONE a zone name. Needs a testnet
started with --netns (root).

Examples:
   bedwe testnet partition --dir /tmp/tn --isolate 3
   bedwe testnet partition --dir /tmp/tn --isolate z0 --from z2 --for 20s
   bedwe testnet links --dir /tmp/tn -o json`,
			Flags: []cli.Flag{dir(),
				&cli.StringFlag{Name: "isolate", Usage: "`NODE|ZONE` to cut off", Required: true},
				&cli.StringFlag{Name: "from", Usage: "`NODE|ZONE` to cut it off from (default: every other node)"},
				&cli.DurationFlag{Name: "for", Usage: "heal after this long (0: stay cut until 'testnet heal')"},
			},
			Action: func(c *cli.Context) error {
				m, err := testnet.LoadManifest(c.String("dir"))
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				a, err := m.Select(c.String("isolate"))
				if err != nil {
					return cli.Exit("--isolate: "+err.Error(), 1)
				}
				var b []int
				if f := c.String("from"); f != "" {
					if b, err = m.Select(f); err != nil {
						return cli.Exit("--from: "+err.Error(), 1)
					}
				}
				if err := m.Partition(a, b); err != nil {
					return cli.Exit(err.Error(), 1)
				}
				fmt.Fprintf(os.Stderr, "cut nodes %v off from %s\n", a, orAll(b))
				if d := c.Duration("for"); d > 0 {
					ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
					defer stop()
					select {
					case <-ctx.Done():
					case <-time.After(d):
					}
					if err := m.Heal(); err != nil {
						return cli.Exit(err.Error(), 1)
					}
					fmt.Fprintf(os.Stderr, "healed after %s\n", d)
				}
				return nil
			},
		},
		{
			Name:  "heal",
			Usage: "remove every partition of a --netns testnet (loss and rate limits stay)",
			Description: `Examples:
   bedwe testnet heal --dir /tmp/tn`,
			Flags: []cli.Flag{dir()},
			Action: func(c *cli.Context) error {
				m, err := testnet.LoadManifest(c.String("dir"))
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				if err := m.Heal(); err != nil {
					return cli.Exit(err.Error(), 1)
				}
				return nil
			},
		},
		{
			Name:  "link",
			Usage: "shape a node's link of a --netns testnet: random loss and a rate limit",
			Description: `--loss drops that percentage of the packets the node receives (nftables, numgen
random, in its namespace's input hook): setting it on every node makes every link lossy
both ways. --rate limits its veth both ways with a token bucket (tc tbf; tc units such
as 1mbit, 256kbit; off removes it). tc netem (added delay) is not used: not every
kernel has it.

Examples:
   bedwe testnet link --dir /tmp/tn --node 2 --loss 5
   bedwe testnet link --dir /tmp/tn --node z1 --rate 1mbit
   bedwe testnet link --dir /tmp/tn --node 2 --loss 0 --rate off`,
			Flags: []cli.Flag{dir(),
				&cli.StringFlag{Name: "node", Usage: "`NODE|ZONE` (a zone shapes each of its nodes)", Required: true},
				&cli.IntFlag{Name: "loss", Usage: "percentage of received packets to drop (0: none)", Value: -1, DefaultText: "unchanged"},
				&cli.StringFlag{Name: "rate", Usage: "rate limit `RATE` (tc units, e.g. 1mbit), or off", DefaultText: "unchanged"},
			},
			Action: func(c *cli.Context) error {
				m, err := testnet.LoadManifest(c.String("dir"))
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				idx, err := m.Select(c.String("node"))
				if err != nil {
					return cli.Exit("--node: "+err.Error(), 1)
				}
				if !c.IsSet("loss") && !c.IsSet("rate") {
					return cli.Exit("link needs --loss, --rate or both", 1)
				}
				for _, i := range idx {
					if err := m.Link(i, testnet.LinkOptions{LossPct: c.Int("loss"), Rate: c.String("rate")}); err != nil {
						return cli.Exit(err.Error(), 1)
					}
				}
				return nil
			},
		},
		{
			Name:  "links",
			Usage: "list the partitions, loss and rate limits of a --netns testnet's nodes",
			Description: `Examples:
   bedwe testnet links --dir /tmp/tn
   bedwe testnet links --dir /tmp/tn -o json`,
			Flags: []cli.Flag{dir(), outputFlag()},
			Action: func(c *cli.Context) error {
				asJSON, err := jsonOutput(c)
				if err != nil {
					return err
				}
				m, err := testnet.LoadManifest(c.String("dir"))
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				rows, err := m.Links()
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				if asJSON {
					return printJSON(rows)
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tZONE\tNAMESPACE\tADDR\tLOSS%\tCUT FROM\tQDISC")
				for _, r := range rows {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Node, r.Zone, r.Namespace, r.Addr, r.LossPct, strings.Join(r.Cut, ","), r.Qdisc)
				}
				return tw.Flush()
			},
		},
	}
}

func orAll(b []int) string {
	if len(b) == 0 {
		return "every other node"
	}
	return fmt.Sprintf("nodes %v", b)
}
