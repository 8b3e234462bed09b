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

func testnetCommand() *cli.Command {
	return &cli.Command{
		Name:  "testnet",
		Usage: "run a local mesh of real bedwe node processes on 127.0.0.1",
		Description: `Starts, inspects and stops a testnet: N real 'bedwe node' processes on loopback,
each with its own data directory under DIR, zones assigned round-robin, and a services
file of test builtins (fail*, flaky*, sleep*, and echo for every other name). Every
client verb takes --testnet DIR to talk to it. Each node serves Prometheus metrics on a
free loopback port (bedwe node --http), kept across restarts; 'testnet status' lists it.

With --schedule, every node gets the timetable (a copy in DIR/schedule.yaml) and the
testnet's zones are the timetable's; --clock-speed runs a virtual clock shared by all
nodes, so a day of load shedding plays in minutes; 'testnet follow' then kills and
restarts each zone's processes at its cuts and restores. DIR/trusted-keys lists every
node's public key and is given to every node, so a timetable any node publishes is
accepted by all.

Examples:
   bedwe testnet up --nodes 8 --zones 3 --dir /tmp/tn
   bedwe submit examples/fig2.bedwe --testnet /tmp/tn --wait
   bedwe testnet status --dir /tmp/tn -o json
   bedwe testnet down --dir /tmp/tn
   bedwe testnet up --dir /tmp/tt --nodes 8 --schedule examples/schedules/two-zone-rotation.yaml --clock-speed 720
   bedwe testnet follow --dir /tmp/tt --for 2m
   bedwe testnet compare --nodes 16 --workflows 1000 --out docs/timetable`,
		Subcommands: append([]*cli.Command{
			chaosCommand(),
			soakCommand(),
			followCommand(),
			compareCommand(),
			{
				Name:  "up",
				Usage: "start a testnet and wait until its mesh is connected",
				Description: `Starts --nodes real 'bedwe node' processes on 127.0.0.1 and waits until every node
sees every other. Zones are assigned round-robin: z0, z1, ... (--zones), the names in
--zone-names, or with --schedule the timetable's zones.

Examples:
   bedwe testnet up --nodes 8 --zones 3 --dir /tmp/tn
   bedwe testnet up --dir /tmp/tt --schedule examples/schedules/two-zone-rotation.yaml --clock-speed 720
   bedwe testnet up --dir /tmp/tt --schedule rot.yaml --clock-speed 360 --clock-start 2026-03-02T02:00:00+02:00 --routing heartbeat
   sudo bedwe testnet up --nodes 6 --zones 3 --dir /tmp/tn --netns --subnet 10.77.0.0/24

With --netns (root only) every node runs in a network namespace of its own
(bedwe-ID-I) with a veth to a bridge in a namespace of its own (bedwe-ID-br), at its
own address in --subnet; one veth (bedwe-ID) links the root namespace into the bridge
with the subnet's last address, so client verbs (--testnet DIR) reach the nodes as
usual. 'bedwe testnet down' removes the namespaces and that link, also when the node
processes are already dead.

Nodes log at info level into DIR/node-I/node.log; set BEDWE_TESTNET_LOG_LEVEL=debug in
the environment of 'up' (and of chaos and bench, which restart nodes) to trace a run, and
BEDWE_TESTNET_PPROF=1 to serve Go's profiler at /debug/pprof/ on each node's --http.`,
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "nodes", Usage: "number of node processes", Value: 8},
					&cli.IntFlag{Name: "zones", Usage: "number of load-shedding zones (round-robin)", Value: 2},
					&cli.StringFlag{Name: "dir", Usage: "testnet directory", Required: true},
					&cli.StringFlag{Name: "services", Usage: "services file for every node (default: test builtins)"},
					&cli.DurationFlag{Name: "announce", Usage: "how soon a node's change of presence is announced, at most", Value: time.Second},
					&cli.StringFlag{Name: "profile", Usage: "node timing: testnet (250 ms beats, ~1.5 s detection) or mesh (1 s beats, ~5 s detection; for many nodes on few cores)", Value: "testnet"},
					&cli.StringFlag{Name: "schedule", Usage: "timetable `FILE` (bedwe-schedule/1) for every node; the zones become the timetable's", TakesFile: true},
					&cli.Float64Flag{Name: "clock-speed", Usage: "run a virtual timetable clock this many times faster than real time (360: an hour in 10 s); 0: real time"},
					&cli.TimestampFlag{Name: "clock-start", Usage: "timetable instant the virtual clock reads as the nodes start (RFC 3339)", Layout: time.RFC3339, DefaultText: "now"},
					&cli.StringFlag{Name: "routing", Usage: "timetable (pick peers powered for the step, drain before cuts) or heartbeat (ignore the timetable)", Value: "timetable"},
					&cli.StringSliceFlag{Name: "zone-names", Usage: "zone `NAMES` (comma-separated or repeated) instead of z0, z1, ..."},
					&cli.BoolFlag{Name: "netns", Usage: "run every node in a network namespace of its own on a bridge (root; see 'bedwe testnet partition', 'link')"},
					&cli.StringFlag{Name: "subnet", Usage: "with --netns: private IPv4 `PREFIX` for the nodes and the host link", Value: testnet.DefaultSubnet},
					&cli.StringSliceFlag{Name: "node-flag", Usage: "append `FLAG` to every node's command line, restarts included (repeat for each word: --node-flag=--stash-min --node-flag=1)"},
				},
				Action: func(c *cli.Context) error {
					opts := testnet.Options{
						Nodes: c.Int("nodes"), Dir: c.String("dir"),
						Announce: c.Duration("announce"), Progress: os.Stderr, Profile: c.String("profile"),
						Schedule: c.String("schedule"), Routing: c.String("routing"),
						Netns: c.Bool("netns"), Subnet: c.String("subnet"),
						NodeFlags: c.StringSlice("node-flag"),
					}
					if c.IsSet("zones") || opts.Schedule == "" {
						opts.Zones = c.Int("zones")
					}
					for _, z := range c.StringSlice("zone-names") {
						for _, n := range strings.Split(z, ",") {
							if n = strings.TrimSpace(n); n != "" {
								opts.ZoneNames = append(opts.ZoneNames, n)
							}
						}
					}
					if s := c.Float64("clock-speed"); s != 0 || c.IsSet("clock-start") {
						if s < 0 {
							return cli.Exit(fmt.Sprintf("--clock-speed %g must be positive", s), 1)
						}
						opts.Clock.Speed = s
						if t := c.Timestamp("clock-start"); t != nil {
							opts.Clock.Start = *t
						}
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
					if m.Clock != "" {
						fmt.Printf("virtual clock %s\n", m.Clock)
					}
					return nil
				},
			},
			{
				Name:  "down",
				Usage: "stop every node of a testnet (and remove its network namespaces)",
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
				Usage: "list a testnet's nodes, whether they run and where their metrics are",
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
					fmt.Fprintln(tw, "NODE\tPEER\tZONE\tPID\tRUNNING\tHTTP\tADDR")
					for _, r := range rows {
						addr := ""
						if len(r.Addrs) > 0 {
							addr = r.Addrs[0]
						}
						web := r.HTTP
						if web == "" {
							web = "-"
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%v\t%s\t%s\n", r.Index, short(r.PeerID), r.Zone, r.PID, r.Running, web, addr)
					}
					return tw.Flush()
				},
			},
		}, netnsCommands()...),
	}
}
