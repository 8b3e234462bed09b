// Package bulkhead bounds how many steps a node executes at once (the
// Bulkhead pattern): one limit for the whole node, one per service
// declaration that names max_concurrent, and a bounded number of steps
// that were admitted and wait for a slot (the queue).
//
// A node admits a hand-off only while it has room (Admit): fewer steps
// running or admitted and not yet running than its limit plus its queue.
// Otherwise it refuses the step as busy, before journaling anything, so
// the sender tries another peer. A step counts from admission, so steps
// still being taken (journaled, settled) count too: with free slots they
// do not wait long, and counting only the wait for a slot would let a
// burst in without bound. Every execution then takes a slot of its
// service's group, then a node slot (Acquire): a service at its own limit
// waits without holding a node slot that another service could use. Slots
// are buffered channels: waiters are served roughly in arrival order and
// a cancelled wait takes nothing.
//
// Waiting steps are counted by key, from admission until they get their
// slots (or leave without running); a step that waits again for a retry
// counts again while it waits. Work that was already held (resumed after
// a restart) is never refused: it waits like the rest and may take the
// node over its bound for a while.
package bulkhead

import (
	"context"
	"fmt"
	"sync"
)

// Stats is a snapshot of a bulkhead.
type Stats struct {
	// Limit is the node's limit on concurrent executions, Running how many
	// run now.
	Limit, Running int
	// Queue is how many steps may wait beyond Limit, Queued how many wait
	// now (admitted and not yet running).
	Queue, Queued int
}

// Free is the number of execution slots free now (0 when all are taken).
func (s Stats) Free() int { return max(0, s.Limit-s.Running) }

// Room is how many more steps would be admitted now (0 when a new step
// would be refused as busy): Limit + Queue less the steps running or
// waiting.
func (s Stats) Room() int { return max(0, s.Limit+s.Queue-s.Running-s.Queued) }

// Bulkhead bounds concurrent executions. It is safe for concurrent use.
type Bulkhead struct {
	limit, queue int
	node         chan struct{}
	// onChange is called, outside the lock, whenever the steps running or
	// waiting change; its argument says whether the bulkhead filled up or
	// freed up (no free slot / no room, and back).
	onChange func(filledOrFreed bool)

	mu      sync.Mutex
	groups  map[string]chan struct{}
	waiting map[string]bool
	running int
	state   uint8 // bit 0: no free slot; bit 1: no room
}

// New returns a bulkhead that runs at most limit steps at once and admits
// at most queue steps beyond them. onChange, if not nil, is called
// whenever the steps running or waiting change, with true when the
// bulkhead filled up or freed up (for an early presence announcement; the
// free slots and room announced change with every call); it must not
// block.
func New(limit, queue int, onChange func(filledOrFreed bool)) (*Bulkhead, error) {
	if limit < 1 {
		return nil, fmt.Errorf("bulkhead: limit %d: want at least 1 concurrent execution", limit)
	}
	if queue < 0 {
		return nil, fmt.Errorf("bulkhead: queue %d: want 0 or more waiting steps", queue)
	}
	return &Bulkhead{
		limit: limit, queue: queue, node: make(chan struct{}, limit), onChange: onChange,
		groups: map[string]chan struct{}{}, waiting: map[string]bool{},
	}, nil
}

// Admit reserves a place for the step named key before it is taken. ok is
// false when the bulkhead is full: limit + queue steps running or waiting
// (refuse the step as busy). added says
// whether this call took the place: a key already waiting (the same step
// handed over again) is admitted without a new place, and only the call
// that added it gives it back with Leave if the step is not taken after all.
func (b *Bulkhead) Admit(key string) (added, ok bool) {
	b.mu.Lock()
	if b.waiting[key] {
		b.mu.Unlock()
		return false, true
	}
	if b.running+len(b.waiting) >= b.limit+b.queue {
		b.mu.Unlock()
		return false, false
	}
	b.waiting[key] = true
	changed := b.settle()
	b.mu.Unlock()
	b.notify(changed)
	return true, true
}

// Leave gives back key's queue place, if it holds one: the step was not
// taken, or it ended without running. Leaving twice is harmless.
func (b *Bulkhead) Leave(key string) {
	b.mu.Lock()
	if !b.waiting[key] {
		b.mu.Unlock()
		return
	}
	delete(b.waiting, key)
	changed := b.settle()
	b.mu.Unlock()
	b.notify(changed)
}

// Acquire waits, counted in the queue under key, for a slot of group (when
// groupLimit > 0; group names a service declaration) and then a node slot.
// It returns the function that gives both back, or ctx's error if ctx ends
// first (nothing is then held). Either way key leaves the queue.
func (b *Bulkhead) Acquire(ctx context.Context, key, group string, groupLimit int) (release func(), err error) {
	b.mu.Lock()
	b.waiting[key] = true
	var gs chan struct{}
	if groupLimit > 0 {
		gs = b.groups[group]
		if gs == nil || cap(gs) != groupLimit {
			gs = make(chan struct{}, groupLimit)
			b.groups[group] = gs
		}
	}
	changed := b.settle()
	b.mu.Unlock()
	b.notify(changed)

	if gs != nil {
		select {
		case gs <- struct{}{}:
		case <-ctx.Done():
			b.Leave(key)
			return nil, fmt.Errorf("wait for a slot of %s: %w", group, ctx.Err())
		}
	}
	select {
	case b.node <- struct{}{}:
	case <-ctx.Done():
		if gs != nil {
			<-gs
		}
		b.Leave(key)
		return nil, fmt.Errorf("wait for an execution slot: %w", ctx.Err())
	}
	b.mu.Lock()
	delete(b.waiting, key)
	b.running++
	changed = b.settle()
	b.mu.Unlock()
	b.notify(changed)

	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.running--
			changed := b.settle()
			b.mu.Unlock()
			<-b.node
			if gs != nil {
				<-gs
			}
			b.notify(changed)
		})
	}, nil
}

// Stats returns a snapshot.
func (b *Bulkhead) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{Limit: b.limit, Running: b.running, Queue: b.queue, Queued: len(b.waiting)}
}

// settle recomputes the full/free state (b.mu held) and says whether it
// changed.
func (b *Bulkhead) settle() bool {
	var s uint8
	if b.running >= b.limit {
		s |= 1
	}
	if b.running+len(b.waiting) >= b.limit+b.queue {
		s |= 2
	}
	changed := s != b.state
	b.state = s
	return changed
}

func (b *Bulkhead) notify(filledOrFreed bool) {
	if b.onChange != nil {
		b.onChange(filledOrFreed)
	}
}
