package wfcommons

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

// BenchmarkConvert converts the instances: the largest copied file (cycles,
// 317 kB), the largest of the data set by task count (epigenomics, when the
// shared data is present), and synthetic random DAGs to show how the cost
// grows.
func BenchmarkConvert(b *testing.B) {
	files := []string{filepath.Join(testdataDir, "cycles-chameleon-1l-1c-9p-001.json"), filepath.Join(testdataDir, "montage-chameleon-2mass-01d-001.json")}
	if _, err := os.Stat(sharedDir); err == nil {
		files = append(files, filepath.Join(sharedDir, "epigenomics-chameleon-ilmn-1seq-100k-001.json"))
	}
	for _, f := range files {
		inst := loadFile(b, f)
		b.Run(filepath.Base(f), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Convert(inst, Options{Scale: 0.01}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, p := range []int{100, 500} {
		inst := montageLike(rand.New(rand.NewPCG(uint64(p), 7)), 3, p)
		b.Run(fmt.Sprintf("montage-like-%d", len(inst.Tasks)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Convert(inst, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, n := range []int{300, 1000} {
		inst := randomDAG(rand.New(rand.NewPCG(uint64(n), 7)), n)
		b.Run(fmt.Sprintf("random-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Convert(inst, Options{Limits: noLimits}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// montageLike builds a Montage-shaped instance: per band, p projections,
// about 2p difference fits on overlapping pairs, a concat/model chain, p
// background corrections, a table, an add and a viewer; one colour viewer
// joins the bands. Like the real one it is not series-parallel.
func montageLike(r *rand.Rand, bands, p int) *Instance {
	inst := &Instance{}
	add := func(name string, parents ...int) int {
		i := len(inst.Tasks)
		inst.Tasks = append(inst.Tasks, Task{ID: name, Name: name, Runtime: time.Duration(100+r.IntN(900)) * time.Millisecond, Parents: parents})
		return i
	}
	var adds []int
	for b := range bands {
		proj := make([]int, p)
		for i := range proj {
			proj[i] = add(fmt.Sprintf("mProject_%d_%d", b, i))
		}
		var diffs []int
		for i := range p {
			for _, d := range []int{1, 2} {
				if j := i + d; j < p {
					diffs = append(diffs, add(fmt.Sprintf("mDiffFit_%d_%d_%d", b, i, j), proj[i], proj[j]))
				}
			}
		}
		model := add(fmt.Sprintf("mBgModel_%d", b), add(fmt.Sprintf("mConcatFit_%d", b), diffs...))
		var bgs []int
		for i := range p {
			bgs = append(bgs, add(fmt.Sprintf("mBackground_%d_%d", b, i), proj[i], model))
		}
		a := add(fmt.Sprintf("mAdd_%d", b), add(fmt.Sprintf("mImgtbl_%d", b), bgs...))
		add(fmt.Sprintf("mViewer_%d", b), a)
		adds = append(adds, a)
	}
	add("mViewer_color", adds...)
	normalise(inst)
	return inst
}

// BenchmarkLoad decodes the largest copied file.
func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(testdataDir, "cycles-chameleon-1l-1c-9p-001.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Load(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// noLimits lifts the grammar's limits for synthetic DAGs, whose random
// structure nests deeper than real workflows.
var noLimits = grammar.Limits{MaxDepth: -1, MaxArms: -1, MaxNameLen: -1, MaxInputBytes: -1, MaxServices: -1}
