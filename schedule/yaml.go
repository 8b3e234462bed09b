package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// MaxFileSize bounds what Parse accepts, so a hostile file cannot exhaust
// a small board's memory.
const MaxFileSize = 8 << 20

// The raw* types mirror the YAML document; every field is text so that Parse
// can report bad values with their position instead of stopping at the first.
type rawDoc struct {
	Format     string     `yaml:"format"`
	TimeZone   string     `yaml:"timezone"`
	IssuedAt   string     `yaml:"issued_at"`
	KnownUntil string     `yaml:"known_until"`
	Note       string     `yaml:"note,omitempty"`
	Feeds      []rawFeed  `yaml:"feeds,omitempty"`
	Zones      []rawZone  `yaml:"zones"`
	Events     []rawEvent `yaml:"events,omitempty"`
}

type rawFeed struct {
	Name       string      `yaml:"name"`
	KnownUntil string      `yaml:"known_until,omitempty"`
	Changes    []rawChange `yaml:"changes"`
	pos        Pos
}

type rawChange struct {
	Stage   int    `yaml:"stage"`
	Start   string `yaml:"start"`
	End     string `yaml:"end"`
	Source  string `yaml:"source,omitempty"`
	Exclude string `yaml:"exclude,omitempty"`
	Include string `yaml:"include,omitempty"`
	pos     Pos
}

type rawZone struct {
	Name   string   `yaml:"name"`
	Feed   string   `yaml:"feed,omitempty"`
	Source string   `yaml:"source,omitempty"`
	Table  rawTable `yaml:"table"`
	pos    Pos
}

type rawTable struct {
	Kind       string   `yaml:"kind"`
	Fold       int      `yaml:"fold,omitempty"`
	Period     int      `yaml:"period,omitempty"`
	Anchor     string   `yaml:"anchor,omitempty"`
	Cumulative bool     `yaml:"cumulative"`
	Rows       []rawRow `yaml:"rows"`
}

type rawRow struct {
	Day   int    `yaml:"day,omitempty"`
	Date  string `yaml:"date,omitempty"`
	Start string `yaml:"start"`
	End   string `yaml:"end"`
	Stage int    `yaml:"stage,omitempty"`
	pos   Pos
}

type rawEvent struct {
	Zone  string `yaml:"zone"`
	Kind  string `yaml:"kind"`
	Start string `yaml:"start"`
	End   string `yaml:"end"`
	Stage int    `yaml:"stage,omitempty"`
	Note  string `yaml:"note,omitempty"`
	pos   Pos
}

// UnmarshalYAML records the position of each element for error messages.
func (r *rawFeed) UnmarshalYAML(n *yaml.Node) error {
	type plain rawFeed
	r.pos = Pos{n.Line, n.Column}
	return n.Decode((*plain)(r))
}

// UnmarshalYAML records the position of each element for error messages.
func (r *rawChange) UnmarshalYAML(n *yaml.Node) error {
	type plain rawChange
	r.pos = Pos{n.Line, n.Column}
	return n.Decode((*plain)(r))
}

// UnmarshalYAML records the position of each element for error messages.
func (r *rawZone) UnmarshalYAML(n *yaml.Node) error {
	type plain rawZone
	r.pos = Pos{n.Line, n.Column}
	return n.Decode((*plain)(r))
}

// UnmarshalYAML records the position of each element for error messages.
func (r *rawRow) UnmarshalYAML(n *yaml.Node) error {
	type plain rawRow
	r.pos = Pos{n.Line, n.Column}
	return n.Decode((*plain)(r))
}

// UnmarshalYAML records the position of each element for error messages.
func (r *rawEvent) UnmarshalYAML(n *yaml.Node) error {
	type plain rawEvent
	r.pos = Pos{n.Line, n.Column}
	return n.Decode((*plain)(r))
}

// MarshalYAML prints a row on one line: {day: 4, start: "18:00", ...}.
func (r rawRow) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	add := func(k, v string, tag string) {
		n.Content = append(n.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: k},
			&yaml.Node{Kind: yaml.ScalarNode, Value: v, Tag: tag})
	}
	if r.Day != 0 {
		add("day", strconv.Itoa(r.Day), "!!int")
	}
	if r.Date != "" {
		add("date", r.Date, "!!str")
	}
	add("start", r.Start, "!!str")
	add("end", r.End, "!!str")
	if r.Stage != 0 {
		add("stage", strconv.Itoa(r.Stage), "!!int")
	}
	return n, nil
}

// Load reads and parses a schedule file.
func Load(path string) (*Schedule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load schedule: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		var pe *ProblemError
		if errors.As(err, &pe) {
			pe.File = path
			return nil, pe
		}
		return nil, fmt.Errorf("load schedule %s: %w", path, err)
	}
	return s, nil
}

// Parse reads a bedwe-schedule/1 document. On errors it returns a
// *ProblemError listing every problem with its line:col (warnings too); a
// schedule with warnings only is returned without error (see Validate).
func Parse(data []byte) (*Schedule, error) {
	if len(data) > MaxFileSize {
		return nil, &ProblemError{Problems: []Problem{{Severity: Error, Msg: fmt.Sprintf("file is %d bytes, more than the %d allowed", len(data), MaxFileSize)}}}
	}
	var raw rawDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ProblemError{Problems: []Problem{{Severity: Error, Msg: "empty file: want a bedwe-schedule/1 document"}}}
		}
		return nil, &ProblemError{Problems: yamlProblems(err)}
	}
	s, ps := fromRaw(&raw)
	ps = append(ps, s.Validate()...)
	if HasErrors(ps) {
		return nil, &ProblemError{Problems: ps}
	}
	return s, nil
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlProblems turns a yaml.v3 error into problems with their line.
func yamlProblems(err error) []Problem {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	out := make([]Problem, 0, len(msgs))
	for _, m := range msgs {
		p := Problem{Severity: Error, Msg: m}
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			line, _ := strconv.Atoi(g[1])
			p.Pos, p.Msg = Pos{Line: line, Col: 1}, g[2]
		}
		out = append(out, p)
	}
	return out
}

// fromRaw converts the text document into a Schedule, reporting bad values.
func fromRaw(raw *rawDoc) (*Schedule, []Problem) {
	var ps problems
	s := &Schedule{Format: raw.Format, TimeZone: raw.TimeZone, Note: raw.Note}
	loc, err := time.LoadLocation(raw.TimeZone)
	if err != nil || raw.TimeZone == "" {
		loc = time.UTC // Validate reports the zone
	}
	instant := func(pos Pos, what, v string, required bool) time.Time {
		if v == "" {
			if required {
				ps.errorf(pos, "%s is missing", what)
			}
			return time.Time{}
		}
		t, err := ParseInstant(v, loc)
		if err != nil {
			ps.errorf(pos, "%s: %v", what, err)
		}
		return t.In(loc)
	}
	top := Pos{Line: 1, Col: 1}
	s.IssuedAt = instant(top, "issued_at", raw.IssuedAt, true)
	s.KnownUntil = instant(top, "known_until", raw.KnownUntil, true)
	for _, rf := range raw.Feeds {
		f := Feed{Name: rf.Name, pos: rf.pos}
		f.KnownUntil = instant(rf.pos, "feed "+rf.Name+": known_until", rf.KnownUntil, false)
		for _, rc := range rf.Changes {
			f.Changes = append(f.Changes, Change{
				Stage:   rc.Stage,
				Start:   instant(rc.pos, "stage change start", rc.Start, true),
				End:     instant(rc.pos, "stage change end", rc.End, true),
				Source:  rc.Source,
				Exclude: rc.Exclude,
				Include: rc.Include,
				pos:     rc.pos,
			})
		}
		s.Feeds = append(s.Feeds, f)
	}
	for _, rz := range raw.Zones {
		z := Zone{Name: rz.Name, Feed: rz.Feed, Source: rz.Source, pos: rz.pos}
		t := &z.Table
		t.Kind, t.Fold, t.Period, t.Cumulative = TableKind(rz.Table.Kind), rz.Table.Fold, rz.Table.Period, rz.Table.Cumulative
		if rz.Table.Anchor != "" {
			a, err := ParseDate(rz.Table.Anchor)
			if err != nil {
				ps.errorf(rz.pos, "zone %s: anchor: %v", rz.Name, err)
			}
			t.Anchor = a
		}
		for _, rr := range rz.Table.Rows {
			r := Row{Day: rr.Day, Stage: rr.Stage, pos: rr.pos}
			var err error
			if r.Start, err = ParseClock(rr.Start); err != nil {
				ps.errorf(rr.pos, "zone %s: start: %v", rz.Name, err)
				continue
			}
			if r.End, err = ParseClock(rr.End); err != nil {
				ps.errorf(rr.pos, "zone %s: end: %v", rz.Name, err)
				continue
			}
			if rr.Date != "" {
				if r.Date, err = ParseDate(rr.Date); err != nil {
					ps.errorf(rr.pos, "zone %s: %v", rz.Name, err)
					continue
				}
			}
			t.Rows = append(t.Rows, r)
		}
		s.Zones = append(s.Zones, z)
	}
	for _, re := range raw.Events {
		s.Events = append(s.Events, Event{
			Zone:  re.Zone,
			Kind:  EventKind(re.Kind),
			Start: instant(re.pos, "event start", re.Start, true),
			End:   instant(re.pos, "event end", re.End, true),
			Stage: re.Stage,
			Note:  re.Note,
			pos:   re.pos,
		})
	}
	return s, ps
}

// Marshal prints the schedule in the bedwe-schedule/1 format. The output is
// deterministic (same schedule, same bytes), so it can be signed; instants
// are printed with their offset in the schedule's zone.
func (s *Schedule) Marshal() ([]byte, error) {
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("marshal schedule: time zone %q: %w", s.TimeZone, err)
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.In(loc).Format(time.RFC3339)
	}
	format := s.Format
	if format == "" {
		format = FormatV1
	}
	raw := rawDoc{Format: format, TimeZone: s.TimeZone, IssuedAt: ts(s.IssuedAt), KnownUntil: ts(s.KnownUntil), Note: s.Note}
	for _, f := range s.Feeds {
		rf := rawFeed{Name: f.Name, KnownUntil: ts(f.KnownUntil), Changes: []rawChange{}}
		for _, c := range f.Changes {
			rf.Changes = append(rf.Changes, rawChange{Stage: c.Stage, Start: ts(c.Start), End: ts(c.End), Source: c.Source, Exclude: c.Exclude, Include: c.Include})
		}
		raw.Feeds = append(raw.Feeds, rf)
	}
	raw.Zones = []rawZone{}
	for _, z := range s.Zones {
		t := z.Table
		rt := rawTable{Kind: string(t.Kind), Fold: t.Fold, Period: t.Period, Cumulative: t.Cumulative, Rows: []rawRow{}}
		if !t.Anchor.IsZero() {
			rt.Anchor = t.Anchor.String()
		}
		for _, r := range t.Rows {
			rr := rawRow{Day: r.Day, Start: r.Start.String(), End: r.End.String(), Stage: r.Stage}
			if !r.Date.IsZero() {
				rr.Date = r.Date.String()
			}
			rt.Rows = append(rt.Rows, rr)
		}
		raw.Zones = append(raw.Zones, rawZone{Name: z.Name, Feed: z.Feed, Source: z.Source, Table: rt})
	}
	for _, e := range s.Events {
		raw.Events = append(raw.Events, rawEvent{Zone: e.Zone, Kind: string(e.Kind), Start: ts(e.Start), End: ts(e.End), Stage: e.Stage, Note: e.Note})
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&raw); err != nil {
		return nil, fmt.Errorf("marshal schedule: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("marshal schedule: %w", err)
	}
	return buf.Bytes(), nil
}
