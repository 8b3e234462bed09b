package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// earliestPlausibleClock stands for the build time of a binary that carries
// no VCS time: no bedwe binary was built before it.
var earliestPlausibleClock = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// buildTime is the commit time stamped into the binary (vcs.time), else
// earliestPlausibleClock.
func buildTime() time.Time {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.time" {
				if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
					return t
				}
			}
		}
	}
	return earliestPlausibleClock
}

// clockDoubt says why the wall clock reading now cannot be right, or "":
// it reads before the binary was built, or before the issued_at of a
// timetable the node holds (zero: none). A board without a real-time clock
// boots at a fixed past date until NTP (or fake-hwclock) sets it.
func clockDoubt(now, built, issued time.Time) string {
	switch {
	case now.Before(built):
		return fmt.Sprintf("the clock reads %s, before this binary was built (%s)", now.UTC().Format(time.RFC3339), built.UTC().Format(time.RFC3339))
	case !issued.IsZero() && now.Before(issued):
		return fmt.Sprintf("the clock reads %s, before the timetable's issued_at %s", now.UTC().Format(time.RFC3339), issued.UTC().Format(time.RFC3339))
	}
	return ""
}

// timetableIssuedAt is the newest issued_at among the timetables a node
// with data directory dir and --schedule file would start with (zero:
// none, or unreadable: the node reports those itself).
func timetableIssuedAt(dir, file string) time.Time {
	var newest time.Time
	if file != "" {
		if s, err := schedule.Load(file); err == nil && s.IssuedAt.After(newest) {
			newest = s.IssuedAt
		}
	}
	// The copy the node stored after verifying it; read here only for its
	// date, the node verifies it again.
	if raw, err := os.ReadFile(filepath.Join(dir, "schedule.signed.json")); err == nil {
		if sg, err := schedule.UnmarshalSigned(raw); err == nil {
			if s, err := schedule.Parse(sg.Schedule); err == nil && s.IssuedAt.After(newest) {
				newest = s.IssuedAt
			}
		}
	}
	return newest
}

// warnImplausibleClock logs a warning when the wall clock cannot be right.
// The node runs anyway: heartbeats and hand-offs use the monotonic clock,
// but timetable routing treats a clock before issued_at as no timetable,
// and libp2p's TLS handshake refuses peers whose certificates are not yet
// valid by this clock (docs/operations.md, "Boards without a real-time clock").
func warnImplausibleClock(log *slog.Logger, now time.Time, dir, scheduleFile string) {
	if doubt := clockDoubt(now, buildTime(), timetableIssuedAt(dir, scheduleFile)); doubt != "" {
		log.Warn(doubt + ": set the clock (NTP, an RTC, fake-hwclock) before starting the node; until then timetable routing is off and peers with a correct clock may refuse the TLS handshake")
	}
}
