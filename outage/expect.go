package outage

import (
	"math"
	"slices"
	"sync"
	"time"
)

// maxServices bounds how many services the view learns about; Learn
// ignores new names beyond it, so a stream of odd service names cannot
// grow memory without bound.
const maxServices = 4096

// expectQuantile is the quantile of recent run times Expected reports. The
// question it answers is "will the step finish before the cut", so an upper
// estimate is wanted: the median would be too short half the time and leave
// all of that to Margin.
const expectQuantile = 0.9

// expectations learns run times per service.
type expectations struct {
	cfg      Config
	mu       sync.Mutex
	services map[string]*samples
}

// samples is a ring of the last Config.Samples run times.
type samples struct {
	ring []time.Duration
	next int
}

// Learn records that a step of service took took (on the view's clock: a
// node with a virtual clock converts real run time with Virtual). Failed
// or cancelled runs should not be learned.
func (v *View) Learn(service string, took time.Duration) {
	if took < 0 {
		return
	}
	e := &v.learn
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.services[service]
	if s == nil {
		if len(e.services) >= maxServices {
			return
		}
		s = &samples{ring: make([]time.Duration, 0, e.cfg.Samples)}
		e.services[service] = s
	}
	if len(s.ring) < e.cfg.Samples {
		s.ring = append(s.ring, took)
		return
	}
	s.ring[s.next] = took
	s.next = (s.next + 1) % len(s.ring)
}

// Expected is how long a step of service should be assumed to take:
//
//   - the declared time (the step's expect= attribute, 0 if none) while
//     fewer than MinSamples runs have been learned;
//   - otherwise the 90th percentile (nearest rank) of the last Samples
//     runs, so the view follows a service that got slower or faster;
//   - with neither a declaration nor a sample, DefaultExpected.
//
// With no declaration but a few samples it uses the few samples.
func (v *View) Expected(service string, declared time.Duration) time.Duration {
	e := &v.learn
	e.mu.Lock()
	var xs []time.Duration
	if s := e.services[service]; s != nil {
		xs = slices.Clone(s.ring)
	}
	e.mu.Unlock()
	switch {
	case declared > 0 && len(xs) < v.cfg.MinSamples:
		return declared
	case len(xs) == 0:
		return v.cfg.DefaultExpected
	}
	slices.Sort(xs)
	// Nearest rank: the smallest sample with at least q of them at or below.
	// (The epsilon keeps 0.9 x 10 from rounding up to a rank of 10.)
	rank := int(math.Ceil(expectQuantile*float64(len(xs))-1e-9)) - 1
	return xs[min(max(rank, 0), len(xs)-1)]
}
