// Command bedwe is the best-effort decentralized workflow engine: a peer
// (bedwe node), its clients (submit, status, result, cancel, peers), the
// language tools (check, fmt, graph), timetable tools (schedule) and a local
// multi-process testnet.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	app := &cli.App{
		Name:  "bedwe",
		Usage: "run workflows across a mesh of peers that lose power on a schedule",
		Description: "bedwe has no central engine: every node peels the head off a workflow, runs it,\n" +
			"and forwards the rest to a live, powered peer over libp2p.\n\n" +
			"Quick start:\n   bedwe demo                 # a local testnet runs the paper's Fig. 2 workflow\n" +
			"   bedwe check wf.bedwe       # validate a workflow file",
		Commands: []*cli.Command{
			// running a mesh
			initCommand(),
			nodeCommand(),
			submitCommand(),
			statusCommand(),
			resultCommand(),
			cancelCommand(),
			peersCommand(),
			swarmKeyCommand(),
			idCommand(),
			testnetCommand(),
			demoCommand(),
			benchCommand(),
			simCommand(),
			// language tools
			checkCommand(),
			fmtCommand(),
			graphCommand(),
			// timetables
			scheduleCommand(),
			// importers
			importCommand(),
		},
		HideHelpCommand: true,
	}
	if err := app.Run(permuteArgs(app, os.Args)); err != nil {
		var coder cli.ExitCoder
		if errors.As(err, &coder) {
			if msg := err.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, "bedwe:", msg)
			}
			os.Exit(coder.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "bedwe:", err)
		os.Exit(1)
	}
}
