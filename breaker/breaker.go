// Package breaker keeps one circuit breaker per peer for peer choice
// (the circuit breaker pattern): after Failures consecutive failed
// hand-offs to a peer its breaker opens and peer choice passes the peer
// over; after the open time one probe is let through (half-open); a
// success closes the breaker, a failure opens it again for twice as long
// as the last time, up to MaxOpenFor.
//
// The state machine and its counting are github.com/sony/gobreaker's
// two-step breaker. gobreaker's open time is fixed, so this package adds
// the growing hold-off on top: a breaker that gobreaker already moved to
// half-open is still reported closed to probes until the grown open time
// has passed since it last opened.
//
// What counts as a failure is the caller's choice; the node counts a
// hand-off that failed in transport or with an internal error, and a
// holder that went silent. A refusal that shows the peer is well (it is
// draining, does not offer the service, the workflow was cancelled) is a
// success.
package breaker

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// ErrOpen is returned by Begin for a peer whose breaker does not let a
// request through now.
var ErrOpen = errors.New("circuit breaker open")

// Config tunes the breakers.
type Config struct {
	// Failures is how many consecutive failures open a peer's breaker.
	Failures uint32
	// OpenFor is how long a breaker stays open the first time.
	OpenFor time.Duration
	// MaxOpenFor caps the doubling open time.
	MaxOpenFor time.Duration
}

// DefaultConfig opens after 3 consecutive failures, for 5 s, doubling up to
// 2 min.
func DefaultConfig() Config {
	return Config{Failures: 3, OpenFor: 5 * time.Second, MaxOpenFor: 2 * time.Minute}
}

// State is a breaker's state as peer choice sees it.
type State string

// The states.
const (
	Closed   State = "closed"
	Open     State = "open"
	HalfOpen State = "half-open"
)

// Set holds the breakers of every peer seen. Safe for concurrent use.
type Set struct {
	cfg Config
	now func() time.Time

	mu    sync.Mutex
	peers map[string]*entry
}

type entry struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]
	// trips counts consecutive openings without a close in between;
	// openedAt is when the breaker last opened.
	trips    int
	openedAt time.Time
}

// New makes an empty set.
func New(cfg Config) *Set {
	d := DefaultConfig()
	if cfg.Failures == 0 {
		cfg.Failures = d.Failures
	}
	if cfg.OpenFor <= 0 {
		cfg.OpenFor = d.OpenFor
	}
	if cfg.MaxOpenFor < cfg.OpenFor {
		cfg.MaxOpenFor = max(d.MaxOpenFor, cfg.OpenFor)
	}
	return &Set{cfg: cfg, now: time.Now, peers: map[string]*entry{}}
}

// get returns peer's entry, creating it (s.mu held).
func (s *Set) get(peer string) *entry {
	e := s.peers[peer]
	if e != nil {
		return e
	}
	e = &entry{}
	e.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        peer,
		MaxRequests: 1, // one probe when half-open
		Timeout:     s.cfg.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= s.cfg.Failures },
		// Called with gobreaker's mutex held, from inside a call that
		// holds s.mu: it only touches e, which s.mu guards.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			switch to {
			case gobreaker.StateOpen:
				if from == gobreaker.StateHalfOpen {
					e.trips++
				} else {
					e.trips = 1
				}
				e.openedAt = s.now()
			case gobreaker.StateClosed:
				e.trips = 0
			}
		},
	})
	s.peers[peer] = e
	return e
}

// openFor is how long e stays open after its latest opening (s.mu held).
func (s *Set) openFor(e *entry) time.Duration {
	d := s.cfg.OpenFor
	for i := 1; i < e.trips && d < s.cfg.MaxOpenFor; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxOpenFor)
}

// state is peer's state with the grown hold-off applied (s.mu held).
func (s *Set) state(e *entry) State {
	switch e.cb.State() {
	case gobreaker.StateClosed:
		return Closed
	case gobreaker.StateHalfOpen:
		if s.now().Sub(e.openedAt) >= s.openFor(e) {
			return HalfOpen
		}
	}
	return Open
}

// State reports peer's breaker state (Closed for a peer never seen).
func (s *Set) State(peer string) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.peers[peer]
	if e == nil {
		return Closed
	}
	return s.state(e)
}

// Allowed reports whether peer choice may pick peer now: its breaker is
// closed, or half-open and free for a probe. It does not use up the probe.
func (s *Set) Allowed(peer string) bool {
	return s.State(peer) != Open
}

// Begin lets one request to peer through, or returns ErrOpen. The caller
// reports the outcome with done.
func (s *Set) Begin(peer string) (done func(ok bool), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.get(peer)
	if s.state(e) == Open {
		return nil, fmt.Errorf("peer %s: %w for %s (opened %d time(s) in a row)", peer, ErrOpen, s.openFor(e), e.trips)
	}
	cbDone, err := e.cb.Allow()
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w (%v)", peer, ErrOpen, err)
	}
	return func(ok bool) {
		var outcome error
		if !ok {
			outcome = errFailed
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		cbDone(outcome)
	}, nil
}

var errFailed = errors.New("failed")

// Failure records a failure of peer seen outside a request (a holder that
// went silent). It counts only when a request would have been let through.
func (s *Set) Failure(peer string) {
	if done, err := s.Begin(peer); err == nil {
		done(false)
	}
}

// Forget drops peer's breaker (it left the mesh for good).
func (s *Set) Forget(peer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.peers, peer)
}
