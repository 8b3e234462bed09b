package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/pack"
)

func submitCommand() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "submit a workflow to a peer (which becomes its origin)",
		ArgsUsage: "FILE",
		Description: `Sends the workflow in FILE (- for stdin) with its input to a peer: the local node
found through --data by default, any peer with --peer, or a testnet with --testnet.
Prints the workflow ID. With --wait, shows progress on stderr and prints the result
JSON on stdout; the exit code is 0 only if the workflow succeeded. A peer at its
limit of running workflows (bedwe node --max-workflows), or a client submitting
faster than the peer's rate limit, is refused as busy, nothing recorded: the message
says which and the exit code is 3 (submit again later or to another peer).

Examples:
   bedwe submit wf.bedwe --input '{"city":"Lome"}'
   bedwe submit wf.bedwe --input @input.json --wait
   bedwe submit examples/fig2.bedwe --testnet /tmp/tn --wait -o json`,
		Flags: append(targetFlags(),
			&cli.StringFlag{Name: "input", Usage: "workflow input: JSON text, or @FILE to read it from a file"},
			&cli.BoolFlag{Name: "wait", Usage: "wait for the result, showing progress"},
			outputFlag(),
		),
		Action: runSubmit,
	}
}

func readInput(spec string) (json.RawMessage, error) {
	if spec == "" {
		return nil, nil
	}
	data := []byte(spec)
	if strings.HasPrefix(spec, "@") {
		b, err := os.ReadFile(spec[1:])
		if err != nil {
			return nil, fmt.Errorf("--input: %w", err)
		}
		data = b
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("--input is not valid JSON: %.60q", string(data))
	}
	return data, nil
}

func readSource(name string) (string, []byte, error) {
	if name == "-" {
		b, err := io.ReadAll(os.Stdin)
		return "<stdin>", b, err
	}
	b, err := os.ReadFile(name)
	return name, b, err
}

func runSubmit(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("submit takes one workflow FILE (or - for stdin); see bedwe submit --help", 1)
	}
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	name, src, err := readSource(c.Args().First())
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	// The workflow is checked here as bedwe check does, so a mistake prints
	// the same FILE:LINE:COL lines (text the wire cannot carry, such as
	// invalid UTF-8, would otherwise fail in the client's encoder).
	if _, perr := grammar.Parse(name, src); perr != nil {
		if _, err := workflowErrors(perr); err != nil {
			return cli.Exit(err.Error(), 1)
		}
		fmt.Fprintln(os.Stderr, perr)
		return cli.Exit("", 1)
	}
	input, err := readInput(c.String("input"))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cl, err := dialTarget(ctx, c)
	if err != nil {
		return err
	}
	defer cl.Close()
	st, err := cl.Submit(ctx, name, string(src), input)
	if client.IsBusy(err) {
		// Refused at the peer's limits, nothing recorded: scripts may
		// submit again later.
		return cli.Exit(err.Error(), 3)
	}
	if err != nil {
		return remoteExit(err)
	}
	if !c.Bool("wait") {
		if asJSON {
			return printJSON(st)
		}
		fmt.Println(st.ID)
		return nil
	}
	fmt.Fprintf(os.Stderr, "submitted %s to %s (%d services)\n", st.ID, short(st.Origin), st.StepsTotal)
	var progress progressCounter
	final, err := cl.Wait(ctx, st.ID, 150*time.Millisecond, func(s api.Status) {
		for _, a := range progress.fresh(s) {
			fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", a.Done, s.StepsTotal, describeAttempt(a.Entry))
		}
	})
	if err != nil {
		return remoteExit(err)
	}
	return printFinal(final, asJSON)
}

func describeAttempt(e pack.TraceEntry) string {
	s := fmt.Sprintf("%-10s %-9s on %s zone %-6s %6s", e.Service, e.Outcome, short(e.Peer), orDash(e.Zone), e.End.Sub(e.Start).Round(time.Millisecond))
	if e.Note != "" {
		s += "  " + e.Note
	}
	return s
}

// printFinal prints a finished workflow: the result JSON (or the whole
// status with -o json) and an exit code that says whether it succeeded.
func printFinal(st api.Status, asJSON bool) error {
	if asJSON {
		if err := printJSON(st); err != nil {
			return err
		}
	} else if st.State == api.StateSucceeded {
		if err := printJSON(st.Result); err != nil {
			return err
		}
	}
	switch st.State {
	case api.StateSucceeded:
		fmt.Fprintf(os.Stderr, "%s succeeded in %s (%d steps)\n", st.ID, st.Finished.Sub(st.Submitted).Round(time.Millisecond), st.StepsDone)
		return nil
	case api.StateRunning:
		return cli.Exit(st.ID+" is still running", 3)
	default:
		return cli.Exit(fmt.Sprintf("%s %s: %s", st.ID, st.State, st.Error), 2)
	}
}

func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
