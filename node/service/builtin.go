package service

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// sleepRunner waits, then returns {"slept_ms": N}. It honours cancellation.
type sleepRunner struct {
	clock       clockwork.Clock
	duration    time.Duration // fixed time, or the fallback with fromRequest
	fromRequest bool
	field       string  // input field read with fromRequest
	scale       float64 // multiplies times read from the request
	max         time.Duration
}

// AttrSleep is the request attribute a from_request sleep reads first
// (Request.Attrs["sleep"] = "1.5s"), for embedders that build requests
// themselves. The workflow language has no sleep attribute (its parser
// accepts only timeout, retries, backoff, once, out and expect), so a
// workflow names the time in its input instead: {"sleep_ms": 1500}, or
// {"sleep_ms": {"S1": 1500}} for one service.
const AttrSleep = "sleep"

// DefaultSleepField is the input field a from_request sleep reads when the
// file names none.
const DefaultSleepField = "sleep_ms"

func (s *sleepRunner) kind() string { return KindSleep }

func (s *sleepRunner) run(ctx context.Context, req Request) ([]byte, error) {
	d, err := s.wait(req)
	if err != nil {
		return nil, err
	}
	if d > 0 {
		t := s.clock.NewTimer(d)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	return fmt.Appendf(nil, `{"slept_ms":%d}`, d.Milliseconds()), nil
}

// wait is how long to sleep for req.
func (s *sleepRunner) wait(req Request) (time.Duration, error) {
	if !s.fromRequest {
		return s.duration, nil
	}
	d, found, err := requestedSleep(req, s.field)
	if err != nil {
		return 0, &Failure{Cause: err.Error(), ExitCode: -1}
	}
	if !found {
		return s.duration, nil
	}
	d = time.Duration(float64(d) * s.scale)
	if s.max > 0 && d > s.max {
		d = s.max
	}
	return d, nil
}

// requestedSleep reads the sleep time from the step attribute, else from the
// input field (milliseconds, or an object of milliseconds by service name).
func requestedSleep(req Request, field string) (time.Duration, bool, error) {
	if v, ok := req.Attrs[AttrSleep]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, false, fmt.Errorf("attribute %s=%q: want a non-negative duration like 1.5s", AttrSleep, v)
		}
		return d, true, nil
	}
	if len(req.Input) == 0 || req.Input[0] != '{' {
		return 0, false, nil
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(req.Input, &in); err != nil {
		return 0, false, nil
	}
	raw, ok := in[field]
	if !ok {
		return 0, false, nil
	}
	if len(raw) > 0 && raw[0] == '{' {
		var byService map[string]json.RawMessage
		if err := json.Unmarshal(raw, &byService); err != nil {
			return 0, false, fmt.Errorf("input.%s: %w", field, err)
		}
		if raw, ok = byService[req.Service]; !ok {
			return 0, false, nil
		}
		field += "." + req.Service
	}
	var ms float64
	if err := json.Unmarshal(raw, &ms); err != nil || ms < 0 || math.IsInf(ms, 0) || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, false, fmt.Errorf("input.%s: want a non-negative number of milliseconds, got %s", field, snippet(raw))
	}
	return time.Duration(ms * float64(time.Millisecond)), true, nil
}

// echoRunner returns what the step saw:
//
//	{"echo": {"workflow_id", "step", "service", "attempt", "idempotency_key", "input"},
//	 "outputs": [labels of earlier outputs, sorted]}
//
// Earlier outputs are listed by label only, so a chain of echo steps does not
// grow its data exponentially.
type echoRunner struct{}

func (echoRunner) kind() string { return KindEcho }

type echoed struct {
	WorkflowID     string          `json:"workflow_id"`
	Step           string          `json:"step"`
	Service        string          `json:"service"`
	Attempt        int             `json:"attempt"`
	IdempotencyKey string          `json:"idempotency_key"`
	Input          json.RawMessage `json:"input"`
}

func (echoRunner) run(_ context.Context, req Request) ([]byte, error) {
	labels := make([]string, 0, len(req.Outputs))
	for l := range req.Outputs {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	out := struct {
		Echo    echoed   `json:"echo"`
		Outputs []string `json:"outputs"`
	}{
		Echo: echoed{
			WorkflowID: req.WorkflowID, Step: req.Step, Service: req.Service,
			Attempt: req.Attempt, IdempotencyKey: req.IdempotencyKey, Input: req.Input,
		},
		Outputs: labels,
	}
	if len(out.Echo.Input) == 0 {
		out.Echo.Input = json.RawMessage("null")
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, &Failure{Cause: fmt.Sprintf("encode echo: %v", err), ExitCode: -1}
	}
	return b, nil
}

// failRunner fails with a given probability, else returns {"ok": true}.
//
// With a seed, the draw for a request with an idempotency key is a hash of
// the seed and the key: the same attempt fails or succeeds the same way on
// every peer and in every run, and a retry (a new attempt, a new key) draws
// again. Requests without a key draw from a seeded stream.
type failRunner struct {
	probability float64
	seeded      bool
	seed        int64

	mu  sync.Mutex
	rng *rand.Rand // guarded by mu
}

func newFailRunner(probability float64, seed int64, seeded bool) *failRunner {
	f := &failRunner{probability: probability, seed: seed, seeded: seeded}
	if seeded {
		f.rng = rand.New(rand.NewPCG(uint64(seed), 0x6265647765)) // "bedwe"
	} else {
		f.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return f
}

func (f *failRunner) kind() string { return KindFail }

func (f *failRunner) run(_ context.Context, req Request) ([]byte, error) {
	if f.draw(req.IdempotencyKey) < f.probability {
		return nil, &Failure{Cause: "injected failure (probability " + strconv.FormatFloat(f.probability, 'g', -1, 64) + ")", ExitCode: -1}
	}
	return []byte(`{"ok":true}`), nil
}

// draw returns a number in [0, 1).
func (f *failRunner) draw(key string) float64 {
	if f.seeded && key != "" {
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(f.seed))
		h.Write(b[:])
		h.Write([]byte(key))
		// Mix the FNV sum (weak in its high bits for short inputs) before
		// taking 53 bits of it.
		return float64(splitmix(h.Sum64())>>11) / (1 << 53)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64()
}

// splitmix is the SplitMix64 finaliser.
func splitmix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
