package node

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// handingLinger is how long a hand-off that ended still counts as in
// flight (handingOn.has): the sender stores its guard copy of the step
// just after the receiver's ack, and a backup's question answered between
// the two must not find the sender knowing nothing (node/guard G15).
const handingLinger = 2 * time.Second

// handingOn is the steps this peer is handing on now, by guard key and
// attempt: a hand-off in flight whose receiver has not acknowledged it
// yet, so this peer keeps no guard copy of it. A backup guardian of such
// a step (recruited by a receiver whose ack never reached this peer) asks
// this peer as the step's primary before it re-routes; answered "handing
// it on", it waits instead of standing in (node/guard G15): this peer
// still has the work and hands it to a receiver, or guards it at the one
// that took it first.
type handingOn struct {
	clock clockwork.Clock
	mu    sync.Mutex
	m     map[handingKey]*handingEntry
}

type handingKey struct {
	key     string
	attempt int
}

// handingEntry counts the hand-offs in flight of one step and attempt and,
// once none is, until when it still counts (handingLinger).
type handingEntry struct {
	inFlight int
	until    time.Time
}

func newHandingOn(clock clockwork.Clock) *handingOn {
	return &handingOn{clock: clock, m: map[handingKey]*handingEntry{}}
}

// begin records a hand-off of key at attempt in flight; the returned end
// records that it ended (taken, refused for good, or given up).
func (h *handingOn) begin(key string, attempt int) (end func()) {
	k := handingKey{key, attempt}
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for old, e := range h.m { // forget what ended long ago
		if e.inFlight == 0 && now.After(e.until) {
			delete(h.m, old)
		}
	}
	e := h.m[k]
	if e == nil {
		e = &handingEntry{}
		h.m[k] = e
	}
	e.inFlight++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			e.inFlight--
			e.until = h.clock.Now().Add(handingLinger)
		})
	}
}

// has reports whether a hand-off of key at attempt is in flight or ended
// within handingLinger.
func (h *handingOn) has(key string, attempt int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[handingKey{key, attempt}]
	return e != nil && (e.inFlight > 0 || h.clock.Now().Before(e.until))
}
