package importers

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// stageValue accepts a stage written as a number or as a string ("2").
type stageValue int

// UnmarshalJSON reads 2 or "2".
func (v *stageValue) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("stage %s is not a number", b)
	}
	*v = stageValue(n)
	return nil
}

type areaDoc struct {
	Events []struct {
		Start string `json:"start"`
		End   string `json:"end"`
		Note  string `json:"note"`
	} `json:"events"`
	Info struct {
		Name   string `json:"name"`
		Region string `json:"region"`
	} `json:"info"`
	Schedule struct {
		Days []struct {
			Date   string     `json:"date"`
			Name   string     `json:"name"`
			Stages [][]string `json:"stages"`
		} `json:"days"`
		Source string `json:"source"`
	} `json:"schedule"`
	Status map[string]struct {
		Name       string     `json:"name"`
		Stage      stageValue `json:"stage"`
		NextStages []struct {
			Stage stageValue `json:"stage"`
			Start string     `json:"stage_start_timestamp"`
		} `json:"next_stages"`
	} `json:"status"`
}

var stageNote = regexp.MustCompile(`(?i)stage\s*(\d+)`)

// AreaJSON reads a per-area API answer (the EskomSePush shape). An "area"
// answer becomes one zone with a dates table (schedule.days[].stages[i] are
// the windows of stage i+1, already cumulative; areas that list fewer stages
// behave at higher stages like the last one listed; days not listed are
// Unknown) plus its events as explicit outages. A "status" answer becomes one
// feed per key: the current stage from IssuedAt, each next stage until the
// next starts, the last until KnownUntil (default: its start + 24 h). A
// document holding both yields both.
func AreaJSON(r io.Reader, o Options) (*schedule.Schedule, []schedule.Problem, error) {
	data, err := readAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("import area json: %w", err)
	}
	loc, tz, err := o.loc("Africa/Johannesburg")
	if err != nil {
		return nil, nil, fmt.Errorf("import area json: %w", err)
	}
	var doc areaDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("import area json: %w", err)
	}
	var ps []schedule.Problem
	s := &schedule.Schedule{Format: schedule.FormatV1, TimeZone: tz}
	var latest time.Time
	isArea := len(doc.Schedule.Days) > 0 || len(doc.Events) > 0 || doc.Info.Name != ""
	if isArea {
		name := o.Zone
		if name == "" {
			name = strings.TrimSpace(doc.Info.Name)
		}
		if name == "" {
			name = "area"
		}
		src := o.Source
		if src == "" {
			src = doc.Schedule.Source
		}
		z := schedule.Zone{Name: name, Feed: o.feed(), Source: src, Table: schedule.SlotTable{Kind: schedule.Dates, Cumulative: true}}
		for _, d := range doc.Schedule.Days {
			date, err := schedule.ParseDate(d.Date)
			if err != nil {
				ps = append(ps, warn(0, "day %q skipped: %v", d.Date, err))
				continue
			}
			for i, windows := range d.Stages {
				for _, w := range windows {
					a, b, ok := strings.Cut(w, "-")
					start, err1 := schedule.ParseClock(a)
					end, err2 := schedule.ParseClock(b)
					if err := firstErr(err1, err2); !ok || err != nil {
						ps = append(ps, warn(0, "%s stage %d: window %q skipped: want HH:MM-HH:MM", d.Date, i+1, w))
						continue
					}
					z.Table.Rows = append(z.Table.Rows, schedule.Row{Date: date, Start: start, End: end, Stage: i + 1})
				}
			}
			if end := time.Date(date.Year, date.Month, date.Day+1, 0, 0, 0, 0, loc); end.After(latest) {
				latest = end
			}
		}
		s.Zones = append(s.Zones, z)
		s.Feeds = append(s.Feeds, schedule.Feed{Name: o.feed()})
		for _, e := range doc.Events {
			start, err1 := schedule.ParseInstant(e.Start, loc)
			end, err2 := schedule.ParseInstant(e.End, loc)
			if err := firstErr(err1, err2); err != nil || !end.After(start) {
				ps = append(ps, warn(0, "event %s-%s skipped: bad or empty interval", e.Start, e.End))
				continue
			}
			ev := schedule.Event{Zone: name, Kind: schedule.EventOutage, Start: start.In(loc), End: end.In(loc), Note: e.Note}
			if m := stageNote.FindStringSubmatch(e.Note); m != nil {
				ev.Stage, _ = strconv.Atoi(m[1])
			}
			s.Events = append(s.Events, ev)
			latest = maxT(latest, ev.End)
		}
	}
	keys := make([]string, 0, len(doc.Status))
	for k := range doc.Status {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		st := doc.Status[k]
		f := schedule.Feed{Name: k}
		if len(keys) == 1 && o.Feed != "" {
			f.Name = o.Feed
		}
		from, stage := o.IssuedAt.In(loc), int(st.Stage)
		if o.IssuedAt.IsZero() {
			ps = append(ps, warn(0, "status %s: no issued-at given: the current stage %d is not placed in time", k, stage))
			from = time.Time{}
		}
		for _, n := range st.NextStages {
			t, err := schedule.ParseInstant(n.Start, loc)
			if err != nil {
				ps = append(ps, warn(0, "status %s: next stage skipped: %v", k, err))
				continue
			}
			if !from.IsZero() && t.After(from) {
				f.Changes = append(f.Changes, schedule.Change{Stage: stage, Start: from, End: t.In(loc)})
			}
			from, stage = t.In(loc), int(n.Stage)
		}
		end := o.KnownUntil
		if end.IsZero() && !from.IsZero() {
			end = from.Add(24 * time.Hour)
		}
		if !from.IsZero() && end.After(from) {
			f.Changes = append(f.Changes, schedule.Change{Stage: stage, Start: from, End: end.In(loc)})
			latest = maxT(latest, end.In(loc))
		}
		s.Feeds = append(s.Feeds, f)
	}
	if !isArea && len(doc.Status) == 0 {
		return nil, ps, fmt.Errorf("import area json: neither an area answer (events, info, schedule) nor a status answer")
	}
	o.stamp(s, latest)
	return s, ps, nil
}

func maxT(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
