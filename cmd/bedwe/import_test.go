package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/grammar"
)

var updateImport = flag.Bool("update-import", false, "rewrite the import golden files")

// runImport runs `bedwe import ARGS...` in-process and returns stdout,
// stderr and the error (an ExitCoder for user mistakes).
func runImport(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:           "bedwe",
		Commands:       []*cli.Command{importCommand()},
		Writer:         &out,
		ErrWriter:      &errOut,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run(append([]string{"bedwe", "import"}, args...))
	return out.String(), errOut.String(), err
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateImport {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Import -update-import to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestImportWfcommonsGolden(t *testing.T) {
	// Flags after FILE, as the usage shows them.
	out, errOut, err := runImport(t, "wfcommons", "testdata/import_n.json", "--scale", "0.1", "--prefix", "wf.")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "import_n.golden", out)
	wantSummary := "imported testdata/import_n.json: 4 tasks, 3 edges, series-parallel: no, added 1 edges (1 order pairs), critical path 5s -> 5s (+0.0%)\n"
	if errOut != wantSummary {
		t.Errorf("stderr = %q, want %q", errOut, wantSummary)
	}
	w, err := grammar.Parse("import_n.golden", []byte(out))
	if err != nil {
		t.Fatalf("output does not parse: %v", err)
	}
	if got := w.String(); !strings.Contains(got, "wf.fetch_data[expect=125ms]") {
		t.Errorf("workflow %s lacks the sanitised, prefixed, scaled service", got)
	}

	// Flags before FILE give the same workflow.
	out2, _, err := runImport(t, "wfcommons", "--scale=0.1", "--prefix", "wf.", "testdata/import_n.json")
	if err != nil {
		t.Fatal(err)
	}
	if out2 != out {
		t.Errorf("flags before FILE changed the output:\n%s\nvs\n%s", out2, out)
	}
}

func TestImportWfcommonsFiles(t *testing.T) {
	dir := t.TempDir()
	wf, input := filepath.Join(dir, "m.bedwe"), filepath.Join(dir, "in.json")
	src := "../../testdata/wfcommons/montage-chameleon-2mass-01d-001.json"
	out, errOut, err := runImport(t, "wfcommons", src, "-o", wf, "--input", input, "--json", "--scale", "0.01")
	if err != nil {
		t.Fatal(err)
	}
	if out != "" {
		t.Errorf("stdout = %q with -o, want nothing", out)
	}
	var sum importSummary
	if err := json.Unmarshal([]byte(errOut), &sum); err != nil {
		t.Fatalf("summary %q: %v", errOut, err)
	}
	if sum.Tasks != 103 || sum.Edges != 231 || sum.SeriesParallel || sum.AddedEdges == 0 || sum.Output != wf || sum.Growth > 0.11 {
		t.Errorf("summary = %+v", sum)
	}
	text, err := os.ReadFile(wf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), "# Imported from WfCommons instance montage-chameleon-2mass-01d-001.json") {
		t.Errorf("header missing:\n%.300s", text)
	}
	w, err := grammar.Parse(wf, text)
	if err != nil {
		t.Fatalf("output does not parse: %v", err)
	}
	var in struct {
		SleepMS map[string]int64 `json:"sleep_ms"`
	}
	data, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}
	if len(in.SleepMS) != 103 {
		t.Errorf("input has %d services, want 103", len(in.SleepMS))
	}
	// mProject_ID0000001 ran 15.712s; scaled by 0.01.
	if ms := in.SleepMS["mProject_ID0000001"]; ms != 157 {
		t.Errorf("sleep_ms[mProject_ID0000001] = %d, want 157", ms)
	}
	if !strings.Contains(w.String(), "mProject_ID0000001[expect=157ms]") {
		t.Error("workflow lacks mProject_ID0000001[expect=157ms]")
	}
}

func TestImportWfcommonsErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"wfcommons"}, "missing FILE.json"},
		{"missing file", []string{"wfcommons", "testdata/nope.json"}, "no such file"},
		{"two files", []string{"wfcommons", "testdata/import_n.json", "other.json"}, "one FILE expected"},
		{"bad scale", []string{"wfcommons", "testdata/import_n.json", "--scale", "0"}, "--scale 0: want a number greater than 0"},
		{"bad trailing flag", []string{"wfcommons", "testdata/import_n.json", "--frobnicate"}, "flag provided but not defined"},
		{"bad prefix", []string{"wfcommons", "--prefix", "a b", "testdata/import_n.json"}, "service prefix"},
		{"cycle", []string{"wfcommons", "testdata/import_cycle.json"}, "dependency cycle: a -> b -> a"},
		{"not json", []string{"wfcommons", "import_test.go"}, "decoding JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runImport(t, tt.args...)
			var coder cli.ExitCoder
			if !errors.As(err, &coder) || coder.ExitCode() != 1 {
				t.Fatalf("err = %v, want an exit code 1", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "import wfcommons: ") {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
			if out != "" {
				t.Errorf("stdout = %q on error", out)
			}
		})
	}
}
