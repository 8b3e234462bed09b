package bench

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

const testdataDir = "../../testdata/wfcommons"

func TestPathOf(t *testing.T) {
	w, err := grammar.Parse("t", []byte(`a[expect=1s] FORK(b[expect=2s] c[expect=1s], d[expect=2500ms]) SYNC e[expect=10ms]`))
	if err != nil {
		t.Fatal(err)
	}
	d, hops := pathOf(w)
	if d != 4010*time.Millisecond || hops != 4 {
		t.Errorf("pathOf = %v, %d services; want 4.01s over 4 services", d, hops)
	}
}

func TestConvertInstance(t *testing.T) {
	files := WfcommonsFiles(testdataDir, filepath.Join(t.TempDir(), "missing"))
	if len(files) < 4 {
		t.Fatalf("found %d instances in %s, want the 4 committed ones", len(files), testdataDir)
	}
	for _, f := range files {
		src, input, row, err := ConvertInstance(f, 0.01)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		w, err := grammar.Parse(row.Instance, []byte(src))
		if err != nil {
			t.Fatalf("%s: converted source does not parse: %v", row.Instance, err)
		}
		services, _, _ := grammar.Stats(w)
		if services != row.Tasks || row.Tasks == 0 {
			t.Errorf("%s: %d services for %d tasks", row.Instance, services, row.Tasks)
		}
		var in struct {
			SleepMS map[string]int64 `json:"sleep_ms"`
		}
		if err := json.Unmarshal(input, &in); err != nil || len(in.SleepMS) != row.Tasks {
			t.Errorf("%s: input has %d sleeps (%v), want one per task", row.Instance, len(in.SleepMS), err)
		}
		for name := range in.SleepMS {
			if !strings.HasPrefix(name, WfPrefix) {
				t.Errorf("%s: service %s lacks the %s prefix the bench services file sleeps for", row.Instance, name, WfPrefix)
				break
			}
		}
		// The bound is at least the scaled original critical path (rounding
		// up to 1 ms per task can only lengthen it) and the path visits at
		// least one service.
		scaled := time.Duration(float64(row.CriticalPath) * 0.01)
		if row.Bound < scaled-time.Duration(row.PathServices)*time.Millisecond || row.PathServices < 1 {
			t.Errorf("%s: bound %v over %d services, scaled critical path %v", row.Instance, row.Bound, row.PathServices, scaled)
		}
	}
}
