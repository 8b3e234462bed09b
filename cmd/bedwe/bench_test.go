package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/testnet/bench"
)

// runBenchCmd runs `bedwe bench ARGS...` in-process.
func runBenchCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:           "bedwe",
		Commands:       []*cli.Command{benchCommand()},
		Writer:         &out,
		ErrWriter:      &errOut,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run(append([]string{"bedwe", "bench"}, args...))
	return out.String(), errOut.String(), err
}

func exitCode(err error) int {
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestBenchUserMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--experiments", "sequential,bogus"}, `unknown experiment "bogus"`},
		{[]string{"--repeat", "0"}, "--repeat 0"},
		{[]string{"--scale", "-1", "--experiments", "wfcommons"}, "--scale -1"},
		{[]string{"--experiments", "wfcommons", "--wfcommons-dir", "/nonexistent"}, "no WfCommons instances"},
		{[]string{"extra"}, "takes no arguments"},
		{[]string{"-o", "yaml"}, "unknown output format"},
		{[]string{"--testnet", "/nonexistent-bedwe-testnet", "--experiments", "sequential"}, "no testnet in"},
	} {
		_, _, err := runBenchCmd(t, tc.args...)
		if exitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: exit %d, error %v; want exit 1 mentioning %q", tc.args, exitCode(err), err, tc.want)
		}
	}
}

func TestBenchPrintServices(t *testing.T) {
	out, _, err := runBenchCmd(t, "--print-services")
	if err != nil || out != bench.Services {
		t.Errorf("--print-services: %v\n%s", err, out)
	}
}

// TestBenchQuick runs every experiment with --quick on a 4-node testnet of
// real processes and checks every CSV row is filled.
func TestBenchQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testnet")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bedwe")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build bedwe: %v\n%s", err, out)
	}
	outDir := filepath.Join(tmp, "out")
	stdout, stderr, err := runBenchCmd(t, "--quick", "--binary", bin, "--out", outDir,
		"--wfcommons-dir", "../../testdata/wfcommons", "-o", "json")
	if err != nil {
		t.Fatalf("bench --quick: %v\nstderr:\n%s", err, stderr)
	}
	for _, want := range []string{"mesh connected: 4 nodes", "sequential noop x=2 repeat 1/1", "resources idle", "wfcommons ", "stopping the testnet"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, stderr)
		}
	}
	var summary struct {
		Nodes       int                         `json:"nodes"`
		Experiments []string                    `json:"experiments"`
		Tables      map[string][]map[string]any `json:"tables"`
		Files       []string                    `json:"files"`
	}
	if err := json.Unmarshal([]byte(stdout), &summary); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	if summary.Nodes != 4 || len(summary.Experiments) != len(bench.Experiments) {
		t.Errorf("summary: %d nodes, experiments %v", summary.Nodes, summary.Experiments)
	}
	wantRows := map[string]int{
		"sequential": 4, "parallel": 4, "nested": 4, // 2 points x 2 modes
		"overhead": 1, "packsize": bench.QuickConfig().PackLength, "resources": 2, "wfcommons": 1,
	}
	for name, n := range wantRows {
		f, err := os.Open(filepath.Join(outDir, name+".csv"))
		if err != nil {
			t.Errorf("%s.csv: %v", name, err)
			continue
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Errorf("%s.csv: %v", name, err)
			continue
		}
		if len(recs) != n+1 {
			t.Errorf("%s.csv: %d rows, want %d", name, len(recs)-1, n)
		}
		for i, rec := range recs[1:] {
			for k, cell := range rec {
				if cell == "" {
					t.Errorf("%s.csv row %d: column %s is empty", name, i+1, recs[0][k])
				}
			}
		}
		if len(summary.Tables[name]) != n {
			t.Errorf("-o json: table %s has %d rows, want %d", name, len(summary.Tables[name]), n)
		}
	}
	for _, name := range []string{"results.md", "sequential.svg", "parallel.svg", "nested.svg", "packsize.svg"} {
		if _, err := os.Stat(filepath.Join(outDir, name)); err != nil {
			t.Errorf("missing output: %v", err)
		}
	}
}
