package schedule

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParse checks that no input makes Parse, Validate, Marshal or the
// queries panic, and that whatever parses survives a Marshal round trip.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../examples/schedules/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(daily("Europe/Berlin", `{start: "22:00", end: "00:30"}`)))
	f.Add([]byte(stageTable(`      - {stage: 2, start: "2024-05-01T00:00", end: "2024-05-01T21:00"}` + "\n")))
	f.Add([]byte("format: bedwe-schedule/1\nzones: [{name: z, table: {kind: cycle, period: 3, anchor: 2024-01-01, rows: [{day: 9}]}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		_ = s.Validate()
		out, err := s.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed schedule: %v", err)
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("reparse of Marshal output: %v\n%s", err, out)
		}
		at := s.IssuedAt
		for _, z := range s.Zones {
			_, _ = s.StateAt(z.Name, at)
			_ = s.Windows(z.Name, at, at.Add(72*time.Hour))
			_, _ = s.NextCut(z.Name, at)
			_, _ = s.NextRestore(z.Name, at)
			_, _ = s.PoweredUntil(z.Name, at)
		}
	})
}
