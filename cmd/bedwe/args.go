package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// permuteArgs moves flags ahead of positional arguments for the command the
// arguments name, so `bedwe submit wf.bedwe --wait` works like
// `bedwe submit --wait wf.bedwe` (urfave/cli stops reading flags at the
// first positional argument). A flag that takes a value keeps the token after
// it unless written as --flag=value; "--" ends flag reordering.
func permuteArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	cmds := app.Commands
	var cmd *cli.Command
	i := 1
	// Walk down the command and subcommand names.
	for i < len(args) {
		next := findCommand(cmds, args[i])
		if next == nil {
			break
		}
		cmd = next
		out = append(out, args[i])
		cmds = cmd.Subcommands
		i++
	}
	if cmd == nil {
		return args
	}
	var flags, positional []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		if strings.Contains(a, "=") {
			continue
		}
		if takesValue(cmd, strings.TrimLeft(a, "-")) && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	out = append(out, flags...)
	return append(out, positional...)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// takesValue reports whether the command's flag called name needs a value.
func takesValue(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if _, isBool := f.(*cli.BoolFlag); isBool {
				return false
			}
			if df, ok := f.(cli.DocGenerationFlag); ok {
				return df.TakesValue()
			}
			return true
		}
	}
	return false
}
