package main

import "github.com/urfave/cli/v2"

func graphCommand() *cli.Command {
	return &cli.Command{Name: "graph", Usage: "(not yet implemented)"}
}
