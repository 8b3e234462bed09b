package main

import "github.com/urfave/cli/v2"

func scheduleCommand() *cli.Command {
	return &cli.Command{Name: "schedule", Usage: "(not yet implemented)"}
}
