package service

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Failure is a service attempt that ran, or could not be started, and failed.
// Retrying may help; the node decides.
type Failure struct {
	// Service is the service name.
	Service string
	// Cause says what went wrong, in words.
	Cause string
	// ExitCode is an exec command's exit status; -1 when the command did not
	// exit normally (killed by a signal, never started) or the service is not
	// exec.
	ExitCode int
	// Stderr is the tail of an exec command's standard error (at most
	// MaxStderr bytes).
	Stderr string
	// Status is an http service's response status code, 0 otherwise.
	Status int
	// Body is the tail of a failed http response body (at most MaxStderr
	// bytes).
	Body string
}

// MaxStderr bounds the standard error tail (and http body tail) kept in a
// Failure, in bytes.
const MaxStderr = 4 << 10

// errorTail bounds how much of Stderr or Body Error() prints.
const errorTail = 512

// Error describes the failure on one line.
func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "service %q failed: %s", f.Service, f.Cause)
	if f.Status != 0 {
		fmt.Fprintf(&b, " (HTTP status %d)", f.Status)
	}
	if s := lastBytes(f.Stderr, errorTail); s != "" {
		b.WriteString("; stderr: ")
		b.WriteString(strconv.Quote(s))
	}
	if s := lastBytes(f.Body, errorTail); s != "" {
		b.WriteString("; body: ")
		b.WriteString(strconv.Quote(s))
	}
	return b.String()
}

// Timeout is an attempt that ran out of time: the service's own per-attempt
// timeout or the caller's deadline. The service's work was stopped (for exec,
// its process group was killed). errors.Is(err, context.DeadlineExceeded)
// holds.
type Timeout struct {
	// Service is the service name.
	Service string
	// After is the time limit that expired: the configured timeout, or how
	// long the attempt ran when the caller's deadline expired.
	After time.Duration
	// Caller is true when the caller's deadline, not the service's own
	// timeout, expired.
	Caller bool
	// Stderr is the tail of an exec command's standard error, if any.
	Stderr string
}

// Error describes the timeout.
func (t *Timeout) Error() string {
	who := "its timeout"
	if t.Caller {
		who = "the caller's deadline"
	}
	msg := fmt.Sprintf("service %q timed out after %s (%s)", t.Service, t.After.Round(time.Millisecond), who)
	if s := lastBytes(t.Stderr, errorTail); s != "" {
		msg += "; stderr: " + strconv.Quote(s)
	}
	return msg
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) true.
func (t *Timeout) Unwrap() error { return context.DeadlineExceeded }

// lastBytes returns the last n bytes of s, trimmed of surrounding space.
func lastBytes(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + strings.ToValidUTF8(s[len(s)-n:], "")
	}
	return s
}
