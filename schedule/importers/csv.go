package importers

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bedwe/bedwe/schedule"
)

// CSV reads one area's eskom-calendar slot table. The three header variants
// are accepted, with cells trimmed and the misspelled finsh_time:
//
//	date_of_month,start_time,finsh_time,stage
//	day_of_week,start_time,finsh_time,stage             (1 = Monday)
//	day_of_cycle ,period_of_cycle ,start_of_cycle ,start_time ,finsh_time ,stage
//
// Rows are already cumulative per stage. The zone follows Options.Feed; a
// placeholder feed without changes is added so the fragment validates
// (merge a stage timeline to make it answer). Bad rows are reported with
// their line and skipped.
func CSV(r io.Reader, o Options) (*schedule.Schedule, []schedule.Problem, error) {
	data, err := readAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("import csv: %w", err)
	}
	_, tz, err := o.loc("Africa/Johannesburg")
	if err != nil {
		return nil, nil, fmt.Errorf("import csv: %w", err)
	}
	// Drop trailing "# comments" (not part of the real shape, but handy in
	// hand-written files); no real cell contains '#'.
	var clean bytes.Buffer
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimRight(line[:i], " \t") + "\n"
		}
		clean.WriteString(line)
	}
	cr := csv.NewReader(&clean)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = false
	header, err := cr.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("import csv: no header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	table := schedule.SlotTable{Cumulative: true}
	dayCol := -1
	for _, v := range []struct {
		name string
		kind schedule.TableKind
	}{{"date_of_month", schedule.DayOfMonth}, {"day_of_week", schedule.DayOfWeek}, {"day_of_cycle", schedule.Cycle}} {
		if i, ok := col[v.name]; ok {
			dayCol, table.Kind = i, v.kind
			break
		}
	}
	endCol, okEnd := col["finsh_time"]
	if !okEnd {
		endCol, okEnd = col["finish_time"]
	}
	if !okEnd {
		endCol, okEnd = col["end_time"]
	}
	startCol, okStart := col["start_time"]
	stageCol, okStage := col["stage"]
	if dayCol < 0 || !okStart || !okEnd || !okStage {
		return nil, nil, fmt.Errorf("import csv: header %q: want date_of_month|day_of_week|day_of_cycle, start_time, finsh_time, stage", strings.Join(header, ","))
	}
	periodCol, hasPeriod := col["period_of_cycle"]
	anchorCol, hasAnchor := col["start_of_cycle"]
	if table.Kind == schedule.Cycle && (!hasPeriod || !hasAnchor) {
		return nil, nil, fmt.Errorf("import csv: a day_of_cycle table needs period_of_cycle and start_of_cycle columns")
	}
	var ps []schedule.Problem
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				ps = append(ps, warn(pe.Line, "row skipped: %v", pe.Err))
				continue
			}
			ps = append(ps, warn(0, "rest of the file skipped: %v", err))
			break
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		cell := func(i int) string {
			if i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		day, err1 := atoi("day", cell(dayCol))
		stage, err2 := atoi("stage", cell(stageCol))
		start, err3 := schedule.ParseClock(cell(startCol))
		end, err4 := schedule.ParseClock(cell(endCol))
		if err := firstErr(err1, err2, err3, err4); err != nil {
			ps = append(ps, warn(line, "row %q skipped: %v", strings.Join(rec, ","), err))
			continue
		}
		if table.Kind == schedule.Cycle {
			period, err := atoi("period_of_cycle", cell(periodCol))
			anchor, err2 := schedule.ParseDate(cell(anchorCol))
			if err = firstErr(err, err2); err != nil {
				ps = append(ps, warn(line, "row %q skipped: cycle: %v", strings.Join(rec, ","), err))
				continue
			}
			if table.Period == 0 {
				table.Period, table.Anchor = period, anchor
			} else if table.Period != period || table.Anchor != anchor {
				ps = append(ps, warn(line, "row skipped: cycle %d from %s differs from the first row's %d from %s", period, anchor, table.Period, table.Anchor))
				continue
			}
		}
		table.Rows = append(table.Rows, schedule.Row{Day: day, Start: start, End: end, Stage: stage})
	}
	s := &schedule.Schedule{
		Format:   schedule.FormatV1,
		TimeZone: tz,
		Zones:    []schedule.Zone{{Name: o.Zone, Feed: o.feed(), Source: o.Source, Table: table}},
		Feeds:    []schedule.Feed{{Name: o.feed()}},
	}
	if s.Zones[0].Name == "" {
		s.Zones[0].Name = "area"
	}
	o.stamp(s, s.IssuedAt)
	return s, ps, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func atoi(what, v string) (int, error) {
	if v == "" {
		return 0, fmt.Errorf("%s is missing", what)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a number", what, v)
	}
	return n, nil
}
