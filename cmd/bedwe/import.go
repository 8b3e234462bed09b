package main

import "github.com/urfave/cli/v2"

func importCommand() *cli.Command {
	return &cli.Command{Name: "import", Usage: "(not yet implemented)"}
}
