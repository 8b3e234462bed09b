package testnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/testnet"
)

// afterTests run once every test and benchmark of the package ended.
var afterTests []func()

// bedweBin is the bedwe binary built once for every test in this package.
var bedweBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bedwe-testnet-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bedweBin = filepath.Join(dir, "bedwe")
	// The test build of bedwe: with the failpoints tag, so the tests that
	// must hit a window no outside signal can (node/failpoint.go) can make
	// a node kill or stall itself there. A released binary has none.
	args := []string{"build", "-tags", "failpoints", "-o", bedweBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/bedwe/bedwe/cmd/bedwe")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build bedwe:", err)
		os.Exit(1)
	}
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// testnetDir is where a test's testnet keeps its journals and logs: a
// temporary directory removed after the test, or, with BEDWE_TEST_KEEP_DIR
// set, a new directory under it that is kept (to read a failed run's debug
// logs, with BEDWE_TESTNET_LOG_LEVEL=debug).
func testnetDir(t *testing.T) string {
	keep := os.Getenv("BEDWE_TEST_KEEP_DIR")
	if keep == "" {
		return t.TempDir()
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp(keep, name+"-")
	if err != nil {
		t.Fatalf("keep the testnet's directory: %v", err)
	}
	t.Logf("testnet directory kept: %s", dir)
	return dir
}

// up starts a testnet that is torn down when the test ends; on failure the
// tail of every node's log is printed.
func up(t *testing.T, opts testnet.Options) *testnet.Manifest {
	t.Helper()
	opts.Binary = bedweBin
	if opts.Dir == "" {
		opts.Dir = testnetDir(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := testnet.Up(ctx, opts)
	if err != nil {
		t.Fatalf("testnet up: %v", err)
	}
	t.Cleanup(func() {
		if raceEnabled {
			for _, nd := range m.Nodes {
				if data, err := os.ReadFile(nd.Log); err == nil && bytes.Contains(data, []byte("WARNING: DATA RACE")) {
					t.Errorf("node %d (%s) reported a data race:\n%s", nd.Index, nd.PeerID, raceReport(data))
				}
			}
		}
		if t.Failed() {
			for _, nd := range m.Nodes {
				t.Logf("--- node %d (%s, zone %s) notable log lines:\n%s", nd.Index, nd.PeerID, nd.Zone, notable(nd.Log))
			}
		}
		if err := m.Down(); err != nil {
			t.Errorf("testnet down: %v", err)
		}
	})
	return m
}

// bedwe runs the binary and returns stdout, stderr and the exit code.
func bedwe(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bedweBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run bedwe %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// run submits workflow text through `bedwe submit --wait -o json` and
// returns the final status.
func run(t *testing.T, m *testnet.Manifest, workflow, input string) api.Status {
	t.Helper()
	args := []string{"submit", "-", "--testnet", m.Dir, "--wait", "-o", "json"}
	if input != "" {
		args = append(args, "--input", input)
	}
	stdout, stderr, code := bedwe(t, workflow, args...)
	var st api.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("bedwe submit exit %d: no status JSON (%v)\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
	wantCode := map[string]int{api.StateSucceeded: 0, api.StateFailed: 2, api.StateCancelled: 2}[st.State]
	if code != wantCode {
		t.Errorf("bedwe submit exit code %d for state %s, want %d", code, st.State, wantCode)
	}
	return st
}

// ran lists the services that ran successfully, in trace order.
func ran(st api.Status) []string {
	var out []string
	for _, e := range st.Trace {
		if e.Outcome == "ok" {
			out = append(out, e.Service)
		}
	}
	return out
}

func peerOf(st api.Status, service string) string {
	for _, e := range st.Trace {
		if e.Service == service && e.Outcome == "ok" {
			return e.Peer
		}
	}
	return ""
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// notable keeps the log lines that explain a failure: warnings and errors
// (but not late-timer notices), and the engine's milestones.
func notable(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var keep []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "check timer ran late") {
			continue
		}
		for _, k := range []string{"level=WARN", "level=ERROR", "node running", "submitted", "finished", "resuming", "taking over", "re-routing", "superseded", "panic", "goroutine "} {
			if strings.Contains(line, k) {
				if len(line) > 400 {
					line = line[:400]
				}
				keep = append(keep, line)
				break
			}
		}
	}
	if len(keep) > 80 {
		keep = keep[len(keep)-80:]
	}
	return strings.Join(keep, "\n")
}

// raceReport is the first race report in a node's log.
func raceReport(log []byte) string {
	i := bytes.Index(log, []byte("WARNING: DATA RACE"))
	if i < 0 {
		return ""
	}
	rest := log[i:]
	if j := bytes.Index(rest, []byte("==================")); j > 0 {
		rest = rest[:j]
	}
	if len(rest) > 8000 {
		rest = rest[:8000]
	}
	return string(rest)
}
