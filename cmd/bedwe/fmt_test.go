package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFmtPrints(t *testing.T) {
	out, errOut, code := runLangCLI(t, "", "fmt", "testdata/fmt_messy.bedwe")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	langGolden(t, "fmt_messy.golden", out)
	// The golden output is itself formatted.
	again, _, code := runLangCLI(t, out, "fmt", "-")
	if code != 0 || again != out {
		t.Errorf("fmt is not a fixed point:\n%s", again)
	}
}

func TestFmtList(t *testing.T) {
	out, _, code := runLangCLI(t, "", "fmt", "-l", "testdata/fmt_messy.bedwe", "../../examples/fig2.bedwe")
	if code != 1 || out != "testdata/fmt_messy.bedwe\n" {
		t.Errorf("-l: exit %d, %q", code, out)
	}
	out, _, code = runLangCLI(t, "", "fmt", "--check", "../../examples/fig2.bedwe", "../../examples/constructs.bedwe", exampleGuarded)
	if code != 0 || out != "" {
		t.Errorf("--check on formatted examples: exit %d, %q", code, out)
	}
}

func TestFmtWrite(t *testing.T) {
	dir := t.TempDir()
	messy, err := os.ReadFile("testdata/fmt_messy.bedwe")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wf.bedwe")
	if err := os.WriteFile(path, messy, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runLangCLI(t, "", "fmt", "-w", path); code != 0 {
		t.Fatalf("fmt -w: exit %d: %s", code, errOut)
	}
	got, _ := os.ReadFile(path)
	want, _ := os.ReadFile("testdata/fmt_messy.golden")
	if string(got) != string(want) {
		t.Errorf("rewritten file:\n%s\nwant:\n%s", got, want)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}

	// An invalid file is reported and left untouched.
	bad := filepath.Join(dir, "bad.bedwe")
	content := []byte("S1 FORK(S2, S3\n# precious comment\n")
	if err := os.WriteFile(bad, content, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runLangCLI(t, "", "fmt", "-w", bad)
	if code != 1 || !strings.HasPrefix(errOut, bad+":3:1: expected") {
		t.Errorf("fmt -w on a bad file: exit %d, stderr %q", code, errOut)
	}
	if got, _ := os.ReadFile(bad); string(got) != string(content) {
		t.Errorf("bad file was changed to %q", got)
	}

	if _, errOut, code := runLangCLI(t, "S1", "fmt", "-w", "-"); code != 1 || !strings.Contains(errOut, "cannot rewrite standard input") {
		t.Errorf("fmt -w -: exit %d, %q", code, errOut)
	}
}
