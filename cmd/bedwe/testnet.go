package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/testnet"
)

func testnetCommand() *cli.Command {
	return &cli.Command{
		Name:  "testnet",
		Usage: "run a local mesh of real bedwe node processes on 127.0.0.1",
		Description: `Starts, inspects and stops a testnet: N real 'bedwe node' processes on loopback,
each with its own data directory under DIR, zones assigned round-robin, and a services
file of test builtins (fail*, flaky*, sleep*, and echo for every other name). Every
client verb takes --testnet DIR to talk to it.

Examples:
   bedwe testnet up --nodes 8 --zones 3 --dir /tmp/tn
   bedwe submit examples/fig2.bedwe --testnet /tmp/tn --wait
   bedwe testnet status --dir /tmp/tn -o json
   bedwe testnet down --dir /tmp/tn`,
		Subcommands: []*cli.Command{
			chaosCommand(),
			{
				Name:  "up",
				Usage: "start a testnet and wait until its mesh is connected",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "nodes", Usage: "number of node processes", Value: 8},
					&cli.IntFlag{Name: "zones", Usage: "number of load-shedding zones (round-robin)", Value: 2},
					&cli.StringFlag{Name: "dir", Usage: "testnet directory", Required: true},
					&cli.StringFlag{Name: "services", Usage: "services file for every node (default: test builtins)"},
					&cli.DurationFlag{Name: "announce", Usage: "presence interval", Value: time.Second},
					&cli.StringFlag{Name: "profile", Usage: "node timing: testnet (250 ms beats, ~1.5 s detection) or mesh (1 s beats, ~5 s detection; for many nodes on few cores)", Value: "testnet"},
				},
				Action: func(c *cli.Context) error {
					opts := testnet.Options{
						Nodes: c.Int("nodes"), Zones: c.Int("zones"), Dir: c.String("dir"),
						Announce: c.Duration("announce"), Progress: os.Stderr, Profile: c.String("profile"),
					}
					if f := c.String("services"); f != "" {
						b, err := os.ReadFile(f)
						if err != nil {
							return cli.Exit(err.Error(), 1)
						}
						opts.Services = string(b)
					}
					ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
					defer stop()
					m, err := testnet.Up(ctx, opts)
					if err != nil {
						return cli.Exit(err.Error(), 1)
					}
					fmt.Printf("testnet of %d nodes running in %s\n", len(m.Nodes), m.Dir)
					return nil
				},
			},
			{
				Name:  "down",
				Usage: "stop every node of a testnet",
				Flags: []cli.Flag{&cli.StringFlag{Name: "dir", Usage: "testnet directory", Required: true}},
				Action: func(c *cli.Context) error {
					if err := testnet.Down(c.String("dir")); err != nil {
						return cli.Exit(err.Error(), 1)
					}
					return nil
				},
			},
			{
				Name:  "status",
				Usage: "list a testnet's nodes and whether they run",
				Flags: []cli.Flag{&cli.StringFlag{Name: "dir", Usage: "testnet directory", Required: true}, outputFlag()},
				Action: func(c *cli.Context) error {
					asJSON, err := jsonOutput(c)
					if err != nil {
						return err
					}
					m, err := testnet.LoadManifest(c.String("dir"))
					if err != nil {
						return cli.Exit(err.Error(), 1)
					}
					rows := m.Status()
					if asJSON {
						return printJSON(rows)
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NODE\tPEER\tZONE\tPID\tRUNNING\tADDR")
					for _, r := range rows {
						addr := ""
						if len(r.Addrs) > 0 {
							addr = r.Addrs[0]
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%v\t%s\n", r.Index, short(r.PeerID), r.Zone, r.PID, r.Running, addr)
					}
					return tw.Flush()
				},
			},
		},
	}
}
