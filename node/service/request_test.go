package service

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestIdempotencyKey(t *testing.T) {
	if got := IdempotencyKey("wf-9", "3/f1/0", 4); got != "wf-9:3/f1/0:4" {
		t.Errorf("IdempotencyKey = %q", got)
	}
	if IdempotencyKey("w", "1", 1) == IdempotencyKey("w", "1", 2) {
		t.Error("a retry must get a new key")
	}
}

func TestAsObject(t *testing.T) {
	tests := []struct {
		in, want, bad string
	}{
		{in: ` {"a":1}` + "\n", want: `{"a":1}`},
		{in: `{}`, want: `{}`},
		{in: ``, bad: "output is empty"},
		{in: "  \n", bad: "output is empty"},
		{in: `null`, bad: "not an object"},
		{in: `"s"`, bad: "not an object"},
		{in: `{"a":1}{"b":2}`, bad: "not valid JSON"},
		{in: `{"a":}`, bad: "not valid JSON"},
		{in: `ok`, bad: "not JSON"},
	}
	for _, tt := range tests {
		got, bad := asObject([]byte(tt.in))
		if string(got) != tt.want || !strings.Contains(bad, tt.bad) || (tt.bad == "") != (bad == "") {
			t.Errorf("asObject(%q) = %q, %q; want %q, %q", tt.in, got, bad, tt.want, tt.bad)
		}
	}
}

func TestErrorTypes(t *testing.T) {
	f := &Failure{Service: "resize", Cause: "exit status 2", ExitCode: 2, Stderr: strings.Repeat("x", 2000) + "\nno such image\n"}
	msg := f.Error()
	if !strings.HasPrefix(msg, `service "resize" failed: exit status 2; stderr: "...`) || !strings.HasSuffix(msg, `no such image"`) || len(msg) > 600 {
		t.Errorf("Failure.Error() = %q", msg)
	}
	h := &Failure{Service: "notify", Cause: "POST http://x: 503 Service Unavailable", ExitCode: -1, Status: 503, Body: "busy"}
	if want := `service "notify" failed: POST http://x: 503 Service Unavailable (HTTP status 503); body: "busy"`; h.Error() != want {
		t.Errorf("Failure.Error() = %q, want %q", h.Error(), want)
	}
	to := &Timeout{Service: "S1", After: 1500 * time.Millisecond, Caller: true}
	if want := `service "S1" timed out after 1.5s (the caller's deadline)`; to.Error() != want {
		t.Errorf("Timeout.Error() = %q, want %q", to.Error(), want)
	}
	if !errors.Is(to, context.DeadlineExceeded) || errors.Is(f, context.DeadlineExceeded) {
		t.Error("only a Timeout is a DeadlineExceeded")
	}
}

func TestCancelCauseIsKept(t *testing.T) {
	s := lookup(t, "version: 1\nservices:\n  S2: {kind: echo}\n", "S2")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("another FIRST arm won"))
	_, err := s.Invoke(ctx, Request{})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "another FIRST arm won") {
		t.Errorf("Invoke error = %v, want context.Canceled naming the cause", err)
	}
}
