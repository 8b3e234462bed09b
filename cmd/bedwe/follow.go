package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/schedule"
	"github.com/bedwe/bedwe/testnet"
)

func followFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dir", Usage: "`DIR` of a running testnet", Required: true},
		&cli.DurationFlag{Name: "for", Usage: "how long to follow the timetable, in real time (0: until interrupted)"},
		&cli.StringFlag{Name: "schedule", Usage: "timetable `FILE` to follow (default: the testnet's, from `testnet up --schedule`)", TakesFile: true},
		outputFlag(),
	}
}

func followCommand() *cli.Command {
	return &cli.Command{
		Name:  "follow",
		Usage: "SIGKILL each zone's processes at its cuts and restart them at its restores, as the timetable says",
		Description: `Plays the testnet's timetable on its virtual clock (testnet up --schedule FILE
--clock-speed X): at every cut of a zone, every node process of that zone is killed with
SIGKILL; at the restore they are restarted with their data directories. A zone dark when
it starts is killed at once. It sleeps on real timers until each transition, prints one
line per kill and restart on stderr, and when --for ends (or on Ctrl-C) restarts the
zones it left dark and prints a summary: every event with its timetable instant, the real
and virtual time it happened, and how late it was (-o json for JSON).
'bedwe testnet chaos --scenario timetable' does the same.

Examples:
   bedwe testnet up --dir /tmp/tn --nodes 8 --schedule examples/schedules/two-zone-rotation.yaml --clock-speed 720
   bedwe testnet follow --dir /tmp/tn --for 2m -o json
   bedwe testnet chaos --dir /tmp/tn --scenario timetable --for 1m`,
		Flags:  followFlags(),
		Action: runFollow,
	}
}

// runFollow follows the timetable on the testnet in --dir for --for.
func runFollow(c *cli.Context) error {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	if c.String("dir") == "" {
		return cli.Exit("--dir of a running testnet is required", 1)
	}
	m, err := testnet.LoadManifest(c.String("dir"))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	clock, err := m.VirtualClock()
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	var sched *schedule.Schedule
	if f := c.String("schedule"); f != "" {
		sched, err = schedule.Load(f)
	} else {
		sched, err = m.LoadSchedule()
	}
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if d := c.Duration("for"); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	fmt.Fprintf(os.Stderr, "following the timetable on %d nodes in zones %v (clock %s, now %s)\n",
		len(m.Nodes), m.Zones, clockText(clock), clock.Now().Format(time.RFC3339))
	rep, err := m.Follow(ctx, testnet.FollowOptions{Schedule: sched, Clock: clock, Progress: os.Stderr, Restore: true})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if asJSON {
		if err := printJSON(rep); err != nil {
			return err
		}
		return followExit(rep)
	}
	fmt.Printf("followed from %s to %s (timetable time), %d processes killed, %d restarted, latest %d ms late\n",
		rep.VirtualFrom.Format("2006-01-02 15:04"), rep.VirtualTo.Format("2006-01-02 15:04"), rep.Kills, rep.Restarts, rep.LagMsMax)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIMETABLE\tZONE\tEVENT\tNODES\tREAL\tLATE MS\tTOOK MS\tERROR")
	for _, ev := range rep.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%d\t%d\t%s\n", ev.Scheduled.Format("01-02 15:04:05"), ev.Zone, ev.Kind, ev.Nodes,
			ev.Real.Format("15:04:05.000"), ev.LagMs, ev.Done.Sub(ev.Real).Milliseconds(), ev.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return followExit(rep)
}

// followExit is exit status 2 when some kill or restart failed.
func followExit(rep *testnet.FollowReport) error {
	if rep.Errors > 0 {
		return cli.Exit(fmt.Sprintf("%d kills or restarts failed", rep.Errors), 2)
	}
	return nil
}

func clockText(c schedule.VirtualClock) string {
	if c.IsZero() {
		return "real time"
	}
	return c.String()
}
