// Package schedule owns bedwe's load-shedding timetables: the versioned file
// format (bedwe-schedule/1, see docs/schedule-format.md), its parser, printer
// and validator, and the queries the rest of bedwe asks of a timetable: is
// zone Z powered at instant t, when is the next cut, until when is it powered.
//
// A Schedule is a set of zones. Each zone has a recurring slot table (rows of
// day, start, end, stage, by day of month, day of week, n-day cycle, a daily
// cycle or explicit dates) and names the stage feed whose timeline says which
// stage is in force when. One-off events add explicit outages or explicit
// "powered" overrides. Beyond known_until, beyond a feed's last announced
// stage, and wherever a feed excludes the zone, the answer is Unknown:
// unknown is never treated as powered.
//
// Queries are pure functions of the instants they are given; callers that
// need "now" inject a clock. The package embeds time/tzdata so boards without
// a zoneinfo database still resolve the schedule's IANA time zone.
//
// The package never touches the network, the node, heartbeats or files other
// than the one handed to Load; publishing and signing schedules belong to the
// node. Sub-package importers reads the real-world shapes (eskom-calendar
// CSVs and stage timelines, per-area API JSON, daily feeder cycles).
package schedule

import _ "time/tzdata" // boards without zoneinfo must still resolve the schedule's zone
