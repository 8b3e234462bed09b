package wfcommons

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Instance is a workflow instance read from WfFormat JSON: its tasks and the
// dependencies between them.
type Instance struct {
	// Name is the instance's name field.
	Name string
	// SchemaVersion is the WfFormat version the file declares, e.g. "1.5".
	SchemaVersion string
	// Tasks in file order. Task.Parents refer to indices of this slice.
	Tasks []Task
}

// Task is one task of an instance.
type Task struct {
	// ID identifies the task in the file (WfFormat 1.5 id; for 1.3/1.4 files
	// the id field when present, else the name).
	ID string
	// Name is the task's name; it becomes the service name.
	Name string
	// Program is command.program, or the category of old files; may be empty.
	Program string
	// Runtime is the measured run time (runtimeInSeconds, or runtime in 1.3);
	// zero when the file records none.
	Runtime time.Duration
	// Parents holds the indices (into Instance.Tasks) of the tasks that must
	// finish before this one starts: sorted, without duplicates.
	Parents []int
}

// Edges returns the number of distinct dependencies (parent, child pairs).
func (inst *Instance) Edges() int {
	n := 0
	for _, t := range inst.Tasks {
		n += len(t.Parents)
	}
	return n
}

// The JSON shapes. WfFormat 1.5 (and 1.6) split a workflow into a
// specification (tasks, dependencies by id) and an execution (runtimes by id);
// 1.3 and 1.4 keep one list under workflow.tasks (workflow.jobs before 1.3)
// with dependencies by name and runtime (1.3) or runtimeInSeconds (1.4).
// Dependencies may be declared on one end only, so parents and children are
// merged.
type rawInstance struct {
	Name          string      `json:"name"`
	SchemaVersion string      `json:"schemaVersion"`
	Workflow      rawWorkflow `json:"workflow"`
}

type rawWorkflow struct {
	Specification *struct {
		Tasks []rawTask `json:"tasks"`
	} `json:"specification"`
	Execution *struct {
		Tasks []rawTask `json:"tasks"`
	} `json:"execution"`
	Tasks []rawTask `json:"tasks"`
	Jobs  []rawTask `json:"jobs"`
}

type rawTask struct {
	Name             string      `json:"name"`
	ID               flexString  `json:"id"`
	Category         string      `json:"category"`
	Parents          []string    `json:"parents"`
	Children         []string    `json:"children"`
	Runtime          *float64    `json:"runtime"`
	RuntimeInSeconds *float64    `json:"runtimeInSeconds"`
	Command          *rawCommand `json:"command"`
}

type rawCommand struct {
	Program string `json:"program"`
}

// flexString accepts a JSON string or number (some old files number ids).
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("id: want a string or number, got %s", b)
	}
	*f = flexString(n.String())
	return nil
}

func (r *rawTask) runtime() *float64 {
	if r.RuntimeInSeconds != nil {
		return r.RuntimeInSeconds
	}
	return r.Runtime
}

// Load reads a WfFormat instance (schema 1.3 to 1.6) and validates it: task
// ids must be unique, every dependency must name a task of the file, runtimes
// must be finite and non-negative, and the dependencies must not form a
// cycle.
func Load(r io.Reader) (*Instance, error) {
	var raw rawInstance
	dec := json.NewDecoder(r)
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("wfcommons: decoding JSON: %w", err)
	}
	if v := raw.SchemaVersion; v != "" {
		major, _, _ := strings.Cut(v, ".")
		if major != "1" {
			return nil, fmt.Errorf("wfcommons: unsupported schemaVersion %q (want 1.x)", v)
		}
	}
	var (
		inst *Instance
		err  error
	)
	w := &raw.Workflow
	switch {
	case w.Specification != nil:
		inst, err = loadSplit(w)
	case len(w.Tasks) > 0:
		inst, err = loadFlat(w.Tasks)
	case len(w.Jobs) > 0:
		inst, err = loadFlat(w.Jobs)
	default:
		return nil, errors.New("wfcommons: no tasks: expected workflow.specification.tasks (WfFormat 1.5) or workflow.tasks (1.3, 1.4)")
	}
	if err != nil {
		return nil, fmt.Errorf("wfcommons: %w", err)
	}
	inst.Name = raw.Name
	inst.SchemaVersion = raw.SchemaVersion
	if _, err := inst.analyse(); err != nil {
		return nil, fmt.Errorf("wfcommons: %w", err)
	}
	return inst, nil
}

// refIndex resolves the task references of one file.
type refIndex struct {
	byID   map[string]int
	byName map[string]int // -1 when several tasks share the name
	idOnly bool           // 1.5: references are ids; names only as a fallback
}

func newRefIndex(tasks []Task, idOnly bool) (*refIndex, error) {
	ix := &refIndex{byID: make(map[string]int, len(tasks)), byName: make(map[string]int, len(tasks)), idOnly: idOnly}
	for i, t := range tasks {
		if j, dup := ix.byID[t.ID]; dup {
			return nil, fmt.Errorf("tasks %d and %d share the id %q", j, i, t.ID)
		}
		ix.byID[t.ID] = i
		if _, dup := ix.byName[t.Name]; dup {
			ix.byName[t.Name] = -1
		} else {
			ix.byName[t.Name] = i
		}
	}
	return ix, nil
}

// resolve finds the task a reference names: by id, then by name (old files
// name tasks; a name is accepted only if unique).
func (ix *refIndex) resolve(ref string) (int, error) {
	first, second := ix.byID, ix.byName
	if !ix.idOnly {
		first, second = ix.byName, ix.byID
	}
	if i, ok := first[ref]; ok && i >= 0 {
		return i, nil
	}
	if i, ok := second[ref]; ok && i >= 0 {
		return i, nil
	}
	if i, ok := ix.byName[ref]; ok && i < 0 {
		return 0, fmt.Errorf("reference %q is ambiguous: several tasks have that name", ref)
	}
	return 0, fmt.Errorf("unknown task %q", ref)
}

// link resolves the parents and children of every raw task into
// Task.Parents, merging both directions.
func link(tasks []Task, raws []rawTask, ix *refIndex) error {
	parents := make([][]int, len(tasks))
	for i, rt := range raws {
		for _, ref := range rt.Parents {
			p, err := ix.resolve(ref)
			if err != nil {
				return fmt.Errorf("task %q: parent: %w", tasks[i].ID, err)
			}
			parents[i] = append(parents[i], p)
		}
		for _, ref := range rt.Children {
			c, err := ix.resolve(ref)
			if err != nil {
				return fmt.Errorf("task %q: child: %w", tasks[i].ID, err)
			}
			parents[c] = append(parents[c], i)
		}
	}
	for i := range tasks {
		ps := parents[i]
		slices.Sort(ps)
		tasks[i].Parents = slices.Compact(ps)
	}
	return nil
}

func seconds(v *float64, where string) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	s := *v
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 || s > float64(math.MaxInt64)/1e9 {
		return 0, fmt.Errorf("%s: runtime %s s: want a finite non-negative number", where, strconv.FormatFloat(s, 'g', -1, 64))
	}
	return time.Duration(math.Round(s * 1e9)), nil
}

// loadSplit reads the WfFormat 1.5 shape.
func loadSplit(w *rawWorkflow) (*Instance, error) {
	spec := w.Specification.Tasks
	if len(spec) == 0 {
		return nil, errors.New("workflow.specification.tasks is empty")
	}
	inst := &Instance{Tasks: make([]Task, len(spec))}
	for i, rt := range spec {
		id := string(rt.ID)
		if id == "" {
			return nil, fmt.Errorf("specification task %d (%q) has no id", i, rt.Name)
		}
		name := rt.Name
		if name == "" {
			name = id
		}
		inst.Tasks[i] = Task{ID: id, Name: name, Program: rt.Category}
	}
	ix, err := newRefIndex(inst.Tasks, true)
	if err != nil {
		return nil, err
	}
	if err := link(inst.Tasks, spec, ix); err != nil {
		return nil, err
	}
	if w.Execution == nil {
		return inst, nil
	}
	seen := make([]bool, len(inst.Tasks))
	for _, et := range w.Execution.Tasks {
		i, ok := ix.byID[string(et.ID)]
		if !ok {
			return nil, fmt.Errorf("execution task %q is not in the specification", et.ID)
		}
		if seen[i] {
			return nil, fmt.Errorf("execution task %q appears twice", et.ID)
		}
		seen[i] = true
		d, err := seconds(et.runtime(), "execution task "+strconv.Quote(string(et.ID)))
		if err != nil {
			return nil, err
		}
		inst.Tasks[i].Runtime = d
		if et.Command != nil && et.Command.Program != "" {
			inst.Tasks[i].Program = et.Command.Program
		}
	}
	return inst, nil
}

// loadFlat reads the WfFormat 1.3/1.4 shape (and the 1.0–1.2 jobs list,
// which has the same fields).
func loadFlat(raws []rawTask) (*Instance, error) {
	inst := &Instance{Tasks: make([]Task, len(raws))}
	for i, rt := range raws {
		name := rt.Name
		id := string(rt.ID)
		if name == "" && id == "" {
			return nil, fmt.Errorf("task %d has neither name nor id", i)
		}
		if name == "" {
			name = id
		}
		if id == "" {
			id = name
		}
		d, err := seconds(rt.runtime(), "task "+strconv.Quote(name))
		if err != nil {
			return nil, err
		}
		prog := rt.Category
		if rt.Command != nil && rt.Command.Program != "" {
			prog = rt.Command.Program
		}
		inst.Tasks[i] = Task{ID: id, Name: name, Program: prog, Runtime: d}
	}
	ix, err := newRefIndex(inst.Tasks, false)
	if err != nil {
		return nil, err
	}
	if err := link(inst.Tasks, raws, ix); err != nil {
		return nil, err
	}
	return inst, nil
}
