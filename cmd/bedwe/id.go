package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node/member"
)

func idCommand() *cli.Command {
	return &cli.Command{
		Name:  "id",
		Usage: "print a node's peer ID or a client's ID, creating the key if there is none",
		Description: `Prints the peer ID of the node whose data directory is --data (DATA/identity.key,
created here if the node never ran, so the trusted-peers list can be written before
any board starts), or with --client the ID of that node's own CLI key
(DATA/client.key), or the ID of the client key --client-key FILE (created if missing:
send the ID to the mesh's operator, who adds it to the nodes' --clients file).

Examples:
   bedwe id --data ~/.bedwe >> trusted-peers
   bedwe id --client-key ~/.config/bedwe/client.key`,
		Flags: []cli.Flag{
			dataFlag(),
			&cli.BoolFlag{Name: "client", Usage: "the ID of the node's own CLI key (DATA/client.key)"},
			&cli.StringFlag{Name: "client-key", Usage: "the ID of this client key FILE", EnvVars: []string{"BEDWE_CLIENT_KEY"}, TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cli.Exit(fmt.Sprintf("id takes no arguments (got %q); see bedwe id --help", c.Args().First()), 1)
			}
			path := filepath.Join(c.String("data"), "identity.key")
			switch {
			case c.String("client-key") != "":
				path = c.String("client-key")
			case c.Bool("client"):
				path = filepath.Join(c.String("data"), "client.key")
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return cli.Exit(fmt.Sprintf("create %s: %v", filepath.Dir(path), err), 1)
			}
			key, err := member.LoadOrCreateKey(path)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			id, err := member.KeyID(key)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			fmt.Println(id)
			return nil
		},
	}
}
