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
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// pipeGrace is how long an exec attempt waits for the command's output pipes
// to close after the command exited or was killed: a grandchild that escaped
// the process group may hold them open, and Invoke must still return.
const pipeGrace = time.Second

// execRunner runs a command in its own process group, with the JSON request
// on stdin and the JSON result on stdout.
type execRunner struct {
	path  string        // absolute path, resolved at load time
	args  []string      // arguments after the program
	env   []string      // KEY=VALUE added to the node's environment
	dir   string        // working directory; "" = the node's
	grace time.Duration // SIGTERM before SIGKILL; 0 = SIGKILL at once
	// maxOutput bounds stdout; MaxOutput except in tests.
	maxOutput int
}

func newExecRunner(path string, args, env []string, dir string, grace time.Duration) (runner, error) {
	return &execRunner{path: path, args: args, env: env, dir: dir, grace: grace, maxOutput: MaxOutput}, nil
}

func (e *execRunner) kind() string { return KindExec }

func (e *execRunner) run(ctx context.Context, req Request) ([]byte, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, &Failure{Cause: fmt.Sprintf("encode request: %v", err), ExitCode: -1}
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	cmd := exec.CommandContext(runCtx, e.path, e.args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), e.env...)
	cmd.Env = append(cmd.Env,
		"BEDWE_SERVICE="+req.Service,
		"BEDWE_WORKFLOW_ID="+req.WorkflowID,
		"BEDWE_STEP="+req.Step,
		"BEDWE_ATTEMPT="+strconv.Itoa(req.Attempt),
		"BEDWE_IDEMPOTENCY_KEY="+req.IdempotencyKey,
	)
	cmd.Stdin = bytes.NewReader(in)
	stdout := &capBuffer{max: e.maxOutput, onExceed: func() { stop(errOutputTooLarge) }}
	stderr := &tailBuffer{max: MaxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var graceTimer atomic.Pointer[time.Timer]
	cmd.Cancel = func() error { return e.interrupt(cmd.Process.Pid, &graceTimer) }
	cmd.WaitDelay = e.grace + pipeGrace

	if err := cmd.Start(); err != nil {
		return nil, &Failure{Cause: fmt.Sprintf("start %s: %v", e.path, err), ExitCode: -1}
	}
	pgid := cmd.Process.Pid // Setpgid: the group is named after the leader
	werr := cmd.Wait()
	if t := graceTimer.Load(); t != nil {
		t.Stop()
	}
	// Whatever the command left running in its group dies with it.
	killGroup(pgid)

	if stdout.exceeded {
		return nil, &Failure{Cause: fmt.Sprintf("output exceeds %d bytes", e.maxOutput), ExitCode: -1, Stderr: stderr.String()}
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(werr, &exitErr):
		return nil, exitFailure(exitErr, stderr.String())
	case werr == nil, errors.Is(werr, exec.ErrWaitDelay):
		// Exited with status 0 (perhaps leaving a grandchild that held the
		// pipes until they were closed).
	default:
		return nil, &Failure{Cause: werr.Error(), ExitCode: -1, Stderr: stderr.String()}
	}
	obj, bad := asObject(stdout.buf.Bytes())
	if bad != "" {
		return nil, &Failure{Cause: bad, ExitCode: 0, Stderr: stderr.String()}
	}
	return obj, nil
}

// exitFailure describes a command that exited unsuccessfully.
func exitFailure(ee *exec.ExitError, stderr string) *Failure {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &Failure{Cause: "killed by signal " + ws.Signal().String(), ExitCode: -1, Stderr: stderr}
	}
	code := ee.ExitCode()
	return &Failure{Cause: "exit status " + strconv.Itoa(code), ExitCode: code, Stderr: stderr}
}

// interrupt stops the process group led by pid: SIGKILL at once, or SIGTERM
// and SIGKILL after the grace period.
func (e *execRunner) interrupt(pid int, graceTimer *atomic.Pointer[time.Timer]) error {
	sig := syscall.SIGKILL
	if e.grace > 0 {
		sig = syscall.SIGTERM
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("signal process group %d: %w", pid, err)
	}
	if e.grace > 0 {
		graceTimer.Store(time.AfterFunc(e.grace, func() { killGroup(pid) }))
	}
	return nil
}

// killGroup sends SIGKILL to process group pgid; a group already gone is
// fine.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
