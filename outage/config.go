package outage

import (
	"errors"
	"fmt"
	"time"
)

// UnknownPolicy says what CanRun does where the timetable says Unknown for
// part of the time a step needs: beyond known_until, past a stage feed's
// horizon, or for a zone the timetable does not list. With no timetable at
// all (or a clock that reads before its issued_at) the view always behaves
// as AllowUnknown: heartbeats are then the only evidence, and refusing every
// peer would stop the mesh.
type UnknownPolicy int

// The policies. The zero value is PreferKnown.
const (
	// PreferKnown accepts a peer whose window runs into Unknown, but Rank
	// puts every peer known to be powered for the whole window first. Work
	// goes where the timetable vouches for it, and still runs when the
	// publisher is late with the next timetable.
	PreferKnown UnknownPolicy = iota
	// AllowUnknown treats Unknown as powered: only a known cut excludes a
	// peer. Rank still orders by known powered margin.
	AllowUnknown
	// DenyUnknown excludes any peer whose window is not known powered to
	// the end. Safe, but a stale timetable stops all routing.
	DenyUnknown
)

var policyNames = [...]string{PreferKnown: "prefer-known", AllowUnknown: "allow", DenyUnknown: "deny"}

// String renders "prefer-known", "allow" or "deny".
func (p UnknownPolicy) String() string {
	if p < 0 || int(p) >= len(policyNames) {
		return fmt.Sprintf("UnknownPolicy(%d)", int(p))
	}
	return policyNames[p]
}

// MarshalText renders the policy as in String.
func (p UnknownPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads "prefer-known", "allow" or "deny".
func (p *UnknownPolicy) UnmarshalText(b []byte) error {
	v, err := ParseUnknownPolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// ParseUnknownPolicy reads "prefer-known", "allow" or "deny".
func ParseUnknownPolicy(s string) (UnknownPolicy, error) {
	for i, n := range policyNames {
		if s == n {
			return UnknownPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown-policy %q: want prefer-known, allow or deny", s)
}

// Config tunes the view. Every duration is in the time of the view's clock:
// timetable time, which on a testnet with a virtual clock runs faster than
// real time (see TestnetConfig).
type Config struct {
	// Margin is added to a step's expected time before asking whether a
	// peer stays powered that long. It absorbs hand-off and journal time,
	// clock skew between boards and a step slower than expected; larger
	// margins waste the last minutes before each cut, smaller ones risk
	// losing a step to the cut and re-running it.
	Margin time.Duration
	// DrainMargin is how long before its zone's cut a node stops accepting
	// work and hands off what it holds. It must cover handing off every
	// join record and queued pack over the slowest link; a larger one idles
	// the node longer before each cut.
	DrainMargin time.Duration
	// PresenceTTL is how long a peer counts as live after its last presence
	// announcement; about three announce intervals. Shorter drops peers on
	// one lost announcement, longer keeps dead peers as candidates.
	PresenceTTL time.Duration
	// SuspectFor is how long a heartbeat suspicion excludes a peer unless
	// Alive clears it sooner. A dead peer stops announcing and leaves by
	// PresenceTTL anyway; this re-admits a live peer after a false alarm.
	// Zero means only Alive or Forget clears a suspicion.
	SuspectFor time.Duration
	// Unknown is the policy for stretches the timetable does not know.
	Unknown UnknownPolicy
	// AmpleMargin caps the powered margin Rank compares: peers powered for
	// at least this long beyond the step's need rank as equal, so load
	// decides among them instead of every step going to the one zone with
	// the longest time to its cut.
	AmpleMargin time.Duration
	// DefaultExpected is a step's expected time when the service has neither
	// a declared expect= attribute nor any learned sample.
	DefaultExpected time.Duration
	// Samples is how many recent run times are kept per service.
	Samples int
	// MinSamples is how many samples Expected needs before the learned
	// figure overrides a declared one; fewer, and the declaration wins.
	MinSamples int
	// Seed seeds Rank's tie-breaking shuffle, so a run is reproducible; 0
	// picks a random seed.
	Seed uint64
}

// DefaultConfig is for a mesh of boards on the real timetable: presence
// announced every 5 s, steps of seconds to minutes, Wi-Fi links.
func DefaultConfig() Config {
	return Config{
		Margin:          2 * time.Minute,
		DrainMargin:     5 * time.Minute,
		PresenceTTL:     15 * time.Second,
		SuspectFor:      time.Minute,
		Unknown:         PreferKnown,
		AmpleMargin:     time.Hour,
		DefaultExpected: time.Minute,
		Samples:         32,
		MinSamples:      5,
	}
}

// TestnetConfig is for a loopback testnet whose virtual clock runs speed
// times faster than real time (1 for real time). The process-bound
// durations are set in real time (margin 1 s, drain 3 s, presence 5 s,
// suspicion 5 s, default step 1 s) and multiplied by speed, because the
// view measures them on the virtual clock; AmpleMargin is timetable-bound
// and stays 1 h. Choose speed so a timetable window lasts much longer in
// real time than DrainMargin does: at speed 60 a two-hour window is two real
// minutes and the drain margin three virtual minutes.
func TestnetConfig(speed float64) Config {
	if speed <= 0 {
		speed = 1
	}
	v := func(d time.Duration) time.Duration { return time.Duration(float64(d) * speed) }
	return Config{
		Margin:          v(time.Second),
		DrainMargin:     v(3 * time.Second),
		PresenceTTL:     v(5 * time.Second),
		SuspectFor:      v(5 * time.Second),
		Unknown:         PreferKnown,
		AmpleMargin:     time.Hour,
		DefaultExpected: v(time.Second),
		Samples:         16,
		MinSamples:      3,
	}
}

// Validate reports settings the view cannot work with.
func (c Config) Validate() error {
	var errs []error
	if c.Margin < 0 || c.DrainMargin < 0 || c.SuspectFor < 0 || c.DefaultExpected < 0 || c.AmpleMargin < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if c.PresenceTTL <= 0 {
		errs = append(errs, errors.New("PresenceTTL must be positive"))
	}
	if c.Samples < 1 {
		errs = append(errs, errors.New("Samples must be at least 1"))
	}
	if c.MinSamples < 1 || c.MinSamples > c.Samples {
		errs = append(errs, fmt.Errorf("MinSamples must be between 1 and Samples (%d)", c.Samples))
	}
	if c.Unknown < 0 || int(c.Unknown) >= len(policyNames) {
		errs = append(errs, fmt.Errorf("unknown UnknownPolicy %d", int(c.Unknown)))
	}
	if len(errs) > 0 {
		return fmt.Errorf("outage config: %w", errors.Join(errs...))
	}
	return nil
}
