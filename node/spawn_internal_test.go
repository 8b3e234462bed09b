package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSpawnStartsNothingOnceStopping spawns tasks from several goroutines
// while the node stops, as presence greetings do at shutdown: nothing
// spawned after stopTasks began may run, and (under the race detector)
// no Add may race the WaitGroup's Wait. A task spawned then and started
// would add to the WaitGroup being waited on, and the runtime would panic
// ("WaitGroup is reused before previous Wait has returned").
func TestSpawnStartsNothingOnceStopping(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := &Node{ctx: ctx}
	var ran atomic.Int64
	task := func(context.Context) { ran.Add(1) }
	done := make(chan struct{})
	var spawners sync.WaitGroup
	for range 4 {
		spawners.Add(1)
		go func() {
			defer spawners.Done()
			for {
				select {
				case <-done:
					return
				default:
					n.spawn(task)
				}
			}
		}()
	}
	for ran.Load() < 100 {
		// Let the spawners get going.
	}
	n.stopTasks()
	after := ran.Load()
	n.spawn(task)
	close(done)
	spawners.Wait()
	if got := ran.Load(); got != after {
		t.Fatalf("%d tasks ran after the node stopped", got-after)
	}
}
