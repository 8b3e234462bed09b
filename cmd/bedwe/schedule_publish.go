package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/schedule"
)

func schedulePublishCommand() *cli.Command {
	return schedInterspersed(&cli.Command{
		Name:      "publish",
		Usage:     "sign a timetable with a node's key and gossip it to the whole mesh",
		ArgsUsage: "FILE|-",
		Description: "The file (- reads stdin) is checked here, then sent to a running node (the local one\n" +
			"by default; --peer, --testnet or --data choose another), which signs it with its own\n" +
			"Ed25519 key and gossips it. Every node accepts it only if that key is among its trusted\n" +
			"keys (bedwe node --trusted-keys FILE or --trust KEY) and only if it was issued later\n" +
			"than the timetable it holds (newest issued_at wins); it then persists it, so it survives\n" +
			"restarts. Nodes that were down or start later fetch it from a peer that holds it.\n" +
			"The publishing node's own key must be trusted by itself too: print it with\n" +
			"`bedwe schedule key --data DIR` and add it to every node's trusted keys.\n" +
			"Exit 1 when the node keeps a timetable issued later (or at the same instant):\n" +
			"raise issued_at to replace it.\n\n" +
			"Examples:\n" +
			"   bedwe schedule key --data ~/.bedwe >> trusted.keys     # once, then give every node --trusted-keys trusted.keys\n" +
			"   bedwe schedule publish city.yaml\n" +
			"   bedwe schedule import --from csv area.csv --zone area-7 | bedwe schedule publish - --peer /ip4/10.0.0.2/tcp/4001/p2p/12D3KooW...\n" +
			"   bedwe schedule publish city.yaml --testnet /tmp/tn -o json",
		Flags: append(targetFlags(), schedOutputFlag()),
	}, runSchedulePublish)
}

func runSchedulePublish(c *cli.Context) error {
	if c.NArg() != 1 {
		return schedUsageError(c, "want exactly one schedule FILE (or - for stdin)")
	}
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	path := c.Args().First()
	name := path
	var data []byte
	if path == "-" {
		name = "stdin"
		in := c.App.Reader
		if in == nil {
			in = os.Stdin
		}
		data, err = io.ReadAll(io.LimitReader(in, schedule.MaxFileSize+1))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("schedule publish: %v", err), 1)
	}
	if len(data) > schedule.MaxFileSize {
		return cli.Exit(fmt.Sprintf("%s: more than the %d bytes a timetable may have", name, schedule.MaxFileSize), 1)
	}
	// Check it here first: the problems print exactly as `schedule check`
	// prints them, and nothing is sent when there are errors.
	s, err := schedule.Parse(data)
	var pe *schedule.ProblemError
	switch {
	case errors.As(err, &pe):
		errs := 0
		for _, p := range pe.Problems {
			fmt.Fprintln(c.App.ErrWriter, schedProblemLine(name, p))
			if p.Severity == schedule.Error {
				errs++
			}
		}
		return cli.Exit(fmt.Sprintf("%s: %d error(s); nothing published", name, errs), 1)
	case err != nil:
		return cli.Exit(fmt.Sprintf("%s: %v", name, err), 1)
	}
	for _, p := range s.Validate() {
		fmt.Fprintln(c.App.ErrWriter, schedProblemLine(name, p))
	}

	ctx := context.Background()
	cl, err := dialTarget(ctx, c)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := cl.PublishSchedule(ctx, name, data)
	if err != nil {
		return remoteExit(err)
	}
	if asJSON {
		if err := schedWriteJSON(c.App.Writer, res); err != nil {
			return err
		}
	} else {
		schedPrintPublish(c.App.Writer, name, res)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(c.App.ErrWriter, "warning:", w)
	}
	if !res.Adopted && !res.Gossiped {
		return cli.Exit(schedNotAdopted(name, res), 1)
	}
	return nil
}

func schedPrintPublish(w io.Writer, name string, r api.PublishResult) {
	s := r.Schedule
	switch {
	case r.Adopted:
		fmt.Fprintf(w, "published %s: issued_at %s, known_until %s, %s\n", name,
			s.IssuedAt.Format(time.RFC3339), s.KnownUntil.Format(time.RFC3339), schedZoneList(s.Zones))
	case r.Gossiped:
		fmt.Fprintf(w, "%s is already in force on peer %s (issued_at %s): gossiped it again\n", name,
			rpc.ShortIDString(s.Peer), s.IssuedAt.Format(time.RFC3339))
	default:
		return // the exit message says which timetable is newer
	}
	fmt.Fprintf(w, "  signed by peer %s with key %s (%d bytes)\n", rpc.ShortIDString(s.Peer), s.Signer, r.Bytes)
	if r.Gossiped && r.Peers > 0 {
		fmt.Fprintf(w, "  gossiped to %d peer(s) on the timetable topic; nodes that missed it fetch it through presence\n", r.Peers)
	}
}

// schedNotAdopted says which timetable is newer when the node kept its own.
func schedNotAdopted(name string, r api.PublishResult) string {
	in := r.InForce
	if in == nil {
		return fmt.Sprintf("peer %s did not adopt %s", rpc.ShortIDString(r.Schedule.Peer), name)
	}
	from := "its local --schedule file"
	if in.Source == api.ScheduleSigned {
		from = "signed by " + in.Signer
	}
	cmp := "later than"
	if in.IssuedAt.Equal(r.Schedule.IssuedAt) {
		cmp = "at the same instant as"
	}
	return fmt.Sprintf("peer %s holds a timetable issued at %s (%s), %s %s (issued_at %s); the newest issued_at wins: raise issued_at to replace it",
		rpc.ShortIDString(in.Peer), in.IssuedAt.Format(time.RFC3339), from, cmp, name, r.Schedule.IssuedAt.Format(time.RFC3339))
}

func schedZoneList(zones []string) string {
	switch {
	case len(zones) == 0:
		return "no zones"
	case len(zones) > 8:
		return fmt.Sprintf("%d zones (%s, …)", len(zones), strings.Join(zones[:8], ", "))
	}
	return fmt.Sprintf("%d zone(s) (%s)", len(zones), strings.Join(zones, ", "))
}

func scheduleCurrentCommand() *cli.Command {
	return schedInterspersed(&cli.Command{
		Name:  "current",
		Usage: "show the timetable in force on a running node",
		Description: "Says where the node's timetable came from (signed by which key, or its local\n" +
			"--schedule file), when it was issued and how far it reaches.\n\n" +
			"Examples:\n" +
			"   bedwe schedule current\n" +
			"   bedwe schedule current --testnet /tmp/tn --node 3 -o json",
		Flags: append(targetFlags(), schedOutputFlag()),
	}, clientAction("schedule current", 0, runScheduleCurrent))
}

func runScheduleCurrent(ctx context.Context, c *cli.Context, cl *client.Client, asJSON bool) error {
	info, err := cl.Schedule(ctx)
	if err != nil {
		return remoteExit(err)
	}
	if asJSON {
		return schedWriteJSON(c.App.Writer, info)
	}
	w := c.App.Writer
	peer := rpc.ShortIDString(info.Peer)
	switch info.Source {
	case api.ScheduleNone:
		fmt.Fprintf(w, "peer %s holds no timetable\n", peer)
		return nil
	case api.ScheduleSigned:
		fmt.Fprintf(w, "peer %s: timetable signed by %s\n", peer, info.Signer)
	default:
		fmt.Fprintf(w, "peer %s: timetable from its local --schedule file (unsigned, not served to peers)\n", peer)
	}
	fmt.Fprintf(w, "  issued_at %s, known_until %s, timezone %s\n  %s, %d feed(s)\n",
		info.IssuedAt.Format(time.RFC3339), info.KnownUntil.Format(time.RFC3339), info.TimeZone, schedZoneList(info.Zones), info.Feeds)
	if info.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", info.Note)
	}
	return nil
}

func scheduleKeyCommand() *cli.Command {
	return schedInterspersed(&cli.Command{
		Name:  "key",
		Usage: "print a node's public key, for other nodes' trusted keys",
		Description: "Prints the Ed25519 public key of the node whose data directory is --data (read from\n" +
			"its identity key; the node need not run) in base64, one line, as --trust and\n" +
			"--trusted-keys files take it. The fingerprint and peer ID go to stderr.\n\n" +
			"Examples:\n" +
			"   bedwe schedule key --data ~/.bedwe >> trusted.keys\n" +
			"   bedwe node --data /srv/b --trust \"$(bedwe schedule key --data /srv/a)\" ...\n" +
			"   bedwe schedule key --data ~/.bedwe -o json",
		Flags: []cli.Flag{dataFlag(), schedOutputFlag()},
	}, runScheduleKey)
}

type schedKeyReport struct {
	PublicKey   string `json:"public_key"`
	Fingerprint string `json:"fingerprint"`
	PeerID      string `json:"peer_id"`
	Data        string `json:"data"`
}

func runScheduleKey(c *cli.Context) error {
	if c.NArg() != 0 {
		return schedUsageError(c, "takes no arguments (use --data DIR)")
	}
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	dir := c.String("data")
	pub, id, err := node.ReadPublicKey(dir)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	rep := schedKeyReport{PublicKey: schedule.FormatPublicKey(pub), Fingerprint: schedule.Fingerprint(pub), PeerID: id, Data: dir}
	if asJSON {
		return schedWriteJSON(c.App.Writer, rep)
	}
	fmt.Fprintln(c.App.Writer, rep.PublicKey)
	fmt.Fprintf(c.App.ErrWriter, "# %s, peer %s (%s)\n", rep.Fingerprint, rep.PeerID, dir)
	return nil
}
