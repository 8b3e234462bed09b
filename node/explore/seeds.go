package explore

import (
	"runtime"
	"sync"
	"time"
)

// Summary is what a batch of seeds found.
type Summary struct {
	Seeds          int      `json:"seeds"`
	Nodes          int      `json:"nodes"`
	Faults         int      `json:"faults"`
	Workflows      int      `json:"workflows"`
	Acked          int      `json:"acked"`
	Done           int      `json:"done"`
	FailedOnce     int      `json:"failed_once"`
	Executions     int      `json:"executions"`
	Reruns         int      `json:"reruns"`
	Events         uint64   `json:"events"`
	Violations     int      `json:"violations"`
	FailingSeeds   []Result `json:"failing_seeds,omitempty"`
	Seconds        float64  `json:"seconds"`
	SeedsPerSecond float64  `json:"seeds_per_second"`
}

// Seeds runs seeds first to first+count-1 on workers goroutines (0: one
// per CPU), each seed on its own simulator, and sums them up; progress,
// when set, is called after each seed with how many are done.
func Seeds(first uint64, count int, workers int, o Options, progress func(done int)) Summary {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	o.defaults()
	start := time.Now()
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
	for _, r := range results {
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
	s.Seconds = time.Since(start).Seconds()
	if s.Seconds > 0 {
		s.SeedsPerSecond = float64(count) / s.Seconds
	}
	return s
}
