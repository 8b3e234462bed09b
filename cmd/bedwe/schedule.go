package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bedwe/bedwe/schedule"
	"github.com/bedwe/bedwe/schedule/importers"
	"github.com/jonboulle/clockwork"
	"github.com/urfave/cli/v2"
)

func scheduleCommand() *cli.Command { return newScheduleCommand(clockwork.NewRealClock()) }

// newScheduleCommand builds the verb with an injected clock ("now").
func newScheduleCommand(clock clockwork.Clock) *cli.Command {
	return &cli.Command{
		Name:  "schedule",
		Usage: "check, show, import and publish load-shedding timetables",
		Description: "A bedwe schedule (format bedwe-schedule/1, see docs/schedule-format.md) says, per zone,\n" +
			"when the power is cut. Nodes use it to avoid peers about to go dark and to hand off\n" +
			"work before their own cut. Beyond known_until a zone is unknown, never powered.\n\n" +
			"Examples:\n" +
			"   bedwe schedule check examples/schedules/two-zone-rotation.yaml\n" +
			"   bedwe schedule show examples/schedules/staged-city.yaml --zone north --from 2024-03-02T00:00 --hours 48\n" +
			"   bedwe schedule import --from csv area.csv --zone north -o north.yaml\n" +
			"   bedwe schedule publish north.yaml            # sign with the local node's key, gossip to the mesh\n" +
			"   bedwe schedule current --testnet /tmp/tn     # the timetable a node follows",
		Subcommands: []*cli.Command{
			scheduleCheckCommand(),
			scheduleShowCommand(clock),
			scheduleImportCommand(clock),
			schedulePublishCommand(),
			scheduleCurrentCommand(),
			scheduleKeyCommand(),
		},
	}
}

func scheduleCheckCommand() *cli.Command {
	return schedInterspersed(&cli.Command{
		Name:      "check",
		Usage:     "validate a schedule file and summarise it",
		ArgsUsage: "FILE",
		Description: "Reports every problem with its line:col. Errors (overlapping stage changes, an\n" +
			"undefined feed, bad times) make the exit code 1; warnings (a 30-minute block, a\n" +
			"duplicate row) are listed but the file passes.\n\n" +
			"Examples:\n" +
			"   bedwe schedule check examples/schedules/staged-city.yaml\n" +
			"   bedwe schedule check mine.yaml -o json",
		Flags: []cli.Flag{schedOutputFlag()},
	}, runScheduleCheck)
}

type schedCheckReport struct {
	File       string              `json:"file"`
	OK         bool                `json:"ok"`
	Zones      int                 `json:"zones"`
	Feeds      int                 `json:"feeds"`
	IssuedAt   *time.Time          `json:"issued_at,omitempty"`
	KnownUntil *time.Time          `json:"known_until,omitempty"`
	Warnings   int                 `json:"warnings"`
	Problems   []schedProblemEntry `json:"problems"`
}

type schedProblemEntry struct {
	Line     int    `json:"line,omitempty"`
	Col      int    `json:"col,omitempty"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

func runScheduleCheck(c *cli.Context) error {
	if c.NArg() != 1 {
		return schedUsageError(c, "want exactly one schedule FILE")
	}
	path := c.Args().First()
	rep := schedCheckReport{File: path, Problems: []schedProblemEntry{}}
	s, err := schedule.Load(path)
	var pe *schedule.ProblemError
	var ps []schedule.Problem
	switch {
	case errors.As(err, &pe):
		ps = pe.Problems
	case err != nil:
		return cli.Exit(err.Error(), 1)
	default:
		ps = s.Validate()
		rep.OK = true
		rep.Zones, rep.Feeds = len(s.Zones), len(s.Feeds)
		rep.IssuedAt, rep.KnownUntil = &s.IssuedAt, &s.KnownUntil
	}
	errs := 0
	for _, p := range ps {
		rep.Problems = append(rep.Problems, schedProblemEntry{p.Pos.Line, p.Pos.Col, p.Severity.String(), p.Msg})
		if p.Severity == schedule.Error {
			errs++
		} else {
			rep.Warnings++
		}
	}
	w := c.App.Writer
	if c.String("output") == "json" {
		if err := schedWriteJSON(w, rep); err != nil {
			return err
		}
	} else {
		for _, p := range ps {
			fmt.Fprintln(w, schedProblemLine(path, p))
		}
		if rep.OK {
			fmt.Fprintf(w, "%s: ok: %d zones, %d feeds, issued_at %s, known_until %s, %d warnings\n",
				path, rep.Zones, rep.Feeds, s.IssuedAt.Format(time.RFC3339), s.KnownUntil.Format(time.RFC3339), rep.Warnings)
		}
	}
	if !rep.OK {
		return cli.Exit(fmt.Sprintf("%s: %d error(s)", path, errs), 1)
	}
	return nil
}

func schedProblemLine(file string, p schedule.Problem) string {
	if p.Pos.Line == 0 {
		return fmt.Sprintf("%s: %s: %s", file, p.Severity, p.Msg)
	}
	return fmt.Sprintf("%s:%s: %s: %s", file, p.Pos, p.Severity, p.Msg)
}

func scheduleShowCommand(clock clockwork.Clock) *cli.Command {
	return schedInterspersed(&cli.Command{
		Name:      "show",
		Usage:     "print a zone's dark windows over a period, with a 24-column-per-day bar",
		ArgsUsage: "FILE",
		Description: "One line per dark window in the schedule's local time, then one bar per day with a\n" +
			"column per hour: ▇ dark all hour, ▄ dark part of it, ? unknown, blank powered.\n" +
			"--from takes RFC 3339, a local time (2024-03-02T06:00, read in the schedule's zone) or \"now\".\n\n" +
			"Examples:\n" +
			"   bedwe schedule show examples/schedules/two-zone-rotation.yaml --zone east\n" +
			"   bedwe schedule show staged.yaml --zone north --from 2024-03-02T00:00 --hours 72\n" +
			"   bedwe schedule show staged.yaml --zone north --from now -o json",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "zone", Usage: "zone to show (may be omitted if the schedule has one zone)"},
			&cli.StringFlag{Name: "from", Value: "now", Usage: "start: RFC 3339, local date-time, or \"now\""},
			&cli.IntFlag{Name: "hours", Value: 24, Usage: "length of the period in hours"},
			schedOutputFlag(),
		},
	}, func(c *cli.Context) error { return runScheduleShow(c, clock) })
}

type schedShowReport struct {
	Zone        string            `json:"zone"`
	Feed        string            `json:"feed,omitempty"`
	TimeZone    string            `json:"timezone"`
	From        time.Time         `json:"from"`
	To          time.Time         `json:"to"`
	State       schedule.State    `json:"state_at_from"`
	KnownUntil  time.Time         `json:"known_until"`
	UnknownFrom *time.Time        `json:"unknown_from,omitempty"`
	Windows     []schedule.Window `json:"windows"`
}

func runScheduleShow(c *cli.Context, clock clockwork.Clock) error {
	if c.NArg() != 1 {
		return schedUsageError(c, "want exactly one schedule FILE")
	}
	s, err := schedule.Load(c.Args().First())
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	loc, _ := time.LoadLocation(s.TimeZone) // Load validated it
	zone := c.String("zone")
	if zone == "" && len(s.Zones) == 1 {
		zone = s.Zones[0].Name
	}
	var z *schedule.Zone
	names := make([]string, 0, len(s.Zones))
	for i := range s.Zones {
		names = append(names, s.Zones[i].Name)
		if s.Zones[i].Name == zone {
			z = &s.Zones[i]
		}
	}
	if z == nil {
		return cli.Exit(fmt.Sprintf("zone %q is not in the schedule: want --zone with one of %s", zone, strings.Join(names, ", ")), 1)
	}
	from, err := schedParseWhen(c.String("from"), loc, clock)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if c.String("from") == "now" && !schedule.Plausible(from, s) {
		fmt.Fprintf(c.App.ErrWriter, "warning: the clock reads %s, before the schedule was issued (%s): it is not plausible\n",
			from.Format(time.RFC3339), s.IssuedAt.Format(time.RFC3339))
	}
	hours := c.Int("hours")
	if hours < 1 || hours > 24*400 {
		return cli.Exit(fmt.Sprintf("--hours %d: want 1..%d", hours, 24*400), 1)
	}
	from = from.In(loc)
	to := from.Add(time.Duration(hours) * time.Hour)
	st, _ := s.StateAt(zone, from)
	rep := schedShowReport{Zone: zone, Feed: z.Feed, TimeZone: s.TimeZone, From: from, To: to, State: st, KnownUntil: s.KnownUntil.In(loc), Windows: []schedule.Window{}}
	for _, w := range s.Windows(zone, from, to) {
		w.Start, w.End = w.Start.In(loc), w.End.In(loc)
		rep.Windows = append(rep.Windows, w)
	}
	if u := schedFirstUnknown(s, zone, from, to); !u.IsZero() {
		u = u.In(loc)
		rep.UnknownFrom = &u
	}
	if c.String("output") == "json" {
		return schedWriteJSON(c.App.Writer, rep)
	}
	schedPrintShow(c.App.Writer, s, rep)
	return nil
}

// schedFirstUnknown returns the first instant in [from, to) at which the zone is
// Unknown, or the zero time.
func schedFirstUnknown(s *schedule.Schedule, zone string, from, to time.Time) time.Time {
	for t := from; t.Before(to); {
		until, next := s.PoweredUntil(zone, t)
		switch {
		case next == schedule.Unknown && until.Before(to):
			return until
		case next == schedule.Powered:
			t = until
		default: // dark at until (or at t): continue after the window
			r, ok := s.NextRestore(zone, until)
			if !ok {
				if st, _ := s.StateAt(zone, until); st == schedule.Unknown {
					return until
				}
				for _, w := range s.Windows(zone, until, to) {
					if !w.End.Before(to) {
						return time.Time{}
					}
					until = w.End
				}
				return until
			}
			t = r
		}
	}
	return time.Time{}
}

func schedPrintShow(w io.Writer, s *schedule.Schedule, r schedShowReport) {
	const layout = "Mon 2006-01-02 15:04"
	feed := "no stage feed"
	if r.Feed != "" {
		feed = "feed " + r.Feed
	}
	fmt.Fprintf(w, "zone %s (%s), %s, %s → %s: %s at the start\n", r.Zone, feed, r.TimeZone, r.From.Format(layout), r.To.Format(layout), r.State)
	if len(r.Windows) == 0 {
		fmt.Fprintln(w, "  no dark windows")
	}
	for _, win := range r.Windows {
		end := win.End.Format("15:04")
		if win.End.YearDay() != win.Start.YearDay() {
			end = win.End.Format(layout)
		}
		stage := ""
		if win.Stage > 0 {
			stage = fmt.Sprintf("  stage %d", win.Stage)
		}
		fmt.Fprintf(w, "  %s → %s  %-7s%s  %s\n", win.Start.Format(layout), end, schedShortDuration(win.Duration()), stage, win.Source)
	}
	if r.UnknownFrom != nil {
		fmt.Fprintf(w, "  unknown from %s (known_until %s)\n", r.UnknownFrom.Format(layout), r.KnownUntil.Format(layout))
	}
	fmt.Fprintf(w, "\n%-15s|0     6     12    18    |\n", "")
	loc := r.From.Location()
	y, m, d := r.From.Date()
	for day := time.Date(y, m, d, 0, 0, 0, 0, loc); day.Before(r.To); day = time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc) {
		var bar strings.Builder
		for h := 0; h < 24; h++ {
			a := time.Date(day.Year(), day.Month(), day.Day(), h, 0, 0, 0, loc)
			b := time.Date(day.Year(), day.Month(), day.Day(), h+1, 0, 0, 0, loc)
			bar.WriteString(schedHourCell(s, r, a, b))
		}
		fmt.Fprintf(w, "%-15s|%s|\n", day.Format("Mon 2006-01-02"), bar.String())
	}
}

// schedHourCell renders one hour of the bar.
func schedHourCell(s *schedule.Schedule, r schedShowReport, a, b time.Time) string {
	if !b.After(r.From) || !a.Before(r.To) || !b.After(a) {
		return " "
	}
	var dark time.Duration
	for _, w := range r.Windows {
		lo, hi := schedMaxT(w.Start, a), schedMinT(w.End, b)
		if hi.After(lo) {
			dark += hi.Sub(lo)
		}
	}
	switch {
	case dark >= b.Sub(a):
		return "▇"
	case dark > 0:
		return "▄"
	}
	if st, _ := s.StateAt(r.Zone, a.Add(b.Sub(a)/2)); st == schedule.Unknown {
		return "?"
	}
	return " "
}

func schedShortDuration(d time.Duration) string {
	s := d.Round(time.Minute).String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "h0m") + map[bool]string{true: "h", false: ""}[strings.HasSuffix(s, "h0m")]
}

func schedMaxT(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func schedMinT(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// schedParseWhen reads "now", RFC 3339 or a local date-time in loc.
func schedParseWhen(v string, loc *time.Location, clock clockwork.Clock) (time.Time, error) {
	if v == "now" {
		return clock.Now(), nil
	}
	t, err := schedule.ParseInstant(v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("--from: %w", err)
	}
	return t, nil
}

func scheduleImportCommand(clock clockwork.Clock) *cli.Command {
	return schedInterspersed(&cli.Command{
		Name:      "import",
		Usage:     "convert real-world timetables into the bedwe schedule format",
		ArgsUsage: "FILE...",
		Description: "Shapes (--from):\n" +
			"   csv         eskom-calendar slot tables (date_of_month / day_of_week / day_of_cycle);\n" +
			"               one zone per file, named by --zone (one file) or the file name\n" +
			"   stage-yaml  eskom-calendar stage timeline (changes: stage, start, finsh, exclude)\n" +
			"   area-json   per-area API answers (events + schedule.days) or status answers\n" +
			"   feeder      daily feeder cycles: AREA|FEEDER|GROUP|CATEGORY|0805~1035|...\n" +
			"Slot tables need a stage timeline to answer: import one, then the other with --merge.\n" +
			"Bad rows are reported on stderr and skipped.\n\n" +
			"Examples:\n" +
			"   bedwe schedule import --from stage-yaml manually_specified.yaml -o national.yaml\n" +
			"   bedwe schedule import --from csv city-north.csv city-south.csv --merge national.yaml -o city.yaml\n" +
			"   bedwe schedule import --from feeder feeders.txt --tz Asia/Karachi --known-until 168h",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "input shape: csv, stage-yaml, area-json or feeder"},
			&cli.StringFlag{Name: "zone", Usage: "zone name (csv with one file, area-json), or the feeder to keep"},
			&cli.StringFlag{Name: "feed", Usage: "stage feed the zones follow / the timeline's name (default national)"},
			&cli.StringFlag{Name: "tz", Usage: "IANA time zone of the input (default Africa/Johannesburg; feeder: Asia/Karachi)"},
			&cli.StringFlag{Name: "issued-at", Value: "now", Usage: "issued_at: RFC 3339 or \"now\""},
			&cli.StringFlag{Name: "known-until", Usage: "known_until: RFC 3339, or a duration after issued-at (168h)"},
			&cli.StringFlag{Name: "merge", Usage: "bedwe schedule to merge the import into"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output file (default stdout)"},
		},
	}, func(c *cli.Context) error { return runScheduleImport(c, clock) })
}

type schedImporter func(io.Reader, importers.Options) (*schedule.Schedule, []schedule.Problem, error)

var schedImporters = map[string]schedImporter{
	"csv": importers.CSV, "stage-yaml": importers.StageYAML, "area-json": importers.AreaJSON, "feeder": importers.Feeder,
}

func runScheduleImport(c *cli.Context, clock clockwork.Clock) error {
	imp := schedImporters[c.String("from")]
	if imp == nil {
		return schedUsageError(c, fmt.Sprintf("--from %q: want csv, stage-yaml, area-json or feeder", c.String("from")))
	}
	if c.NArg() == 0 {
		return schedUsageError(c, "want at least one input FILE")
	}
	opts := importers.Options{Feed: c.String("feed"), TimeZone: c.String("tz")}
	var err error
	if opts.IssuedAt, err = schedParseWhen(c.String("issued-at"), time.UTC, clock); err != nil {
		return cli.Exit(strings.Replace(err.Error(), "--from", "--issued-at", 1), 1)
	}
	if ku := c.String("known-until"); ku != "" {
		if d, derr := time.ParseDuration(ku); derr == nil {
			opts.KnownUntil = opts.IssuedAt.Add(d)
		} else if opts.KnownUntil, err = schedule.ParseInstant(ku, time.UTC); err != nil {
			return cli.Exit("--known-until: "+err.Error(), 1)
		}
	}
	var out *schedule.Schedule
	if m := c.String("merge"); m != "" {
		if out, err = schedule.Load(m); err != nil {
			return cli.Exit(err.Error(), 1)
		}
	}
	for _, path := range c.Args().Slice() {
		o := opts
		o.Source = filepath.Base(path)
		o.Zone = c.String("zone")
		if c.String("from") == "csv" && (o.Zone == "" || c.NArg() > 1) {
			o.Zone = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		}
		f, err := os.Open(path)
		if err != nil {
			return cli.Exit(fmt.Sprintf("import: %v", err), 1)
		}
		s, ps, err := imp(f, o)
		f.Close()
		for _, p := range ps {
			fmt.Fprintln(c.App.ErrWriter, schedProblemLine(path, p))
		}
		if err != nil {
			return cli.Exit(fmt.Sprintf("%s: %v", path, err), 1)
		}
		if out == nil {
			out = s
		} else if out, err = schedule.Merge(out, s); err != nil {
			return cli.Exit(fmt.Sprintf("%s: %v", path, err), 1)
		}
	}
	ps := out.Validate()
	for _, p := range ps {
		fmt.Fprintln(c.App.ErrWriter, schedProblemLine("result", p))
	}
	if schedule.HasErrors(ps) {
		return cli.Exit("import: the resulting schedule has errors; nothing written", 1)
	}
	data, err := out.Marshal()
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if dst := c.String("out"); dst != "" && dst != "-" {
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return cli.Exit(fmt.Sprintf("import: %v", err), 1)
		}
		fmt.Fprintf(c.App.ErrWriter, "wrote %s: %d zones, %d feeds, known until %s\n", dst, len(out.Zones), len(out.Feeds), out.KnownUntil.Format(time.RFC3339))
		return nil
	}
	_, err = c.App.Writer.Write(data)
	return err
}

func schedOutputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "output format: text or json"}
}

func schedWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func schedUsageError(c *cli.Context, msg string) error {
	return cli.Exit(fmt.Sprintf("schedule %s: %s (see bedwe schedule %s --help)", c.Command.Name, msg, c.Command.Name), 1)
}

// schedInterspersed lets a subcommand take flags after its arguments
// ("show FILE --zone Z"), which urfave/cli v2 does not: the command skips
// cli's flag parsing and parses its own flags with the arguments moved last.
func schedInterspersed(cmd *cli.Command, action cli.ActionFunc) *cli.Command {
	cmd.SkipFlagParsing = true
	cmd.Action = func(c *cli.Context) error {
		set := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
		set.SetOutput(io.Discard)
		takesValue := map[string]bool{}
		for _, f := range cmd.Flags {
			if err := f.Apply(set); err != nil {
				return err
			}
			_, isBool := f.(*cli.BoolFlag)
			for _, n := range f.Names() {
				takesValue[n] = !isBool
			}
		}
		var flags, args []string
		in := c.Args().Slice()
		for i := 0; i < len(in); i++ {
			a := in[i]
			switch {
			case a == "--":
				args = append(args, in[i+1:]...)
				i = len(in)
			case a == "-h" || a == "--help" || a == "-help":
				return cli.ShowSubcommandHelp(c)
			case len(a) > 1 && a[0] == '-':
				flags = append(flags, a)
				name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
				if takesValue[name] && !hasValue && i+1 < len(in) {
					i++
					flags = append(flags, in[i])
				}
			default:
				args = append(args, a)
			}
		}
		if err := set.Parse(append(append(flags, "--"), args...)); err != nil {
			return cli.Exit(fmt.Sprintf("schedule %s: %v (see bedwe schedule %s --help)", cmd.Name, err, cmd.Name), 1)
		}
		// Copy values between a flag's aliases (-o and --output).
		seen := map[string]string{}
		set.Visit(func(f *flag.Flag) { seen[f.Name] = f.Value.String() })
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				if v, ok := seen[n]; ok {
					for _, other := range f.Names() {
						_ = set.Set(other, v)
					}
				}
			}
		}
		nc := cli.NewContext(c.App, set, c)
		nc.Command = cmd
		return action(nc)
	}
	return cmd
}
