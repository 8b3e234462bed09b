package schedule

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// VirtualClock maps real time onto timetable time for testnets, so a day of
// load shedding can be played in minutes: at the real instant Epoch the
// virtual clock reads Start, and from then on it runs Speed times faster
// than real time. Every node of a testnet is given the same three values
// (one flag, see ParseVirtualClock), so they agree on the virtual "now" to
// within their real clocks' skew times Speed.
//
// Only timetable decisions use it (the outage view, drain, chaos at cuts).
// Heartbeats, stream deadlines and backoff stay in real time: they measure
// processes and links, which do not run faster. That is why VirtualClock is
// not a clockwork.Clock; a component that must wait for a virtual instant
// converts it with RealAt (or a virtual duration with Real) and sets a real
// timer.
//
// The zero VirtualClock is real time: Now returns time.Now(). A Speed of 0
// is read as 1. The value is immutable and safe for concurrent use.
type VirtualClock struct {
	// Start is the virtual instant the clock reads at Epoch.
	Start time.Time
	// Epoch is the real instant at which the virtual clock reads Start.
	Epoch time.Time
	// Speed is virtual seconds per real second (3600: a timetable hour per
	// second); it must be positive and finite.
	Speed float64
}

// maxSpeed bounds Speed so virtual time cannot overflow time.Duration
// within a run of a few days.
const maxSpeed = 1e6

// IsZero reports whether c is the zero VirtualClock (real time).
func (c VirtualClock) IsZero() bool { return c.Start.IsZero() && c.Epoch.IsZero() }

func (c VirtualClock) speed() float64 {
	if c.Speed == 0 {
		return 1
	}
	return c.Speed
}

// Now is the virtual instant now: At(time.Now()).
func (c VirtualClock) Now() time.Time { return c.At(time.Now()) }

// At is the virtual instant at real instant real:
// Start + (real - Epoch) x Speed.
func (c VirtualClock) At(real time.Time) time.Time {
	if c.IsZero() {
		return real
	}
	return c.Start.Add(scale(real.Sub(c.Epoch), c.speed()))
}

// RealAt is the real instant at which the virtual clock reads virtual:
// Epoch + (virtual - Start) / Speed. A chaos runner kills a zone's
// processes at RealAt(cut).
func (c VirtualClock) RealAt(virtual time.Time) time.Time {
	if c.IsZero() {
		return virtual
	}
	return c.Epoch.Add(scale(virtual.Sub(c.Start), 1/c.speed()))
}

// Real converts a virtual duration into the real duration that passes
// meanwhile: d / Speed.
func (c VirtualClock) Real(d time.Duration) time.Duration { return scale(d, 1/c.speed()) }

// Virtual converts a real duration into virtual time: d x Speed. The node
// measures a step's run time in real time and learns Virtual(took).
func (c VirtualClock) Virtual(d time.Duration) time.Duration { return scale(d, c.speed()) }

// scale multiplies d by f, saturating at the ends of time.Duration.
func scale(d time.Duration, f float64) time.Duration {
	v := math.Round(float64(d) * f)
	switch {
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(v)
}

// Validate reports a clock that cannot be used: a non-positive, infinite or
// absurd Speed, or only one of Start and Epoch set. A Speed of 0 passes
// (it is read as 1); ParseVirtualClock rejects an explicit x0.
func (c VirtualClock) Validate() error {
	switch {
	case c.IsZero():
		return nil
	case c.Start.IsZero() || c.Epoch.IsZero():
		return errors.New("virtual clock: need both a start instant and a real epoch")
	case math.IsNaN(c.Speed) || math.IsInf(c.Speed, 0) || c.Speed < 0:
		return fmt.Errorf("virtual clock: speed %v must be a positive number", c.Speed)
	case c.Speed > maxSpeed:
		return fmt.Errorf("virtual clock: speed %v is more than %g", c.Speed, float64(maxSpeed))
	}
	return nil
}

// String renders the clock in the form ParseVirtualClock reads, with the
// epoch in Unix milliseconds: "2024-03-02T06:00:00+02:00@1700000000000x3600".
// The zero clock renders as "".
func (c VirtualClock) String() string {
	if c.IsZero() {
		return ""
	}
	return c.Start.Format(time.RFC3339Nano) + "@" + strconv.FormatInt(c.Epoch.UnixMilli(), 10) +
		"x" + strconv.FormatFloat(c.speed(), 'g', -1, 64)
}

// Set parses s into c (flag.Value, so a *VirtualClock can be a flag).
func (c *VirtualClock) Set(s string) error {
	v, err := ParseVirtualClock(s)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// secondsBelow: an all-digit epoch smaller than this is Unix seconds, not
// milliseconds (1e11 ms is 1973-03-03; 1e11 s is the year 5138).
const secondsBelow = 100_000_000_000

// ParseVirtualClock reads START@EPOCH[xSPEED], the flag every node of a
// testnet is started with:
//
//   - START is the virtual instant, RFC 3339 with an offset
//     (2024-03-02T06:00:00+02:00);
//   - EPOCH is the real instant at which the virtual clock reads START:
//     Unix milliseconds (1700000000000), Unix seconds if it has at most 11
//     digits (1700000000), or RFC 3339;
//   - SPEED is virtual seconds per real second, default 1 (x3600: one
//     timetable hour per second; x0.5 runs slow).
//
// The empty string is the zero clock (real time). Example, the testnet
// harness picking an epoch two seconds ahead so every node starts together:
//
//	--virtual-clock 2024-03-02T06:00:00+02:00@$(( $(date +%s%3N) + 2000 ))x60
func ParseVirtualClock(s string) (VirtualClock, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return VirtualClock{}, nil
	}
	bad := func(format string, args ...any) (VirtualClock, error) {
		return VirtualClock{}, fmt.Errorf("virtual clock %q: %s (want START@EPOCH[xSPEED], e.g. 2024-03-02T06:00:00+02:00@1700000000000x3600)", s, fmt.Sprintf(format, args...))
	}
	startText, rest, ok := strings.Cut(s, "@")
	if !ok {
		return bad("no @EPOCH")
	}
	start, err := time.Parse(time.RFC3339Nano, startText)
	if err != nil {
		return bad("start %q is not RFC 3339 with an offset", startText)
	}
	epochText, speedText := rest, "1"
	if i := strings.LastIndexAny(rest, "xX"); i >= 0 {
		epochText, speedText = rest[:i], rest[i+1:]
	}
	epoch, err := parseEpoch(epochText)
	if err != nil {
		return bad("epoch %q: %v", epochText, err)
	}
	speed, err := strconv.ParseFloat(speedText, 64)
	if err != nil || speed <= 0 {
		return bad("speed %q is not a positive number", speedText)
	}
	c := VirtualClock{Start: start, Epoch: epoch, Speed: speed}
	if err := c.Validate(); err != nil {
		return bad("%v", err)
	}
	return c, nil
}

func parseEpoch(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			return time.Time{}, errors.New("must be after 1970")
		}
		if n < secondsBelow {
			return time.Unix(n, 0), nil
		}
		return time.UnixMilli(n), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("want Unix milliseconds, Unix seconds or RFC 3339")
	}
	return t, nil
}
