package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/testnet"
)

//go:embed demo/fig2.bedwe
var demoWorkflow string

//go:embed demo/services.yaml
var demoServices string

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run the paper's Fig. 2 workflow on a throw-away local testnet",
		Description: `Starts a testnet of real bedwe node processes on 127.0.0.1 (8 nodes in 3 zones by
default), submits the BEDWE paper's Fig. 2 workflow with a guarded CHOICE, shows each
step as it finishes with the peer and zone that ran it, prints the result, and tears
the testnet down. Needs nothing but this binary.

Examples:
   bedwe demo
   bedwe demo --nodes 12 --zones 4 --input '{"priority":"low"}'`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 8, Usage: "number of node processes"},
			&cli.IntFlag{Name: "zones", Value: 3, Usage: "number of zones"},
			&cli.StringFlag{Name: "input", Value: `{"priority":"high"}`, Usage: "workflow input JSON"},
			&cli.StringFlag{Name: "dir", Usage: "keep the testnet files here (default: a temporary directory, removed after)"},
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	input, err := readInput(c.String("input"))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	dir := c.String("dir")
	if dir == "" {
		tmp, err := os.MkdirTemp("", "bedwe-demo-")
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(os.Stderr, "starting %d bedwe nodes in %d zones on 127.0.0.1 …\n", c.Int("nodes"), c.Int("zones"))
	m, err := testnet.Up(ctx, testnet.Options{
		Nodes: c.Int("nodes"), Zones: c.Int("zones"), Dir: dir,
		Services: demoServices, Progress: os.Stderr,
	})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "stopping the testnet …")
		_ = m.Down()
	}()
	zoneOf := map[string]string{}
	indexOf := map[string]int{}
	for _, nd := range m.Nodes {
		zoneOf[nd.PeerID] = nd.Zone
		indexOf[nd.PeerID] = nd.Index
	}
	cl, err := client.DialDataDir(ctx, m.Nodes[0].DataDir)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer cl.Close()
	fmt.Fprintf(os.Stderr, "\nworkflow (input %s):\n%s\n", input, demoWorkflow)
	st, err := cl.Submit(ctx, "fig2.bedwe", demoWorkflow, input)
	if err != nil {
		return remoteExit(err)
	}
	fmt.Fprintf(os.Stderr, "submitted %s to node 0\n", st.ID)
	var progress progressCounter
	final, err := cl.Wait(ctx, st.ID, 100*time.Millisecond, func(s api.Status) {
		for _, a := range progress.fresh(s) {
			e := a.Entry
			fmt.Fprintf(os.Stderr, "  [%2d/%d] %-4s %-7s node %-2d zone %s\n", a.Done, s.StepsTotal, e.Service, e.Outcome, indexOf[e.Peer], zoneOf[e.Peer])
		}
	})
	if err != nil {
		return remoteExit(err)
	}
	fmt.Fprintf(os.Stderr, "\n%s %s in %s. Where each step ran:\n", final.ID, final.State, final.Finished.Sub(final.Submitted).Round(time.Millisecond))
	tw := tabwriter.NewWriter(os.Stderr, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tPATH\tNODE\tZONE\tSTART\tTOOK\tOUTCOME")
	t0 := final.Submitted
	for _, e := range final.Trace {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t+%s\t%s\t%s\n", e.Service, e.Path, indexOf[e.Peer], zoneOf[e.Peer], e.Start.Sub(t0).Round(time.Millisecond), e.End.Sub(e.Start).Round(time.Millisecond), e.Outcome)
	}
	tw.Flush()
	fmt.Fprintln(os.Stderr, "\nresult (outputs by label):")
	out, _ := json.MarshalIndent(final.Result, "", "  ")
	fmt.Println(string(out))
	if final.State != api.StateSucceeded {
		return cli.Exit(fmt.Sprintf("workflow %s: %s", final.State, final.Error), 2)
	}
	return nil
}
