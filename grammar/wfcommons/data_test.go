package wfcommons

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testdataDir holds the copies of WfCommons instances the tests use (a
// fresh clone has no shared data directory).
const testdataDir = "../../testdata/wfcommons"

// sharedDir holds all six instances on the development machine; tests that
// use it skip when it is absent.
const sharedDir = "/work/shared/data/wfcommons"

// instances are the six files of the data set with the figures its README
// gives (tasks, edges, critical path in seconds to 0.1, series-parallel).
var instances = []struct {
	file   string
	copied bool // present in testdataDir
	tasks  int
	edges  int
	cp     float64
	sp     bool
}{
	{"blast-chameleon-small-001.json", true, 43, 120, 10.4, true},
	{"1000genome-chameleon-4ch-100k-001.json", true, 104, 152, 329.7, true},
	{"montage-chameleon-2mass-01d-001.json", true, 103, 231, 21.1, false},
	{"cycles-chameleon-1l-1c-9p-001.json", true, 67, 97, 163.4, false},
	{"epigenomics-chameleon-ilmn-1seq-100k-001.json", false, 125, 153, 143.4, true},
	{"seismology-chameleon-100p-001.json", false, 101, 100, 2.8, true},
}

func loadFile(t testing.TB, path string) *Instance {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inst, err := Load(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return inst
}

// checkInstance converts one real instance and checks it against the data
// set's figures: exact for series-parallel ones, no lost dependency, the
// critical path within the README's bound of about 11 %, and never worse
// than the level-by-level conversion.
func checkInstance(t *testing.T, path string, want struct {
	file   string
	copied bool
	tasks  int
	edges  int
	cp     float64
	sp     bool
}) {
	inst := loadFile(t, path)
	start := time.Now()
	res, err := Convert(inst, Options{Scale: 0.01})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tasks != want.tasks || res.Edges != want.edges || res.SeriesParallel != want.sp {
		t.Errorf("tasks, edges, SP = %d, %d, %v, want %d, %d, %v", res.Tasks, res.Edges, res.SeriesParallel, want.tasks, want.edges, want.sp)
	}
	if got := res.CriticalPath.Seconds(); got < want.cp-0.05 || got > want.cp+0.05 {
		t.Errorf("critical path %.3fs, want %.1fs", got, want.cp)
	}
	if g := res.Growth(); g > 0.11 {
		t.Errorf("critical path grew by %.1f %%, more than 11 %%", 100*g)
	}
	checkRelation(t, inst, res)
	parseBack(t, res.Workflow)
	lv := levelBaseline(t, inst)
	if res.AddedPairs > lv.pairs || res.ConvertedCriticalPath > lv.cp {
		t.Errorf("worse than level-by-level: %d pairs, path %v; levels: %d pairs, path %v", res.AddedPairs, res.ConvertedCriticalPath, lv.pairs, lv.cp)
	}
	t.Logf("| %s | %d | %d | %v | %d | %d | %.3f | %.3f | %+.1f %% | %v | levels: %d edges, %+.1f %% |",
		want.file, res.Tasks, res.Edges, res.SeriesParallel, res.AddedEdges, res.AddedPairs,
		res.CriticalPath.Seconds(), res.ConvertedCriticalPath.Seconds(), 100*res.Growth(), took.Round(time.Microsecond),
		lv.edges, 100*float64(lv.cp-res.CriticalPath)/float64(res.CriticalPath))
}

func TestTestdataInstances(t *testing.T) {
	for _, want := range instances {
		if !want.copied {
			continue
		}
		t.Run(want.file, func(t *testing.T) {
			checkInstance(t, filepath.Join(testdataDir, want.file), want)
		})
	}
}

// TestSharedInstances covers all six files of the data set (including the
// two not copied into testdata) when the shared directory is present. Run
// with -v for the report table: file | tasks | edges | SP | added edges |
// added pairs | critical path before | after (s) | growth | conversion time.
func TestSharedInstances(t *testing.T) {
	if _, err := os.Stat(sharedDir); err != nil {
		t.Skipf("shared data not present: %v", err)
	}
	for _, want := range instances {
		t.Run(want.file, func(t *testing.T) {
			checkInstance(t, filepath.Join(sharedDir, want.file), want)
		})
	}
}

// levels is the level-by-level conversion: every ASAP level of the DAG one
// FORK, in order. It is the simple baseline the heuristic must beat.
type levels struct {
	edges, pairs int
	cp           time.Duration
}

func levelBaseline(t testing.TB, inst *Instance) levels {
	t.Helper()
	order, err := inst.analyse()
	if err != nil {
		t.Fatal(err)
	}
	g := newDAG(inst, order)
	lvl := make([]int, g.n)
	top := 0
	for p := range g.n {
		for _, q := range g.pred[p] {
			lvl[p] = max(lvl[p], lvl[q]+1)
		}
		top = max(top, lvl[p])
	}
	byLevel := make([][]int, top+1)
	for p := range g.n {
		byLevel[lvl[p]] = append(byLevel[lvl[p]], p)
	}
	var out levels
	for i, l := range byLevel {
		var longest time.Duration
		for _, p := range l {
			longest = max(longest, g.rt[p])
		}
		out.cp += longest
		for j, later := range byLevel[i+1:] {
			for _, u := range l {
				for _, v := range later {
					if !has(g.desc.row(u), v) {
						out.pairs++
						if j == 0 {
							out.edges++
						}
					}
				}
			}
		}
	}
	return out
}
