// Package importers turns real-world load-shedding timetable shapes into
// bedwe schedules (docs/schedule-format.md, "Importers"): the
// eskom-calendar slot table CSVs (all three header variants), the eskom-calendar stage-change
// YAML timeline, the per-area API JSON (area and status answers) and the
// daily feeder-cycle lines.
//
// Each importer returns a *schedule.Schedule fragment and the problems it met
// (bad rows are reported and skipped, never a crash); combine fragments with
// schedule.Merge. The package reads only what it is handed: it never fetches
// anything and never writes files.
package importers

import (
	"fmt"
	"io"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// MaxInput bounds what an importer reads.
const MaxInput = 16 << 20

// DefaultFeed is the feed name zones follow when Options.Feed is empty.
const DefaultFeed = "national"

// Options are the facts an importer cannot find in its input.
type Options struct {
	// Zone names the imported zone (CSV, area JSON); empty means a name the
	// importer derives (the area's name, the feeder's name).
	Zone string
	// Feed is the stage feed the imported zones follow; empty means
	// DefaultFeed. The stage YAML importer names its feed with it.
	Feed string
	// TimeZone is the IANA zone of wall-clock times in the input; empty
	// means the importer's default (Africa/Johannesburg, or Asia/Karachi for
	// feeder cycles).
	TimeZone string
	// IssuedAt stamps the schedule; zero means the Unix epoch (importers
	// never read the wall clock: the CLI passes "now").
	IssuedAt time.Time
	// KnownUntil bounds the schedule; zero means an importer default: the end
	// of the last stage change or listed day, else IssuedAt + 7 days.
	KnownUntil time.Time
	// Source is recorded on imported zones (a file name or URL).
	Source string
}

func (o Options) loc(def string) (*time.Location, string, error) {
	tz := o.TimeZone
	if tz == "" {
		tz = def
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, "", fmt.Errorf("time zone %q: %w", tz, err)
	}
	return loc, tz, nil
}

func (o Options) feed() string {
	if o.Feed == "" {
		return DefaultFeed
	}
	return o.Feed
}

// stamp fills IssuedAt and KnownUntil from the options or the defaults.
func (o Options) stamp(s *schedule.Schedule, latest time.Time) {
	s.IssuedAt = o.IssuedAt
	if s.IssuedAt.IsZero() {
		s.IssuedAt = time.Unix(0, 0).In(time.UTC)
	}
	s.KnownUntil = o.KnownUntil
	if s.KnownUntil.IsZero() {
		s.KnownUntil = latest
		if !latest.After(s.IssuedAt) {
			s.KnownUntil = s.IssuedAt.Add(7 * 24 * time.Hour)
		}
	}
}

func readAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(data) > MaxInput {
		return nil, fmt.Errorf("input is larger than %d bytes", MaxInput)
	}
	return data, nil
}

func warn(line int, format string, args ...any) schedule.Problem {
	return schedule.Problem{Pos: schedule.Pos{Line: line, Col: 1}, Severity: schedule.Warning, Msg: fmt.Sprintf(format, args...)}
}
