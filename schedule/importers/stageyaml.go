package importers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/bedwe/bedwe/schedule"
	"gopkg.in/yaml.v3"
)

type stageDoc struct {
	Changes []stageChange `yaml:"changes"`
}

type stageChange struct {
	Stage   int    `yaml:"stage"`
	Start   string `yaml:"start"`
	Finsh   string `yaml:"finsh"`
	Finish  string `yaml:"finish"`
	End     string `yaml:"end"`
	Source  string `yaml:"source"`
	Exclude string `yaml:"exclude"`
	Include string `yaml:"include"`
	line    int
}

// UnmarshalYAML records the line of each change.
func (c *stageChange) UnmarshalYAML(n *yaml.Node) error {
	type plain stageChange
	c.line = n.Line
	return n.Decode((*plain)(c))
}

// StageYAML reads the eskom-calendar stage timeline:
//
//	changes:
//	- stage: 4
//	  start: 2024-03-02T16:00:00    # local time in Options.TimeZone
//	  finsh: 2024-03-03T05:00:00
//	  source: <url>
//	  exclude: coct                 # regex on zone names
//
// into a schedule with one feed (named Options.Feed) and no zones. Times may
// also carry an offset; "finish" and "end" are accepted for "finsh". Bad
// entries are reported with their line and skipped. KnownUntil defaults to
// the end of the last change.
func StageYAML(r io.Reader, o Options) (*schedule.Schedule, []schedule.Problem, error) {
	data, err := readAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("import stage yaml: %w", err)
	}
	loc, tz, err := o.loc("Africa/Johannesburg")
	if err != nil {
		return nil, nil, fmt.Errorf("import stage yaml: %w", err)
	}
	var doc stageDoc
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("import stage yaml: %w", err)
	}
	var ps []schedule.Problem
	feed := schedule.Feed{Name: o.feed()}
	var latest time.Time
	for _, c := range doc.Changes {
		end := c.Finsh
		for _, alt := range []string{c.Finish, c.End} {
			if end == "" {
				end = alt
			}
		}
		start, err1 := schedule.ParseInstant(c.Start, loc)
		stop, err2 := schedule.ParseInstant(end, loc)
		if err := firstErr(err1, err2); err != nil {
			ps = append(ps, warn(c.line, "stage change skipped: %v", err))
			continue
		}
		if c.Stage < 0 || c.Stage > schedule.MaxStage || !stop.After(start) {
			ps = append(ps, warn(c.line, "stage change skipped: stage %d from %s to %s", c.Stage, c.Start, end))
			continue
		}
		feed.Changes = append(feed.Changes, schedule.Change{
			Stage: c.Stage, Start: start.In(loc), End: stop.In(loc),
			Source: c.Source, Exclude: c.Exclude, Include: c.Include,
		})
		if stop.After(latest) {
			latest = stop.In(loc)
		}
	}
	s := &schedule.Schedule{Format: schedule.FormatV1, TimeZone: tz, Feeds: []schedule.Feed{feed}}
	o.stamp(s, latest)
	return s, ps, nil
}
