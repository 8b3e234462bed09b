package importers

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/bedwe/bedwe/schedule"
)

// Feeder reads daily feeder-cycle lines (the Karachi shape):
//
//	AREA|FEEDER|GROUP|CATEGORY|0805~1035|1305~1605|1905~2135|2305~0105|-|-
//
// Each line becomes one zone named after the feeder (trimmed), with a daily
// table that follows no stage feed: its windows repeat every day up to
// KnownUntil. "-" means no window; windows may cross midnight. If
// Options.Zone is set, only the feeder (or area) of that name is imported.
// Bad lines and windows are reported and skipped.
func Feeder(r io.Reader, o Options) (*schedule.Schedule, []schedule.Problem, error) {
	data, err := readAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("import feeder: %w", err)
	}
	_, tz, err := o.loc("Asia/Karachi")
	if err != nil {
		return nil, nil, fmt.Errorf("import feeder: %w", err)
	}
	s := &schedule.Schedule{Format: schedule.FormatV1, TimeZone: tz}
	var ps []schedule.Problem
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxInput)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Split(text, "|")
		if len(f) < 5 {
			ps = append(ps, warn(line, "line skipped: want AREA|FEEDER|GROUP|CATEGORY|HHMM~HHMM..."))
			continue
		}
		area, name := strings.TrimSpace(f[0]), strings.TrimSpace(f[1])
		if name == "" {
			ps = append(ps, warn(line, "line skipped: no feeder name"))
			continue
		}
		if o.Zone != "" && o.Zone != name && o.Zone != area {
			continue
		}
		if seen[name] {
			ps = append(ps, warn(line, "feeder %q listed again: line skipped", name))
			continue
		}
		seen[name] = true
		z := schedule.Zone{Name: name, Source: o.Source, Table: schedule.SlotTable{Kind: schedule.Daily}}
		for _, w := range f[4:] {
			w = strings.TrimSpace(w)
			if w == "-" || w == "" {
				continue
			}
			a, b, ok := strings.Cut(w, "~")
			start, err1 := schedule.ParseClock(a)
			end, err2 := schedule.ParseClock(b)
			if err := firstErr(err1, err2); !ok || err != nil {
				ps = append(ps, warn(line, "feeder %s: window %q skipped: want HHMM~HHMM", name, w))
				continue
			}
			z.Table.Rows = append(z.Table.Rows, schedule.Row{Start: start, End: end})
		}
		s.Zones = append(s.Zones, z)
	}
	if err := sc.Err(); err != nil {
		return nil, ps, fmt.Errorf("import feeder: %w", err)
	}
	o.stamp(s, s.IssuedAt)
	return s, ps, nil
}
