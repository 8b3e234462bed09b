package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// lookup parses src and returns the service called name.
func lookup(t testing.TB, src, name string, opts ...Option) Service {
	t.Helper()
	r, err := Parse([]byte(src), opts...)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("%s not declared", name)
	}
	return s
}

func TestSleepWaitsForTheClock(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	s := lookup(t, "version: 1\nservices:\n  S1: {kind: sleep, duration: 50ms}\n", "S1", WithClock(clock))
	res, done := invokeAsync(context.Background(), s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("sleep never started its timer: %v", err)
	}
	clock.Advance(49 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("sleep returned before its duration passed")
	default:
	}
	clock.Advance(time.Millisecond)
	r := awaitResult(t, res)
	if r.err != nil || string(r.out) != `{"slept_ms":50}` {
		t.Fatalf("Invoke = %s, %v; want {\"slept_ms\":50}", r.out, r.err)
	}
}

func TestSleepHonoursCancel(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	s := lookup(t, "version: 1\nservices:\n  S1: {kind: sleep, duration: 1h}\n", "S1", WithClock(clock))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, _ := invokeAsync(ctx, s)
	bctx, bcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer bcancel()
	if err := clock.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := awaitResult(t, res); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Invoke error = %v, want context.Canceled", r.err)
	}
}

func TestSleepTimeout(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	s := lookup(t, "version: 1\nservices:\n  S1: {kind: sleep, duration: 1h, timeout: 50ms}\n", "S1", WithClock(clock))
	res, _ := invokeAsync(context.Background(), s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 2); err != nil { // the timeout and the sleep
		t.Fatal(err)
	}
	clock.Advance(50 * time.Millisecond)
	err := awaitResult(t, res).err
	var to *Timeout
	if !errors.As(err, &to) || to.After != 50*time.Millisecond || to.Service != "S1" {
		t.Fatalf("Invoke error = %v, want *Timeout after 50ms", err)
	}
	if want := `service "S1" timed out after 50ms (its timeout)`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestSleepFromRequest(t *testing.T) {
	t.Parallel()
	src := `version: 1
services:
  plain: {kind: sleep, from_request: true, duration: 10ms}
  scaled: {kind: sleep, from_request: true, scale: 0.01, max: 5s, field: runtime_ms}
`
	r, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		service string
		attrs   map[string]string
		input   string
		want    time.Duration
		err     string
	}{
		{name: "attribute", service: "plain", attrs: map[string]string{"sleep": "1.5s"}, input: `{"sleep_ms": 99}`, want: 1500 * time.Millisecond},
		{name: "input number", service: "plain", input: `{"sleep_ms": 250}`, want: 250 * time.Millisecond},
		{name: "input fraction", service: "plain", input: `{"sleep_ms": 0.5}`, want: 500 * time.Microsecond},
		{name: "input by service", service: "plain", input: `{"sleep_ms": {"plain": 30, "other": 40}}`, want: 30 * time.Millisecond},
		{name: "input by service, absent", service: "plain", input: `{"sleep_ms": {"other": 40}}`, want: 10 * time.Millisecond},
		{name: "nothing requested", service: "plain", input: `{"n": 1}`, want: 10 * time.Millisecond},
		{name: "input not an object", service: "plain", input: `[1]`, want: 10 * time.Millisecond},
		{name: "no input", service: "plain", want: 10 * time.Millisecond},
		{name: "scaled", service: "scaled", input: `{"runtime_ms": 13200}`, want: 132 * time.Millisecond},
		{name: "capped", service: "scaled", attrs: map[string]string{"sleep": "1h"}, want: 5 * time.Second},
		{name: "bad attribute", service: "plain", attrs: map[string]string{"sleep": "soon"}, err: `attribute sleep="soon": want a non-negative duration`},
		{name: "negative input", service: "plain", input: `{"sleep_ms": -5}`, err: "input.sleep_ms: want a non-negative number of milliseconds, got \"-5\""},
		{name: "string input", service: "plain", input: `{"sleep_ms": {"plain": "5"}}`, err: "input.sleep_ms.plain: want a non-negative number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := r.Lookup(tt.service)
			sr := s.(*bound).r.(*sleepRunner)
			req := Request{Service: tt.service, Attrs: tt.attrs, Input: json.RawMessage(tt.input)}
			got, err := sr.wait(req)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("wait error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("wait = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestEchoShape(t *testing.T) {
	t.Parallel()
	s := lookup(t, "version: 1\nservices:\n  S2: {kind: echo}\n", "S2")
	req := testRequest()
	req.Outputs["A"] = json.RawMessage(`{}`)
	out, err := s.Invoke(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"echo":{"workflow_id":"wf-1","step":"3/f1/0","service":"S2","attempt":2,"idempotency_key":"wf-1:3/f1/0:2","input":{"n":7}},"outputs":["A","S1"]}`
	if string(out) != want {
		t.Errorf("echo =\n%s\nwant\n%s", out, want)
	}
	out, err = s.Invoke(context.Background(), Request{})
	if err != nil || !strings.Contains(string(out), `"input":null`) || !strings.Contains(string(out), `"outputs":[]`) {
		t.Errorf("echo of an empty request = %s, %v", out, err)
	}
}

func TestFailExtremes(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte("version: 1\nservices:\n  never: {kind: fail, probability: 0}\n  always: {kind: fail, probability: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	never, _ := r.Lookup("never")
	always, _ := r.Lookup("always")
	for i := range 100 {
		req := Request{IdempotencyKey: fmt.Sprint(i)}
		if out, err := never.Invoke(context.Background(), req); err != nil || string(out) != `{"ok":true}` {
			t.Fatalf("probability 0 gave %s, %v", out, err)
		}
		_, err := always.Invoke(context.Background(), req)
		var f *Failure
		if !errors.As(err, &f) || f.Cause != "injected failure (probability 1)" || f.Service != "always" {
			t.Fatalf("probability 1 gave %v", err)
		}
	}
}

// failOutcomes invokes a fail service for n distinct idempotency keys and
// records which failed.
func failOutcomes(t *testing.T, src string, n int) []bool {
	s := lookup(t, src, "flaky")
	out := make([]bool, n)
	for i := range out {
		_, err := s.Invoke(context.Background(), Request{IdempotencyKey: IdempotencyKey("wf", "0", i+1)})
		out[i] = err != nil
	}
	return out
}

func TestFailSeededIsReproducible(t *testing.T) {
	t.Parallel()
	const n = 10000
	seed1 := "version: 1\nservices:\n  flaky: {kind: fail, probability: 0.3, seed: 1}\n"
	a, b := failOutcomes(t, seed1, n), failOutcomes(t, seed1, n)
	c := failOutcomes(t, "version: 1\nservices:\n  flaky: {kind: fail, probability: 0.3, seed: 2}\n", n)
	failed, differ := 0, 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("attempt %d: same seed and key gave different outcomes", i+1)
		}
		if a[i] {
			failed++
		}
		if a[i] != c[i] {
			differ++
		}
	}
	// Deterministic given the seed; the bounds check the draw is uniform.
	if failed < n*27/100 || failed > n*33/100 {
		t.Errorf("%d of %d failed, want about 30%%", failed, n)
	}
	if differ < n/5 {
		t.Errorf("seeds 1 and 2 differ in only %d of %d outcomes", differ, n)
	}
}

func TestFailConcurrentWithoutKeys(t *testing.T) {
	t.Parallel()
	s := lookup(t, "version: 1\nservices:\n  flaky: {kind: fail, probability: 0.5, seed: 3}\n", "flaky")
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int
	)
	const workers, each = 8, 500
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := s.Invoke(context.Background(), Request{}); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// The seeded stream is shared: the total is the same whatever the
	// interleaving.
	if failed < workers*each*40/100 || failed > workers*each*60/100 {
		t.Errorf("%d of %d failed, want about half", failed, workers*each)
	}
}
