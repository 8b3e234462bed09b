// Package env is where the node takes time and randomness from. Protocol
// code in package node (and in node/rpc and node/journal) reads the clock
// and draws random numbers only through an Env handed to it, never through
// the time package's wall clock or the global math/rand functions, so that
// a simulator can drive a node with a fake clock and a seeded source and
// replay a run. Real gives the production environment: the wall clock and
// a source seeded once from crypto/rand. TestNoWallClock enforces the rule.
//
// Context deadlines (context.WithTimeout, WithDeadline) still run on the
// wall clock: they bound I/O, and the context package offers no clock.
//
// Key material (identities, swarm keys, signing keys) is not protocol
// randomness: it keeps reading crypto/rand directly.
package env

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Env is the clock and the random source a node runs on.
type Env struct {
	// Clock is the only clock protocol code reads: now, timers, tickers
	// and sleeps. Nil: the wall clock.
	Clock clockwork.Clock
	// Rand is the only source of protocol randomness (jitter, peer
	// choice, shuffles). Nil: a source seeded from crypto/rand.
	Rand *Rand
}

// Real is the production environment: the wall clock and a random source
// seeded from crypto/rand.
func Real() Env {
	return Env{Clock: clockwork.NewRealClock(), Rand: newRandomRand()}
}

// OrReal fills what e leaves unset from Real: a zero Env becomes Real().
func (e Env) OrReal() Env {
	if e.Clock == nil {
		e.Clock = clockwork.NewRealClock()
	}
	if e.Rand == nil {
		e.Rand = newRandomRand()
	}
	return e
}

// newRandomRand seeds a Rand from crypto/rand: the one place protocol
// randomness is seeded from outside the Env.
func newRandomRand() *Rand {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand panics instead)
	return &Rand{r: rand.New(rand.NewPCG(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])))}
}

// Rand is a source of pseudo-random numbers safe for concurrent use: a
// math/rand/v2 generator on a PCG source behind a mutex. The same seed
// gives the same sequence (as long as the calls come in the same order).
type Rand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewRand returns a Rand seeded with seed.
func NewRand(seed uint64) *Rand {
	return &Rand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// IntN returns a number in [0, n); it panics if n <= 0.
func (r *Rand) IntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.IntN(n)
}

// Int64N returns a number in [0, n); it panics if n <= 0.
func (r *Rand) Int64N(n int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Int64N(n)
}

// DurationN returns a duration in [0, d); it panics if d <= 0.
func (r *Rand) DurationN(d time.Duration) time.Duration {
	return time.Duration(r.Int64N(int64(d)))
}

// Float64 returns a number in [0.0, 1.0).
func (r *Rand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64()
}

// Shuffle shuffles n elements with swap (see math/rand/v2.Shuffle). The
// lock is held across the swaps: swap must not use r.
func (r *Rand) Shuffle(n int, swap func(i, j int)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.r.Shuffle(n, swap)
}
