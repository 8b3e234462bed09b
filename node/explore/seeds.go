package explore

import (
	"runtime"
	"slices"
	"sync"
	"time"
)

// Summary is what a batch of seeds found.
type Summary struct {
	Seeds        int      `json:"seeds"`
	Nodes        int      `json:"nodes"`
	Faults       int      `json:"faults"`
	Workflows    int      `json:"workflows"`
	Acked        int      `json:"acked"`
	Done         int      `json:"done"`
	FailedOnce   int      `json:"failed_once"`
	Executions   int      `json:"executions"`
	Reruns       int      `json:"reruns"`
	Events       uint64   `json:"events"`
	Violations   int      `json:"violations"`
	FailingSeeds []Result `json:"failing_seeds,omitempty"`
	// RerouteP50 and RerouteP99 (milliseconds): how long a position whose
	// holder was killed waited until a live holder started it again.
	RerouteP50 float64 `json:"reroute_ms_p50"`
	RerouteP99 float64 `json:"reroute_ms_p99"`
	Reroutes   int     `json:"reroutes"`
	// Seconds and SeedsPerSecond are the wall time the batch took, filled
	// in by the caller that timed it (the explorer reads no clock).
	Seconds        float64 `json:"seconds"`
	SeedsPerSecond float64 `json:"seeds_per_second"`
}

// Timed fills in the batch's wall time.
func (s *Summary) Timed(d time.Duration) {
	s.Seconds = d.Seconds()
	if s.Seconds > 0 {
		s.SeedsPerSecond = float64(s.Seeds) / s.Seconds
	}
}

// Seeds runs seeds first to first+count-1 on workers goroutines (0: one
// per CPU), each seed on its own simulator, and sums them up; progress,
// when set, is called after each seed with how many are done.
func Seeds(first uint64, count int, workers int, o Options, progress func(done int)) Summary {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	o.defaults()
	results := make([]Result, count)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = Run(first+uint64(i), o)
				if progress != nil {
					mu.Lock()
					done++
					progress(done)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	s := Summary{Seeds: count, Nodes: o.Nodes}
	var reroutes []time.Duration
	for _, r := range results {
		reroutes = append(reroutes, r.Reroutes...)
		s.Faults += r.Faults
		s.Workflows += r.Workflows
		s.Acked += r.Acked
		s.Done += r.Done
		s.FailedOnce += r.Failed
		s.Executions += r.Executions
		s.Reruns += r.Reruns
		s.Events += r.Events
		if len(r.Violations) > 0 {
			s.Violations += len(r.Violations)
			if len(s.FailingSeeds) < 10 {
				s.FailingSeeds = append(s.FailingSeeds, r)
			}
		}
	}
	if len(reroutes) > 0 {
		slices.Sort(reroutes)
		s.Reroutes = len(reroutes)
		s.RerouteP50 = float64(reroutes[len(reroutes)/2].Microseconds()) / 1000
		s.RerouteP99 = float64(reroutes[len(reroutes)*99/100].Microseconds()) / 1000
	}
	return s
}
