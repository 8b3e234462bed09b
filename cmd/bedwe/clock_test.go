package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClockDoubt: a clock before the build or before the timetable's
// issued_at is doubted (a board without a real-time clock after boot).
func TestClockDoubt(t *testing.T) {
	built := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	issued := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		now, issued time.Time
		want        string
	}{
		{time.Unix(0, 0), time.Time{}, "the clock reads 1970-01-01T00:00:00Z, before this binary was built (2026-11-20T00:00:00Z)"},
		{time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), issued, "the clock reads 2026-11-21T00:00:00Z, before the timetable's issued_at 2026-11-22T00:00:00Z"},
		{time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), time.Time{}, ""},
		{time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), issued, ""},
	}
	for _, tt := range tests {
		if got := clockDoubt(tt.now, built, tt.issued); got != tt.want {
			t.Errorf("clockDoubt(%s, issued %s) = %q, want %q", tt.now, tt.issued, got, tt.want)
		}
	}
	if b := buildTime(); b.Before(earliestPlausibleClock) {
		t.Errorf("buildTime() = %s, before %s", b, earliestPlausibleClock)
	}
}

// TestWarnImplausibleClockReadsTheSchedule: the node's --schedule file
// gives the issued_at the clock is compared with.
func TestWarnImplausibleClockReadsTheSchedule(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tt.yaml")
	if err := os.WriteFile(file, []byte(scheduleIssuedAt(t, "2098-06-01T00:00:00+02:00")), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	warnImplausibleClock(log, time.Now(), t.TempDir(), "")
	if logs.Len() != 0 {
		t.Fatalf("warning with a right clock: %s", logs.String())
	}
	warnImplausibleClock(log, time.Now(), t.TempDir(), file)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "before the timetable's issued_at 2098-05-31T22:00:00Z") {
		t.Errorf("log %q", logs.String())
	}
}
