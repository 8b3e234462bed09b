package outage

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// Clock is where the view reads "now": a clockwork.Clock (real or fake) or
// a schedule.VirtualClock both satisfy it.
type Clock interface {
	Now() time.Time
}

// View is the live availability view. All its methods are safe for
// concurrent use.
type View struct {
	clock Clock
	cfg   Config

	sched atomic.Pointer[schedule.Schedule]

	mu        sync.RWMutex
	peers     map[string]*presence
	pruneSize int // len(peers) after the last prune; see Observe

	learn expectations

	rngMu sync.Mutex
	rng   *rand.Rand
}

// presence is what the view knows of one peer.
type presence struct {
	zone     string
	draining bool
	seen     time.Time // zero: never observed (only suspected)
	// ttl is how long the peer's last announcement keeps it live when
	// longer than Config.PresenceTTL (ObserveFor); zero: PresenceTTL.
	ttl time.Duration
	// suspected is when heartbeat last suspected the peer; zero if not.
	suspected time.Time
}

// forgetAfter, in PresenceTTLs, is how long an unheard peer is kept before
// Observe prunes it.
const forgetAfter = 10

// NewView makes a view reading time from clock, with timetable s (nil: no
// timetable yet; see SetSchedule).
func NewView(clock Clock, cfg Config, s *schedule.Schedule) (*View, error) {
	if clock == nil {
		return nil, fmt.Errorf("outage view: nil clock")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	v := &View{
		clock: clock,
		cfg:   cfg,
		peers: map[string]*presence{},
		learn: expectations{cfg: cfg, services: map[string]*samples{}},
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	v.sched.Store(s)
	return v, nil
}

// Config returns the view's configuration.
func (v *View) Config() Config { return v.cfg }

// Now is the view's clock reading.
func (v *View) Now() time.Time { return v.clock.Now() }

// Schedule returns the timetable in force, or nil.
func (v *View) Schedule() *schedule.Schedule { return v.sched.Load() }

// SetSchedule replaces the timetable (nil: none). Use Offer to keep the
// newest of several.
func (v *View) SetSchedule(s *schedule.Schedule) { v.sched.Store(s) }

// Offer installs s if it was issued later than the timetable held
// (schedule.Newer; a tie keeps the one held) and reports whether it did.
// The caller has verified s (schedule.Signed.Verify).
func (v *View) Offer(s *schedule.Schedule) bool {
	for {
		old := v.sched.Load()
		if s == nil || schedule.Newer(old, s) != s || old == s {
			return false
		}
		if v.sched.CompareAndSwap(old, s) {
			return true
		}
	}
}

// Observe records a presence announcement of peer, received at at: its
// zone and whether it is draining. An announcement older than one already
// recorded is ignored. The node observes itself too, each time it
// announces, so it can be a candidate for its own steps.
func (v *View) Observe(peer, zone string, draining bool, at time.Time) {
	v.ObserveFor(peer, zone, draining, at, 0)
}

// ObserveFor is Observe for an announcement that keeps peer live for ttl
// (on the view's clock) rather than Config.PresenceTTL, when ttl is the
// longer: a peer that announces seldom (presence refreshes slowly on an
// idle mesh) says how long its announcement holds.
func (v *View) ObserveFor(peer, zone string, draining bool, at time.Time, ttl time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.peers[peer]
	if p == nil {
		v.maybePrune(at)
		p = &presence{}
		v.peers[peer] = p
	}
	if at.Before(p.seen) {
		return
	}
	p.zone, p.draining, p.seen, p.ttl = zone, draining, at, ttl
}

// liveFor is how long after its last announcement p counts as live.
func (v *View) liveFor(p *presence) time.Duration { return max(v.cfg.PresenceTTL, p.ttl) }

// maybePrune drops peers unheard for forgetAfter TTLs, whenever the map has
// doubled since the last prune, so peers that come and go cannot grow it
// without bound and the cost stays amortised O(1) per Observe.
func (v *View) maybePrune(now time.Time) {
	if len(v.peers) < 2*max(v.pruneSize, 16) {
		return
	}
	for id, p := range v.peers {
		if p.seen.Before(now.Add(-forgetAfter*v.liveFor(p))) && !v.suspectedAt(p, now) {
			delete(v.peers, id)
		}
	}
	v.pruneSize = len(v.peers)
}

// Forget drops everything the view knows of peer: presence and suspicion.
func (v *View) Forget(peer string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.peers, peer)
}

// Suspect records a heartbeat suspicion of peer (a heartbeat.Suspicion for
// any key of that peer). The peer is excluded until Alive, Forget, or
// Config.SuspectFor has passed; fresh presence alone does not clear it.
func (v *View) Suspect(peer string) {
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.peers[peer]
	if p == nil {
		p = &presence{}
		v.peers[peer] = p
	}
	p.suspected = now
}

// Alive clears a suspicion of peer: the node has positive evidence that it
// works (a successful hand-off or an answered probe).
func (v *View) Alive(peer string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if p := v.peers[peer]; p != nil {
		p.suspected = time.Time{}
	}
}

// Suspected reports whether a heartbeat suspicion of peer is in force
// (Suspect, not yet cleared by Alive, Forget or SuspectFor).
func (v *View) Suspected(peer string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	p := v.peers[peer]
	return p != nil && v.suspectedAt(p, v.clock.Now())
}

// suspectedAt reports whether p's suspicion is still in force at now.
// Callers hold mu.
func (v *View) suspectedAt(p *presence, now time.Time) bool {
	if p.suspected.IsZero() {
		return false
	}
	return v.cfg.SuspectFor == 0 || now.Before(p.suspected.Add(v.cfg.SuspectFor))
}

// Zone returns the zone peer last announced, and whether it was ever seen.
func (v *View) Zone(peer string) (string, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	p := v.peers[peer]
	if p == nil || p.seen.IsZero() {
		return "", false
	}
	return p.zone, true
}

// shuffle permutes n items with the view's seeded source.
func (v *View) shuffle(n int, swap func(i, j int)) {
	v.rngMu.Lock()
	defer v.rngMu.Unlock()
	v.rng.Shuffle(n, swap)
}
