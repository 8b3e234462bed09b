package member

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Rate is a token bucket: Burst requests at once, refilled at PerSecond.
type Rate struct {
	PerSecond float64
	Burst     int
}

// Limits are the per-peer rate limits a node applies. A member that exceeds
// them has its streams reset (hand-offs) or its request refused
// (submissions); the sender's circuit breaker then passes this node over.
type Limits struct {
	// Handoffs bounds packs one peer may hand to this node. The default
	// (200/s, burst 400) is far above what a member on a 2-core board sends.
	Handoffs Rate
	// Submits bounds workflows one client may submit (default 20/s, burst
	// 100; the testnets' heaviest load submits 10/s).
	Submits Rate
}

// DefaultLimits returns the limits of a board on a mesh.
func DefaultLimits() Limits {
	return Limits{Handoffs: Rate{PerSecond: 200, Burst: 400}, Submits: Rate{PerSecond: 20, Burst: 100}}
}

// Limiter is a token bucket per peer. The zero Rate allows everything.
// It is safe for concurrent use.
type Limiter struct {
	rate Rate
	now  func() time.Time

	mu      sync.Mutex // guards buckets
	buckets map[peer.ID]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewLimiter returns a limiter with rate r; now is the clock (nil: real time).
func NewLimiter(r Rate, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{rate: r, now: now, buckets: map[peer.ID]*bucket{}}
}

// Allow takes one token from id's bucket and reports whether there was one.
func (l *Limiter) Allow(id peer.ID) bool {
	if l == nil || l.rate.PerSecond <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[id]
	if !ok {
		if len(l.buckets) > 4096 {
			l.prune(now)
		}
		b = &bucket{tokens: float64(l.rate.Burst), at: now}
		l.buckets[id] = b
	}
	b.tokens = min(float64(l.rate.Burst), b.tokens+now.Sub(b.at).Seconds()*l.rate.PerSecond)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// prune forgets full buckets.
func (l *Limiter) prune(now time.Time) {
	for id, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate.PerSecond >= float64(l.rate.Burst) {
			delete(l.buckets, id)
		}
	}
}
