package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
)

// runner is the kind-specific part of a service. run returns the raw result
// or an error; bound turns errors into the package's error types.
type runner interface {
	kind() string
	run(ctx context.Context, req Request) ([]byte, error)
}

// errAttemptTimeout is the cancellation cause of a context whose per-attempt
// timeout expired.
var errAttemptTimeout = errors.New("service attempt timeout")

// bound is a runner bound to a service name, with the settings every kind
// shares. It is the Service that Lookup returns.
type bound struct {
	name    string
	r       runner
	timeout time.Duration // per attempt; 0 = none
	expect  time.Duration
	clock   clockwork.Clock // measures timeout
	rec     *recorder       // nil: attempts are not recorded
	// maxConcurrent is the declaration's limit on concurrent executions
	// (0: none); group names the declaration it belongs to.
	maxConcurrent int
	group         string
}

// Kind implements Service.
func (b *bound) Kind() string { return b.r.kind() }

// Expect implements Service.
func (b *bound) Expect() time.Duration { return b.expect }

// Invoke implements Service: it records the attempt (when the file names a
// record file), applies the per-attempt timeout, runs the service, classifies
// errors and checks that the result is a JSON object. An attempt that cannot
// be recorded is not run.
func (b *bound) Invoke(ctx context.Context, req Request) (json.RawMessage, error) {
	if req.Service == "" {
		req.Service = b.name
	}
	if ctx.Err() != nil {
		return nil, b.interrupted(ctx, 0, nil)
	}
	if b.rec != nil {
		if err := b.rec.record(b.name, req); err != nil {
			return nil, &Failure{Service: b.name, Cause: err.Error(), ExitCode: -1}
		}
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if b.timeout > 0 {
		t := b.clock.AfterFunc(b.timeout, func() { cancel(errAttemptTimeout) })
		defer t.Stop()
	}
	start := b.clock.Now()
	out, err := b.r.run(runCtx, req)
	if err != nil {
		if ctx.Err() != nil || context.Cause(runCtx) == errAttemptTimeout {
			return nil, b.interrupted(ctx, b.clock.Since(start), err)
		}
		var f *Failure
		if errors.As(err, &f) {
			f.Service = b.name
			return nil, f
		}
		return nil, &Failure{Service: b.name, Cause: err.Error(), ExitCode: -1}
	}
	obj, bad := asObject(out)
	if bad != "" {
		return nil, &Failure{Service: b.name, Cause: bad, ExitCode: -1}
	}
	return obj, nil
}

// interrupted builds the error for an attempt stopped by the caller's
// context or by its own timeout; ctx is the caller's context, err what the
// runner returned (it may carry a stderr tail).
func (b *bound) interrupted(ctx context.Context, ran time.Duration, err error) error {
	var stderr string
	var f *Failure
	if errors.As(err, &f) {
		stderr = f.Stderr
	}
	switch {
	case ctx.Err() == nil: // the attempt's own timeout
		return &Timeout{Service: b.name, After: b.timeout, Stderr: stderr}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Timeout{Service: b.name, After: ran, Caller: true, Stderr: stderr}
	default:
		if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
			return fmt.Errorf("service %q cancelled (%v): %w", b.name, cause, ctx.Err())
		}
		return fmt.Errorf("service %q cancelled: %w", b.name, ctx.Err())
	}
}

// DeclaredTimeout returns the per-attempt timeout that the services file
// declared for svc (a services entry's or pattern's timeout), or 0 when it
// declared none or svc did not come from a services file. Invoke enforces it
// itself and reports its expiry as a *Timeout; a caller that applies a
// default deadline only to services without one of their own reads it here.
func DeclaredTimeout(svc Service) time.Duration {
	if b, ok := svc.(*bound); ok {
		return b.timeout
	}
	return 0
}

// Func adapts a Go function to a Service, for embedding bedwe and for tests.
// The function's result must be a JSON object; a non-object result becomes a
// *Failure. Errors from fn are returned as they are.
func Func(kind string, expect time.Duration, fn func(ctx context.Context, req Request) (json.RawMessage, error)) Service {
	return &funcService{kindName: kind, expect: expect, fn: fn}
}

type funcService struct {
	kindName string
	expect   time.Duration
	fn       func(ctx context.Context, req Request) (json.RawMessage, error)
}

func (s *funcService) Kind() string          { return s.kindName }
func (s *funcService) Expect() time.Duration { return s.expect }

func (s *funcService) Invoke(ctx context.Context, req Request) (json.RawMessage, error) {
	out, err := s.fn(ctx, req)
	if err != nil {
		return nil, err
	}
	obj, bad := asObject(out)
	if bad != "" {
		return nil, &Failure{Service: req.Service, Cause: bad, ExitCode: -1}
	}
	return obj, nil
}
