package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/testnet"
)

// defaultDataDir is where `bedwe node` keeps its state when --data is not
// given: $BEDWE_DATA, else ~/.bedwe.
func defaultDataDir() string {
	if d := os.Getenv("BEDWE_DATA"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".bedwe"
	}
	return filepath.Join(home, ".bedwe")
}

func dataFlag() cli.Flag {
	return &cli.StringFlag{Name: "data", Usage: "the node's data directory", Value: defaultDataDir(), EnvVars: []string{"BEDWE_DATA"}}
}

// targetFlags select the peer a client verb talks to.
func targetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "peer", Usage: "full multiaddr of the peer to talk to"},
		&cli.StringFlag{Name: "testnet", Usage: "talk to the testnet in this directory"},
		&cli.IntFlag{Name: "node", Usage: "with --testnet: index of the testnet node to talk to", Value: -1},
		dataFlag(),
		swarmKeyFlag("the mesh's swarm key FILE (default: the one the local node or the testnet uses)"),
		clientKeyFlag("client key FILE to authenticate with (default: the local node's DATA/client.key, or the testnet's)"),
	}
}

func swarmKeyFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "swarm-key", Usage: usage, EnvVars: []string{"BEDWE_SWARM_KEY"}, TakesFile: true}
}

func clientKeyFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "client-key", Usage: usage, EnvVars: []string{"BEDWE_CLIENT_KEY"}, TakesFile: true}
}

// clientOptions reads the keys given with --swarm-key and --client-key.
func clientOptions(c *cli.Context) (client.Options, error) {
	o, err := client.LoadOptions(c.String("swarm-key"), c.String("client-key"))
	if err != nil {
		return o, cli.Exit(err.Error(), 1)
	}
	return o, nil
}

func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output format: text or json", Value: "text"}
}

func jsonOutput(c *cli.Context) (bool, error) {
	switch c.String("output") {
	case "text", "":
		return false, nil
	case "json":
		return true, nil
	}
	return false, cli.Exit(fmt.Sprintf("unknown output format %q (use text or json)", c.String("output")), 1)
}

// dialTarget connects to the peer chosen by --peer, --testnet or --data.
//
// Keys: --swarm-key and --client-key, else those of the local node (its
// node.json in --data) for --peer and --data, else the testnet's.
func dialTarget(ctx context.Context, c *cli.Context) (*client.Client, error) {
	opts, err := clientOptions(c)
	if err != nil {
		return nil, err
	}
	switch {
	case c.String("peer") != "":
		if nf, err := client.ReadNodeFile(c.String("data")); err == nil {
			if local, err := client.NodeOptions(nf); err == nil {
				opts = opts.Or(local)
			}
		}
		cl, err := client.DialWith(ctx, opts, c.String("peer"))
		if err != nil {
			return nil, cli.Exit(err.Error(), 1)
		}
		return cl, nil
	case c.String("testnet") != "":
		m, err := testnet.LoadManifest(c.String("testnet"))
		if err != nil {
			return nil, cli.Exit(err.Error(), 1)
		}
		tn, err := m.ClientOptions()
		if err != nil {
			return nil, cli.Exit(err.Error(), 1)
		}
		opts = opts.Or(tn)
		var lastErr error
		for _, nd := range m.Nodes {
			if i := c.Int("node"); i >= 0 && nd.Index != i {
				continue
			}
			cl, err := client.DialDataDirWith(ctx, nd.DataDir, opts)
			if err == nil {
				return cl, nil
			}
			lastErr = err
		}
		if lastErr == nil {
			lastErr = fmt.Errorf("testnet %s has no node %d", c.String("testnet"), c.Int("node"))
		}
		return nil, cli.Exit("no testnet node answers: "+lastErr.Error(), 1)
	default:
		cl, err := client.DialDataDirWith(ctx, c.String("data"), opts)
		if err != nil {
			return nil, cli.Exit(err.Error(), 1)
		}
		return cl, nil
	}
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// remoteExit turns a client error into a clean exit.
func remoteExit(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(cli.ExitCoder); ok {
		return err
	}
	return cli.Exit(err.Error(), 1)
}

// clientAction wraps a client verb: it checks the argument count (args < 0:
// any), reads -o, dials the chosen peer and hands fn a connected client.
func clientAction(verb string, args int, fn func(ctx context.Context, c *cli.Context, cl *client.Client, asJSON bool) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if args == 1 && c.NArg() != 1 {
			return cli.Exit(fmt.Sprintf("%s takes one workflow ID; see bedwe %s --help", verb, verb), 1)
		}
		if args >= 0 && c.NArg() != args {
			return cli.Exit(fmt.Sprintf("%s takes %d arguments, got %d; see bedwe %s --help", verb, args, c.NArg(), verb), 1)
		}
		asJSON, err := jsonOutput(c)
		if err != nil {
			return err
		}
		ctx := context.Background()
		cl, err := dialTarget(ctx, c)
		if err != nil {
			return err
		}
		defer cl.Close()
		return fn(ctx, c, cl, asJSON)
	}
}
