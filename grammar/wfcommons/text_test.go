package wfcommons

import (
	"strings"
	"testing"

	"github.com/bedwe/bedwe/grammar"
)

func TestWriteText(t *testing.T) {
	inst, err := Load(strings.NewReader(v15))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(inst, Options{Scale: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteText(&b, res, "n.json"); err != nil {
		t.Fatal(err)
	}
	want := `# Imported from WfCommons instance n.json ("n-shape", WfFormat 1.5)
# 4 tasks, 3 edges (0 transitive, dropped), 1 added edges (1 order pairs)
# critical path 3.5s -> 3.5s (+0.0%), not series-parallel: dependencies were added
# expect= is the recorded runtime x 0.5
FORK(a[expect=750ms], b[expect=125ms]) SYNC
FORK(c[expect=1s], d[expect=1ms]) SYNC
`
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	w, err := grammar.Parse("n.bedwe", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !w.Equal(res.Workflow) {
		t.Errorf("parsed %s, want %s", w, res.Workflow)
	}
	if got, want := res.Summary(), "4 tasks, 3 edges, series-parallel: no, added 1 edges (1 order pairs), critical path 3.5s -> 3.5s (+0.0%)"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got := res.SleepMillis(); len(got) != 4 || got["a"] != 750 || got["d"] != 1 {
		t.Errorf("SleepMillis = %v", got)
	}
}
