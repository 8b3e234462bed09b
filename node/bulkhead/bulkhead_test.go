package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bedwe/bedwe/node/bulkhead"
)

// TestLimits runs many steps of two groups at once and checks that the
// node limit and each group's limit hold at every moment.
func TestLimits(t *testing.T) {
	const nodeLimit, groupLimit = 5, 2
	b, err := bulkhead.New(nodeLimit, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var total, maxTotal, inA, maxA atomic.Int64
	raise := func(m *atomic.Int64, v int64) {
		for {
			old := m.Load()
			if v <= old || m.CompareAndSwap(old, v) {
				return
			}
		}
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			group, limit := "b", 0
			if i%2 == 0 {
				group, limit = "a", groupLimit
			}
			release, err := b.Acquire(context.Background(), fmt.Sprint(i), group, limit)
			if err != nil {
				t.Error(err)
				return
			}
			raise(&maxTotal, total.Add(1))
			if group == "a" {
				raise(&maxA, inA.Add(1))
			}
			if s := b.Stats(); s.Running > nodeLimit {
				t.Errorf("stats: %d running, limit %d", s.Running, nodeLimit)
			}
			for range 1000 { // a little work while holding the slot
				_ = b.Stats()
			}
			if group == "a" {
				inA.Add(-1)
			}
			total.Add(-1)
			release()
			release() // twice is harmless
		})
	}
	wg.Wait()
	if maxTotal.Load() > nodeLimit || maxA.Load() > groupLimit {
		t.Errorf("at most %d ran at once (limit %d), %d of group a (limit %d)", maxTotal.Load(), nodeLimit, maxA.Load(), groupLimit)
	}
	if s := b.Stats(); s.Running != 0 || s.Queued != 0 || s.Free() != nodeLimit {
		t.Errorf("after all: %+v", s)
	}
}

// TestLimitReached: limit steps hold their slots at once, and one more
// waits (a wait whose context has ended takes nothing).
func TestLimitReached(t *testing.T) {
	const limit = 3
	b, err := bulkhead.New(limit, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, done := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for i := range limit {
		wg.Go(func() {
			release, err := b.Acquire(context.Background(), fmt.Sprint(i), "", 0)
			if err != nil {
				t.Error(err)
				return
			}
			held <- struct{}{}
			<-done
			release()
		})
	}
	for range limit {
		<-held
	}
	if s := b.Stats(); s.Running != limit || s.Free() != 0 {
		t.Errorf("%d holding: %+v", limit, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(ctx, "more", "", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire beyond the limit: %v, want it to wait (and end with its context)", err)
	}
	close(done)
	wg.Wait()
	if s := b.Stats(); s.Running != 0 || s.Queued != 0 {
		t.Errorf("after all: %+v", s)
	}
}

// TestAdmit fills the bulkhead (limit 1 + queue 1): the next step is
// refused, the same step is admitted again without a new place, and a
// place given back is reused.
func TestAdmit(t *testing.T) {
	changes, calls := 0, 0
	b, err := bulkhead.New(1, 1, func(filledOrFreed bool) {
		calls++
		if filledOrFreed {
			changes++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"x", "y"} {
		if added, ok := b.Admit(k); !added || !ok {
			t.Fatalf("admit %s: added %v ok %v", k, added, ok)
		}
	}
	if added, ok := b.Admit("x"); added || !ok {
		t.Errorf("admit x again: added %v ok %v, want false true", added, ok)
	}
	if _, ok := b.Admit("z"); ok {
		t.Error("admit z when full: ok")
	}
	if s := b.Stats(); s.Room() != 0 || s.Queued != 2 || s.Free() != 1 {
		t.Errorf("full: %+v", s)
	}
	if changes != 1 || calls != 2 {
		t.Errorf("%d fills or frees and %d calls reported, want 1 (full) and 2 (x and y admitted)", changes, calls)
	}
	b.Leave("y")
	b.Leave("y")
	if _, ok := b.Admit("z"); !ok {
		t.Error("admit z after y left: refused")
	}
	// x gets its slot and leaves the queue; x running and z waiting fill
	// the bulkhead still.
	release, err := b.Acquire(context.Background(), "x", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Queued != 1 || s.Running != 1 || s.Free() != 0 || s.Room() != 0 {
		t.Errorf("x running: %+v", s)
	}
	if _, ok := b.Admit("w"); ok {
		t.Error("admit w with x running and z waiting: ok")
	}
	release()
	if s := b.Stats(); s.Room() != 1 {
		t.Errorf("x done: %+v", s)
	}
}

// TestCancelledWait: a wait that ends with its context takes nothing.
func TestCancelledWait(t *testing.T) {
	b, err := bulkhead.New(1, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	release, err := b.Acquire(context.Background(), "a", "g", 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, "b", "g", 1)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	release()
	if s := b.Stats(); s.Running != 0 || s.Queued != 0 {
		t.Errorf("after the cancelled wait: %+v", s)
	}
	r2, err := b.Acquire(context.Background(), "c", "g", 1)
	if err != nil {
		t.Fatal(err)
	}
	r2()
}

// TestNew rejects limits that cannot work.
func TestNew(t *testing.T) {
	if _, err := bulkhead.New(0, 1, nil); err == nil {
		t.Error("limit 0 accepted")
	}
	if _, err := bulkhead.New(1, -1, nil); err == nil {
		t.Error("queue -1 accepted")
	}
}
