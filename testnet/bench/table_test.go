package bench

import (
	"bytes"
	"encoding/csv"
	"reflect"
	"testing"
	"time"
)

func TestTableCSV(t *testing.T) {
	ps := []Point{
		{Experiment: "sequential", Mode: "noop", X: 5, Services: 5, CriticalPath: 5,
			Runs: []time.Duration{120 * time.Millisecond, 100 * time.Millisecond, 110500 * time.Microsecond}},
		{Experiment: "sequential", Mode: "sleep100ms", X: 5, Services: 5, CriticalPath: 5, Floor: 500 * time.Millisecond,
			Runs: []time.Duration{600 * time.Millisecond}},
	}
	for i := range ps {
		ps[i].Summary = Summarize(ps[i].Runs)
	}
	var buf bytes.Buffer
	if err := PointTable("sequential", ps).WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not read back: %v", err)
	}
	want := [][]string{
		{"experiment", "mode", "x", "services", "critical_path", "repeats", "median_ms", "min_ms", "max_ms", "floor_ms", "per_hop_ms", "runs_ms"},
		{"sequential", "noop", "5", "5", "5", "3", "110.5", "100", "120", "0", "22.1", "120 100 110.5"},
		{"sequential", "sleep100ms", "5", "5", "5", "1", "600", "600", "600", "500", "20", "600"},
	}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("CSV:\n got %q\nwant %q", recs, want)
	}
}

func TestTableRowWidth(t *testing.T) {
	tb := Table{Name: "x", Header: []string{"a", "b"}, Rows: [][]any{{1, 2}, {3}}}
	if err := tb.WriteCSV(&bytes.Buffer{}); err == nil {
		t.Error("a short row must be an error, not a shifted CSV")
	}
}

func TestTableMaps(t *testing.T) {
	tb := Table{Name: "x", Header: []string{"a", "b"}, Rows: [][]any{{1, "s"}}}
	got := tb.Maps()
	if len(got) != 1 || got[0]["a"] != 1 || got[0]["b"] != "s" {
		t.Errorf("Maps() = %v", got)
	}
}

// TestTablesFilled checks every table's rows are as wide as its header, so
// no CSV has a missing column.
func TestTablesFilled(t *testing.T) {
	res := sampleResults()
	tables := res.Tables()
	if len(tables) != 7 {
		t.Errorf("%d tables, want 7 (one per experiment and packsize)", len(tables))
	}
	for _, tb := range tables {
		for i, r := range tb.Rows {
			if len(r) != len(tb.Header) {
				t.Errorf("%s row %d: %d cells, header %d", tb.Name, i, len(r), len(tb.Header))
			}
		}
	}
}
