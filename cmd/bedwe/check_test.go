package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// The golden files under testdata/ are regenerated with
//
//	go test ./cmd/bedwe -run 'Check|Fmt|Graph' -update
//
// The flag is registered in init, after every package-level variable, so a
// test file of another verb that registers -update itself wins and this one
// reads its value.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata/")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// langGolden compares got with testdata/NAME, or rewrites it with -update.
func langGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if updateGolden() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// runLangCLI runs the language verbs in-process as `bedwe ARGS...` with the
// given standard input, returning stdout, stderr and the exit status.
func runLangCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	app := &cli.App{
		Name:           "bedwe",
		Commands:       []*cli.Command{checkCommand(), fmtCommand(), graphCommand()},
		Reader:         strings.NewReader(stdin),
		Writer:         &out,
		ErrWriter:      &errb,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run(append([]string{"bedwe"}, args...))
	if err != nil {
		code = 1
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			code = ec.ExitCode()
		}
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(&errb, "bedwe:", msg)
		}
	}
	return out.String(), errb.String(), code
}

const exampleGuarded = "../../examples/fig2-guarded.bedwe"

func TestCheckValid(t *testing.T) {
	out, errOut, code := runLangCLI(t, "", "check", exampleGuarded, "../../examples/fig2.bedwe", "../../examples/constructs.bedwe")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	langGolden(t, "check_examples.golden", out)
	if !strings.Contains(out, "../../examples/fig2.bedwe: ok — 10 services, depth 2, widest pattern 2\n") {
		t.Errorf("summary line missing: %q", out)
	}
}

func TestCheckInvalid(t *testing.T) {
	out, errOut, code := runLangCLI(t, "", "check", "testdata/check_bad.bedwe")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	langGolden(t, "check_bad.golden", errOut)
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if !strings.HasPrefix(line, "testdata/check_bad.bedwe:") {
			t.Errorf("line without FILE:LINE:COL prefix: %q", line)
		}
	}
	_, errOut, code = runLangCLI(t, "", "check", "testdata/check_syntax.bedwe")
	want := "testdata/check_syntax.bedwe:3:3: expected \",\" or \")\" after FORK branch, found \"SYNC\"\n"
	if code != 1 || errOut != want {
		t.Errorf("syntax error: exit %d, stderr %q, want %q", code, errOut, want)
	}
}

func TestCheckJSON(t *testing.T) {
	out, _, code := runLangCLI(t, "", "check", "-o", "json", exampleGuarded)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	langGolden(t, "check_fig2-guarded.json.golden", out)

	out, _, code = runLangCLI(t, "", "check", "-o", "json", "testdata/check_bad.bedwe")
	if code != 1 {
		t.Fatalf("exit %d for an invalid file", code)
	}
	var res checkResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v: %s", err, out)
	}
	if res.Valid || len(res.Errors) != 3 || res.Errors[0].Line != 3 || res.Errors[0].Col != 7 {
		t.Errorf("unexpected result %+v", res)
	}
}

func TestCheckStdinAndMistakes(t *testing.T) {
	out, _, code := runLangCLI(t, "S1 FORK(S2, S3) SYNC S4", "check", "-")
	if code != 0 || out != "<stdin>: ok — 4 services, depth 1, widest pattern 2\n" {
		t.Errorf("stdin: exit %d, %q", code, out)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"check"}, "bedwe: check needs a workflow FILE"},
		{[]string{"check", "testdata/no-such-file.bedwe"}, "bedwe: read workflow: open testdata/no-such-file.bedwe: no such file or directory"},
		{[]string{"check", "-o", "yaml", exampleGuarded}, `bedwe: unknown output format "yaml": use text or json`},
	}
	for _, tt := range tests {
		_, errOut, code := runLangCLI(t, "", tt.args...)
		if code != 1 || !strings.HasPrefix(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q, want prefix %q", tt.args, code, errOut, tt.want)
		}
	}
}
