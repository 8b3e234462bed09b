package main

import "github.com/urfave/cli/v2"

func fmtCommand() *cli.Command {
	return &cli.Command{Name: "fmt", Usage: "(not yet implemented)"}
}
