// Package script replays scripted interaction tests of state machines, in
// the style of etcd raft's: a testdata file is a list of blocks, each one
// command line, a "----" line and the lines the machine is expected to
// print, with "#" comment lines before a command. A rule change shows as a
// diff of a readable file; run the test with -update to rewrite the
// expected lines after a deliberate change.
package script

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/pack"
)

// Block is one command of a script and what it is expected to print.
type Block struct {
	Comment []string
	Cmd     string
	Want    []string
}

// Parse reads the script at path.
func Parse(t testing.TB, path string) []Block {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Block
	var cur *Block
	var comment []string
	inWant := false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "#"):
			comment = append(comment, line)
		case cur == nil && strings.TrimSpace(line) == "":
		case cur == nil:
			out = append(out, Block{Comment: comment, Cmd: line})
			comment = nil
			cur = &out[len(out)-1]
			inWant = false
		case !inWant && line == "----":
			inWant = true
		case !inWant:
			t.Fatalf("%s: a command is one line, then ----: %q", path, line)
		case strings.TrimSpace(line) == "":
			cur = nil
		default:
			cur.Want = append(cur.Want, line)
		}
	}
	return out
}

// RunAll runs Run on every testdata/*.txt file as a subtest; newRun
// returns the apply function for one script (fresh machine state).
func RunAll(t *testing.T, update bool, newRun func(t *testing.T) func(cmd string) []string) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { Run(t, f, update, newRun(t)) })
	}
}

// Run replays the script at path through apply, which runs one command and
// returns what the machine printed. Differences fail the test, or, with
// update, rewrite the file.
func Run(t *testing.T, path string, update bool, apply func(cmd string) []string) {
	blocks := Parse(t, path)
	var rewritten strings.Builder
	failed := false
	for i, b := range blocks {
		got := apply(b.Cmd)
		if strings.Join(got, "\n") != strings.Join(b.Want, "\n") {
			failed = true
			if !update {
				t.Errorf("%s block %d: %s\n got:\n\t%s\nwant:\n\t%s", path, i+1, b.Cmd, strings.Join(got, "\n\t"), strings.Join(b.Want, "\n\t"))
			}
		}
		for _, c := range b.Comment {
			rewritten.WriteString(c + "\n")
		}
		fmt.Fprintf(&rewritten, "%s\n----\n%s\n\n", b.Cmd, strings.Join(got, "\n"))
	}
	if update && failed {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Args parses key=value fields; a bare word is key=true.
func Args(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			v = "true"
		}
		m[k] = v
	}
	return m
}

// Int reads the whole number argument k of args (def when absent),
// failing the test when it is not one.
func Int(t testing.TB, args map[string]string, k string, def int) int {
	t.Helper()
	v, ok := args[k]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", k, v, err)
	}
	return n
}

// Duration reads the duration argument k of args (0 when absent),
// failing the test when it is not one.
func Duration(t testing.TB, args map[string]string, k string) time.Duration {
	t.Helper()
	v, ok := args[k]
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", k, v, err)
	}
	return d
}

// List reads a comma-separated list (nil when empty).
func List(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Peers reads a comma-separated list of peer IDs (nil when empty).
func Peers(v string) []pack.Peer {
	var out []pack.Peer
	for _, id := range List(v) {
		out = append(out, pack.Peer{ID: id})
	}
	return out
}
