package wfcommons

import (
	"strings"
	"testing"
	"time"
)

// v15 is a WfFormat 1.5 instance: an N (a→c, a→d, b→d) where b→d is
// declared only as b's child and a→c only as c's parent.
const v15 = `{
  "name": "n-shape", "schemaVersion": "1.5",
  "workflow": {
    "specification": {"tasks": [
      {"name": "a", "id": "a", "parents": [], "children": ["d"]},
      {"name": "b", "id": "b", "parents": [], "children": ["d"]},
      {"name": "c", "id": "c", "parents": ["a"], "children": []},
      {"name": "d", "id": "d", "parents": ["a"]}
    ]},
    "execution": {"makespanInSeconds": 3, "tasks": [
      {"id": "a", "runtimeInSeconds": 1.5, "command": {"program": "prog-a"}},
      {"id": "b", "runtimeInSeconds": 0.25},
      {"id": "c", "runtimeInSeconds": 2},
      {"id": "d", "runtimeInSeconds": 0.001}
    ]}
  }
}`

// v14 is the 1.4 shape: one task list, parents by name, runtimeInSeconds,
// ids that differ from names.
const v14 = `{
  "name": "old", "schemaVersion": "1.4",
  "workflow": {"makespanInSeconds": 3, "executedAt": "x", "tasks": [
    {"name": "split_ID01", "id": "ID01", "type": "compute", "parents": [], "runtimeInSeconds": 1, "command": {"program": "split"}},
    {"name": "work_ID02", "id": "ID02", "type": "compute", "parents": ["split_ID01"], "runtimeInSeconds": 2},
    {"name": "work_ID03", "id": "ID03", "type": "compute", "parents": ["split_ID01"], "runtimeInSeconds": 3},
    {"name": "join_ID04", "id": "ID04", "type": "compute", "parents": ["work_ID02", "ID03"], "runtimeInSeconds": 0.5}
  ]}
}`

// v13 is the 1.3 shape: runtime (seconds), no ids, children only.
const v13 = `{
  "name": "older", "schemaVersion": "1.3",
  "workflow": {"makespan": 3, "tasks": [
    {"name": "first", "type": "compute", "runtime": 4, "children": ["second"]},
    {"name": "second", "type": "compute", "runtime": 5, "parents": []}
  ]}
}`

func TestLoadShapes(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		ids     []string
		parents [][]int
		rt      []time.Duration
		program string // of task 0
		want    string // converted shape
	}{
		{
			name: "1.5", src: v15,
			ids:     []string{"a", "b", "c", "d"},
			parents: [][]int{nil, nil, {0}, {0, 1}},
			rt:      []time.Duration{1500 * time.Millisecond, 250 * time.Millisecond, 2 * time.Second, time.Millisecond},
			program: "prog-a",
			want:    "FORK(a, b) SYNC FORK(c, d) SYNC",
		},
		{
			name: "1.4", src: v14,
			ids:     []string{"ID01", "ID02", "ID03", "ID04"},
			parents: [][]int{nil, {0}, {0}, {1, 2}},
			rt:      []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 500 * time.Millisecond},
			program: "split",
			want:    "split_ID01 FORK(work_ID02, work_ID03) SYNC join_ID04",
		},
		{
			name: "1.3", src: v13,
			ids:     []string{"first", "second"},
			parents: [][]int{nil, {0}},
			rt:      []time.Duration{4 * time.Second, 5 * time.Second},
			want:    "first second",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, err := Load(strings.NewReader(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if len(inst.Tasks) != len(tt.ids) {
				t.Fatalf("%d tasks, want %d", len(inst.Tasks), len(tt.ids))
			}
			for i, task := range inst.Tasks {
				if task.ID != tt.ids[i] || task.Runtime != tt.rt[i] || !equalInts(task.Parents, tt.parents[i]) {
					t.Errorf("task %d = %+v, want id %s, runtime %v, parents %v", i, task, tt.ids[i], tt.rt[i], tt.parents[i])
				}
			}
			if inst.Tasks[0].Program != tt.program {
				t.Errorf("program = %q, want %q", inst.Tasks[0].Program, tt.program)
			}
			res, err := Convert(inst, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := shape(res.Workflow); got != tt.want {
				t.Errorf("converted = %s, want %s", got, tt.want)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLoadErrors(t *testing.T) {
	spec := func(tasks, exec string) string {
		return `{"schemaVersion": "1.5", "workflow": {"specification": {"tasks": [` + tasks +
			`]}, "execution": {"tasks": [` + exec + `]}}}`
	}
	tests := []struct {
		name, src, want string
	}{
		{"bad JSON", `{"workflow": `, "decoding JSON"},
		{"no tasks", `{"schemaVersion": "1.5", "workflow": {}}`, "no tasks"},
		{"empty specification", spec("", ""), "specification.tasks is empty"},
		{"future schema", `{"schemaVersion": "2.0", "workflow": {"tasks": [{"name": "a"}]}}`, `unsupported schemaVersion "2.0"`},
		{"unknown parent", spec(`{"name": "a", "id": "a", "parents": ["zz"]}`, ""), `task "a": parent: unknown task "zz"`},
		{"unknown child", spec(`{"name": "a", "id": "a", "children": ["zz"]}`, ""), `task "a": child: unknown task "zz"`},
		{"duplicate id", spec(`{"name": "a", "id": "a"}, {"name": "b", "id": "a"}`, ""), `share the id "a"`},
		{"missing id", spec(`{"name": "a"}`, ""), "has no id"},
		{
			"cycle",
			spec(`{"name": "a", "id": "a", "parents": ["c"]}, {"name": "b", "id": "b", "parents": ["a"]}, {"name": "c", "id": "c", "parents": ["b"]}, {"name": "d", "id": "d", "parents": ["c"]}`, ""),
			"dependency cycle: a -> b -> c -> a",
		},
		{"self loop", spec(`{"name": "a", "id": "a", "parents": ["a"]}`, ""), "dependency cycle: a -> a"},
		{"negative runtime", spec(`{"name": "a", "id": "a"}`, `{"id": "a", "runtimeInSeconds": -1}`), "want a finite non-negative number"},
		{"unknown execution task", spec(`{"name": "a", "id": "a"}`, `{"id": "b", "runtimeInSeconds": 1}`), `execution task "b" is not in the specification`},
		{"execution twice", spec(`{"name": "a", "id": "a"}`, `{"id": "a"}, {"id": "a"}`), `execution task "a" appears twice`},
		{
			"ambiguous name",
			`{"schemaVersion": "1.4", "workflow": {"tasks": [{"name": "x", "id": "1"}, {"name": "x", "id": "2"}, {"name": "y", "id": "3", "parents": ["x"]}]}}`,
			"ambiguous",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tt.src))
			if err == nil {
				t.Fatalf("Load succeeded, want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "wfcommons: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestLoadNumericID(t *testing.T) {
	src := `{"schemaVersion": "1.4", "workflow": {"tasks": [{"name": "a", "id": 1}, {"name": "b", "id": 2, "parents": ["a"]}]}}`
	inst, err := Load(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if inst.Tasks[0].ID != "1" || !equalInts(inst.Tasks[1].Parents, []int{0}) {
		t.Errorf("tasks = %+v", inst.Tasks)
	}
}
