package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node/member"
)

func swarmKeyCommand() *cli.Command {
	return &cli.Command{
		Name:  "swarm-key",
		Usage: "generate a swarm key: the pre-shared key of a private mesh",
		Description: `Writes a new 32-byte pre-shared key in the swarm key format of kubo and IPFS Cluster
(/key/swarm/psk/1.0.0/, /base16/, 64 hex digits) to FILE (mode 0600), or to stdout.
Copy it to every board and start each node with --swarm-key FILE: a host without
the key cannot open a connection to the mesh. A private mesh runs on TCP only:
QUIC cannot be used with a private network.

Examples:
   bedwe swarm-key -o ~/.bedwe/swarm.key
   bedwe swarm-key > swarm.key`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the key to FILE (refuses to replace one); default stdout", TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cli.Exit(fmt.Sprintf("swarm-key takes no arguments (got %q); see bedwe swarm-key --help", c.Args().First()), 1)
			}
			if path := c.String("output"); path != "" {
				if err := member.WriteSwarmKey(path); err != nil {
					return cli.Exit(err.Error(), 1)
				}
				fmt.Fprintf(os.Stderr, "swarm key written to %s; copy it to every board of the mesh (--swarm-key %s)\n", path, path)
				return nil
			}
			key, err := member.NewSwarmKey()
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			_, err = os.Stdout.Write(key)
			return err
		},
	}
}
