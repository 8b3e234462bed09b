//go:build unix

package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// execService declares an exec service running a shell script with body,
// through /bin/sh (so the script file is never exec'd while another test's
// fork may hold it open for writing: ETXTBSY). extra is added to the
// declaration, e.g. "timeout: 1s".
func execService(t *testing.T, body string, env map[string]string, extra string, opts ...Option) Service {
	t.Helper()
	script := filepath.Join(t.TempDir(), "svc.sh")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var decl strings.Builder
	fmt.Fprintf(&decl, "version: 1\nservices:\n  svc:\n    kind: exec\n    command: [/bin/sh, %q]\n", script)
	if len(env) > 0 {
		decl.WriteString("    env:\n")
		for k, v := range env {
			fmt.Fprintf(&decl, "      %s: %q\n", k, v)
		}
	}
	for _, line := range strings.Split(extra, "\n") {
		if line != "" {
			fmt.Fprintf(&decl, "    %s\n", line)
		}
	}
	r, err := Parse([]byte(decl.String()), opts...)
	if err != nil {
		t.Fatalf("Parse:\n%s\n%v", decl.String(), err)
	}
	s, ok := r.Lookup("svc")
	if !ok {
		t.Fatal("svc not declared")
	}
	return s
}

func testRequest() Request {
	return Request{
		WorkflowID:     "wf-1",
		Step:           "3/f1/0",
		Attempt:        2,
		IdempotencyKey: IdempotencyKey("wf-1", "3/f1/0", 2),
		Input:          json.RawMessage(`{"n":7}`),
		Outputs:        map[string]json.RawMessage{"S1": json.RawMessage(`{"x":1}`)},
	}
}

func TestExecSuccessReceivesRequest(t *testing.T) {
	t.Parallel()
	reqFile := filepath.Join(t.TempDir(), "request.json")
	s := execService(t, `cat > "$REQ"; printf '{"ok":true,"key":"%s","svc":"%s"}' "$BEDWE_IDEMPOTENCY_KEY" "$BEDWE_SERVICE"`,
		map[string]string{"REQ": reqFile}, "timeout: 20s")
	out, err := s.Invoke(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ok":true,"key":"wf-1:3/f1/0:2","svc":"svc"}`
	if string(out) != want {
		t.Errorf("result = %s, want %s", out, want)
	}
	raw, err := os.ReadFile(reqFile)
	if err != nil {
		t.Fatal(err)
	}
	var got Request
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("stdin was not a JSON request: %v\n%s", err, raw)
	}
	wantReq := testRequest()
	wantReq.Service = "svc"
	if got.WorkflowID != wantReq.WorkflowID || got.Step != wantReq.Step || got.Service != wantReq.Service ||
		got.Attempt != wantReq.Attempt || got.IdempotencyKey != "wf-1:3/f1/0:2" ||
		string(got.Input) != `{"n":7}` || string(got.Outputs["S1"]) != `{"x":1}` {
		t.Errorf("stdin request = %+v, want %+v", got, wantReq)
	}
}

func TestExecFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		exitCode int
		cause    string // substring of Failure.Cause
		stderr   string // substring of Failure.Stderr
	}{
		{"non-zero exit", "echo 'disk full' >&2; exit 3", 3, "exit status 3", "disk full"},
		{"not JSON", `echo "hello"; echo 'warn' >&2`, 0, `output is not JSON, want a JSON object: "hello"`, "warn"},
		{"JSON array", `echo '[1,2]'`, 0, "output is JSON but not an object", ""},
		{"truncated object", `printf '{"a":'`, 0, "output is not valid JSON", ""},
		{"empty output", `true`, 0, "output is empty, want a JSON object", ""},
		{"killed by a signal", `kill -9 $$`, -1, "killed by signal killed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := execService(t, tt.body, nil, "timeout: 20s")
			_, err := s.Invoke(context.Background(), testRequest())
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("Invoke error = %v (%T), want *Failure", err, err)
			}
			if f.Service != "svc" || f.ExitCode != tt.exitCode || !strings.Contains(f.Cause, tt.cause) || !strings.Contains(f.Stderr, tt.stderr) {
				t.Errorf("Failure = %+v, want exit %d, cause ~%q, stderr ~%q", f, tt.exitCode, tt.cause, tt.stderr)
			}
			if !strings.Contains(err.Error(), tt.stderr) {
				t.Errorf("Error() = %q does not show stderr %q", err.Error(), tt.stderr)
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Errorf("a failure must not look like a timeout or cancellation: %v", err)
			}
		})
	}
}

func TestExecStderrTailIsCapped(t *testing.T) {
	t.Parallel()
	s := execService(t, `i=0; while [ $i -lt 2000 ]; do echo "line $i of noise noise noise noise noise" >&2; i=$((i+1)); done; echo LAST >&2; exit 1`, nil, "timeout: 20s")
	_, err := s.Invoke(context.Background(), testRequest())
	var f *Failure
	if !errors.As(err, &f) {
		t.Fatalf("Invoke error = %v, want *Failure", err)
	}
	if len(f.Stderr) > MaxStderr+3 || !strings.HasSuffix(f.Stderr, "LAST\n") || !strings.HasPrefix(f.Stderr, "...") {
		t.Errorf("stderr tail has %d bytes (cap %d), starts %q, ends %q", len(f.Stderr), MaxStderr, f.Stderr[:10], f.Stderr[len(f.Stderr)-10:])
	}
	if len(err.Error()) > 1024 {
		t.Errorf("Error() is %d bytes; it should show a short tail", len(err.Error()))
	}
}

func TestExecOutputCapStopsTheCommand(t *testing.T) {
	t.Parallel()
	// The command writes past the cap and then would sleep for five
	// minutes: it must be stopped as soon as the cap is passed, so the
	// attempt fails for its output and not for its timeout. (The cap is
	// lowered from MaxOutput to keep the test cheap on a loaded machine.)
	s := execService(t, "head -c 4097 /dev/zero; sleep 300", nil, "timeout: 120s")
	s.(*bound).r.(*execRunner).maxOutput = 4096
	_, err := s.Invoke(context.Background(), testRequest())
	var f *Failure
	if !errors.As(err, &f) || f.Cause != "output exceeds 4096 bytes" {
		t.Fatalf("Invoke error = %v, want a *Failure about output size", err)
	}
}

// waitFile polls for a file to hold a line and returns it.
func waitFile(t *testing.T, path string, done <-chan struct{}) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-done:
			if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
				return strings.TrimSpace(string(b))
			}
			t.Fatalf("Invoke returned before %s was written", path)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("%s not written within 20s", path)
	return ""
}

// assertGone waits (bounded) until process pid no longer exists. A killed
// process whose parent died is reaped by init; until then it is a zombie,
// which counts as dead where init does not reap promptly.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			if zombie(pid) {
				t.Logf("pid %d is a zombie not yet reaped by init: dead", pid)
				return
			}
			t.Fatalf("process %d still exists 20s after the attempt ended (kill(pid, 0) = %v)", pid, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not synchronising
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// grandchildScript starts a background "sleep 30" in the command's process
// group, records its pid in $PIDFILE and waits for it.
const grandchildScript = `sleep 30 &
echo $! > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"
wait
`

type invokeResult struct {
	out json.RawMessage
	err error
}

func invokeAsync(ctx context.Context, s Service) (<-chan invokeResult, <-chan struct{}) {
	res := make(chan invokeResult, 1)
	done := make(chan struct{})
	go func() {
		out, err := s.Invoke(ctx, testRequest())
		res <- invokeResult{out, err}
		close(done)
	}()
	return res, done
}

func awaitResult(t *testing.T, res <-chan invokeResult) invokeResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Invoke did not return within 20s")
		return invokeResult{}
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	clock := clockwork.NewFakeClock()
	s := execService(t, grandchildScript, map[string]string{"PIDFILE": pidFile}, "timeout: 2s", WithClock(clock))
	res, done := invokeAsync(context.Background(), s)
	pid, _ := strconv.Atoi(waitFile(t, pidFile, done))
	select {
	case <-done:
		t.Fatal("Invoke returned before its timeout expired")
	default:
	}
	clock.Advance(2 * time.Second)
	r := awaitResult(t, res)
	var to *Timeout
	if !errors.As(r.err, &to) || to.Caller || to.After != 2*time.Second || to.Service != "svc" {
		t.Fatalf("Invoke error = %v (%T), want the service's own *Timeout after 2s", r.err, r.err)
	}
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, DeadlineExceeded) = false", r.err)
	}
	assertGone(t, pid)
}

func TestExecCallerDeadlineIsATimeout(t *testing.T) {
	t.Parallel()
	s := execService(t, "sleep 60", nil, "timeout: 120s")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := s.Invoke(ctx, testRequest())
	var to *Timeout
	if !errors.As(err, &to) || !to.Caller || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Invoke error = %v (%T), want a *Timeout from the caller's deadline", err, err)
	}
}

func TestExecCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	s := execService(t, grandchildScript, map[string]string{"PIDFILE": pidFile}, "timeout: 60s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, done := invokeAsync(ctx, s)
	pid, _ := strconv.Atoi(waitFile(t, pidFile, done))
	cancel()
	r := awaitResult(t, res)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Invoke error = %v, want context.Canceled", r.err)
	}
	var to *Timeout
	var f *Failure
	if errors.As(r.err, &to) || errors.As(r.err, &f) {
		t.Errorf("a cancellation must not look like a timeout or failure: %T", r.err)
	}
	assertGone(t, pid)
}

func TestExecCancelledBeforeStartRunsNothing(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	s := execService(t, `touch "$MARK"; echo '{}'`, map[string]string{"MARK": marker}, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Invoke(ctx, testRequest()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke error = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran although the context was already cancelled")
	}
}

func TestExecCancelReturnsWhileEscapedGrandchildHoldsPipes(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	// setsid moves the grandchild out of the process group, so killing the
	// group cannot close its copy of stdout and stderr.
	// The escaped process writes its own pid: setsid forks when it would
	// otherwise lead a group, and then $! is a setsid that has exited.
	s := execService(t, `setsid sh -c 'echo $$ > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE" && exec sleep 30' &
wait
`, map[string]string{"PIDFILE": pidFile}, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, done := invokeAsync(ctx, s)
	pid, _ := strconv.Atoi(waitFile(t, pidFile, done))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	cancel()
	// The escaped sleep keeps the pipes open for 30s; Invoke must not wait
	// for it.
	r := awaitResult(t, res)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Invoke error = %v, want context.Canceled", r.err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the escaped grandchild was expected to survive the group kill (it holds the pipes): %v", err)
	}
}

func TestExecSuccessKillsLeftoverGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The command answers and exits, leaving a background sleep (which also
	// holds stdout open): the answer counts, the sleep is killed.
	s := execService(t, `sleep 30 &
echo $! > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"
echo '{"ok":true}'
`, map[string]string{"PIDFILE": pidFile}, "timeout: 20s")
	out, err := s.Invoke(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"ok":true}` {
		t.Errorf("result = %s", out)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	assertGone(t, pid)
}

func TestExecGraceSendsSIGTERMFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ready, mark := filepath.Join(dir, "ready"), filepath.Join(dir, "term")
	s := execService(t, `trap 'echo term > "$MARK"; exit 0' TERM
echo ready > "$READY"
while :; do sleep 1; done
`, map[string]string{"READY": ready, "MARK": mark}, "grace: 20s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, done := invokeAsync(ctx, s)
	waitFile(t, ready, done)
	cancel()
	r := awaitResult(t, res)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Invoke error = %v, want context.Canceled", r.err)
	}
	if b, err := os.ReadFile(mark); err != nil || string(b) != "term\n" {
		t.Errorf("the command's TERM trap did not run (%q, %v)", b, err)
	}
}

func TestExecGraceEndsInSIGKILL(t *testing.T) {
	t.Parallel()
	ready := filepath.Join(t.TempDir(), "ready")
	// The script ignores SIGTERM; after the grace period SIGKILL ends it.
	s := execService(t, `trap '' TERM
echo ready > "$READY"
while :; do sleep 1; done
`, map[string]string{"READY": ready}, "grace: 100ms")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, done := invokeAsync(ctx, s)
	waitFile(t, ready, done)
	cancel()
	if r := awaitResult(t, res); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Invoke error = %v, want context.Canceled", r.err)
	}
}

func TestExecEnvAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := execService(t, `printf '{"pwd":"%s","a":"%s","attempt":"%s","wf":"%s","step":"%s"}' "$(pwd -P)" "$A" "$BEDWE_ATTEMPT" "$BEDWE_WORKFLOW_ID" "$BEDWE_STEP"`,
		map[string]string{"A": "b c"}, "dir: "+strconv.Quote(dir))
	out, err := s.Invoke(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	want := fmt.Sprintf(`{"pwd":"%s","a":"b c","attempt":"2","wf":"wf-1","step":"3/f1/0"}`, real)
	if string(out) != want {
		t.Errorf("result = %s, want %s", out, want)
	}
}

func TestExecCommandRemovedAfterLoad(t *testing.T) {
	t.Parallel()
	prog := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Parse([]byte(fmt.Sprintf("version: 1\nservices:\n  tool: {kind: exec, command: [%q]}\n", prog)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	s, _ := r.Lookup("tool")
	_, err = s.Invoke(context.Background(), testRequest())
	var f *Failure
	if !errors.As(err, &f) || !strings.Contains(f.Cause, "start "+prog) {
		t.Fatalf("Invoke error = %v, want a *Failure to start %s", err, prog)
	}
}
