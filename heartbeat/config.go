package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config tunes the beating side (Beater) and the watching side (Detector,
// Watcher). Both ends of a hand-off should use the same Interval; the rest
// is the watcher's business. Every duration is wall time as seen by the
// injected clock.
//
// Start from DefaultMeshConfig, DefaultTestnetConfig or DefaultLocalConfig
// and change single fields; Validate says what is wrong with a config.
type Config struct {
	// Interval is the beat period: the holder sends one beat every Interval
	// and the detector's history is seeded with it. Shorter detects loss
	// sooner but costs one small stream write per subject per Interval on
	// the holder and one map update on the watcher; on a Raspberry Pi mesh
	// over Wi-Fi, beats faster than a few per second mostly measure radio
	// jitter.
	Interval time.Duration

	// CheckInterval is how often the Watcher looks for silent subjects.
	// It adds up to one CheckInterval to every detection, and each check
	// scans every watched subject under the Watcher's lock, so shorter
	// means finer detection for more CPU (see BenchmarkWatcherCheck).
	CheckInterval time.Duration

	// ParkWhenIdle stops the Watcher's check timer while it watches
	// nothing and re-arms it (one CheckInterval ahead) at the next Watch,
	// so an idle node does not wake CheckInterval-often for no subject.
	// Detection is unchanged: a new subject's first check comes one
	// CheckInterval after Watch either way. Off by default.
	ParkWhenIdle bool

	// Threshold is the phi level at which a subject is suspected. phi = 8
	// means "the chance that a live subject would be this late, judging by
	// its own recent beats, is 1e-8"; for the normal model that is about
	// 5.2 standard deviations past the mean interval. Higher means fewer
	// false alarms and slower detection (each +1 adds roughly half a
	// standard deviation). Akka uses 8 on LANs, 10-12 on clouds. Must be in
	// [1, 100].
	Threshold float64

	// MinStdDev is the floor on the standard deviation of beat intervals.
	// Beats on a quiet link are so regular that the measured deviation
	// tends to zero, which would make phi explode at the first late beat;
	// the floor keeps the detector from being that sure of itself. Larger
	// means fewer false alarms from small hiccups and slower detection
	// (detection grows by about 5.2 x MinStdDev at Threshold 8). Must be > 0.
	MinStdDev time.Duration

	// AcceptablePause is added to the mean interval before phi is computed:
	// a stall the detector swallows without raising phi much, such as a
	// garbage-collection pause, a fsync on an SD card or a Wi-Fi
	// retransmission burst on the holder. It is the main knob between false
	// alarms and detection time, and it adds to detection one for one.
	// Must be >= 0.
	AcceptablePause time.Duration

	// MaxSamples bounds the window of beat intervals the detector learns
	// from (a ring; the oldest sample is dropped). A longer window forgets
	// a bad spell more slowly and costs 8 bytes per sample per subject.
	// Must be >= 2.
	MaxSamples int

	// MaxSilence, when > 0, is a hard ceiling on the silence the watcher
	// tolerates whatever phi says. phi adapts to a jittery link by waiting
	// longer; the ceiling bounds how much longer, so the node can promise a
	// worst-case re-route time, at the price of false alarms on links so
	// jittery that phi would have waited past it. 0 means no ceiling. When
	// set it must exceed Interval.
	MaxSilence time.Duration

	// LateTimerTolerance is how late the Watcher's own check timer may fire
	// before the Watcher distrusts itself (Lifeguard): a later tick means
	// this process was frozen or starved of CPU, so the silence it
	// measured may be its own. On such a tick the Watcher accuses nobody and
	// restarts every subject's silence from now. Smaller protects better
	// against self-inflicted false alarms and, on a machine that is always
	// slow, postpones detection more often. Must be > 0.
	LateTimerTolerance time.Duration

	// Confirm, when non-nil, is asked before a subject is declared silent:
	// the node can look for other evidence that the subject is alive (is
	// its connection still up? does it answer a ping? do other peers still
	// hear it, as in SWIM's indirect probe?). If it returns true the
	// suspicion is withdrawn, the subject's silence restarts from now and
	// Stats.Withdrawn counts it. It runs on its own goroutine (never on the
	// check loop, so a slow answer cannot make the check timer late), with
	// a context that ends after ConfirmTimeout or when the Watcher closes.
	// It may be called for many keys at once; the node should share one
	// probe per peer. It may call Unwatch(key) to drop a subject it finds
	// nobody needs watched any more; nothing is reported for it then.
	//
	// A negative answer is trusted only if the confirmation's timeout did
	// not itself fire later than LateTimerTolerance (Lifeguard's rule
	// applied to the probe: a watcher frozen while the answer waited for it
	// must not blame the subject); otherwise the silence restarts and
	// Stats.LateConfirms counts it.
	Confirm func(ctx context.Context, key string) bool

	// ConfirmTimeout bounds one Confirm call; past it the context is done
	// and an unanswered confirmation counts as "nobody heard it". It is
	// the longest a confirmation may delay a detection; a Confirm that
	// knows at once that the subject is gone (its connection was reset)
	// delays nothing. Must be > 0 when Confirm is set.
	ConfirmTimeout time.Duration

	// Logger receives the Watcher's rare events (late ticks, suspicions,
	// withdrawals). nil means slog.Default().
	Logger *slog.Logger
}

// DefaultMeshConfig suits real boards on a LAN or Wi-Fi mesh, where false
// alarms (needless re-routing of work over a slow radio) cost more than a
// few seconds of detection: 1 s beats, a 3 s acceptable pause (SD-card
// fsyncs, Wi-Fi retries), phi 8 and a 200 ms deviation floor. A subject
// that beat steadily and stops is reported after about 5.3 s of silence
// (DetectionBound: 5.56 s), never after more than 10 s, plus up to the 2 s
// confirmation when its connection still looks up (a board that lost power
// sends no reset, so that is the common case on a real mesh: 7.56 s).
func DefaultMeshConfig() Config {
	return Config{
		Interval:           time.Second,
		CheckInterval:      250 * time.Millisecond,
		Threshold:          8,
		MinStdDev:          200 * time.Millisecond,
		AcceptablePause:    3 * time.Second,
		MaxSamples:         120,
		MaxSilence:         10 * time.Second,
		LateTimerTolerance: time.Second,
		ConfirmTimeout:     2 * time.Second,
	}
}

// DefaultTestnetConfig suits a loopback testnet of many node processes on a
// busy 2-core machine, where the scenarios want a killed peer noticed in at
// most 1.5 s without false alarms: 250 ms beats, a 500 ms acceptable pause,
// phi 8 and a 100 ms deviation floor put the phi crossing at 1.27 s of
// silence for steady beats; with 50 ms checks a stopped subject is reported
// within 1.32 s, and the 1.45 s ceiling keeps the bound at 1.5 s however
// jittery the history. Those bounds hold for a killed process, whose
// connection the kernel resets so Confirm answers at once. A subject that
// is still connected but silent (hung, or starved of CPU) gets a 2 s
// confirmation on top: reported within 3.32 s if it is really stuck.
func DefaultTestnetConfig() Config {
	return Config{
		Interval:           250 * time.Millisecond,
		CheckInterval:      50 * time.Millisecond,
		Threshold:          8,
		MinStdDev:          100 * time.Millisecond,
		AcceptablePause:    500 * time.Millisecond,
		MaxSamples:         100,
		MaxSilence:         1450 * time.Millisecond,
		LateTimerTolerance: 200 * time.Millisecond,
		ConfirmTimeout:     2 * time.Second,
	}
}

// DefaultLocalConfig suits unit tests in one process, real or virtual time:
// 100 ms beats, 10 ms checks and a short window, so a stopped subject is
// reported within about 0.34 s.
func DefaultLocalConfig() Config {
	return Config{
		Interval:           100 * time.Millisecond,
		CheckInterval:      10 * time.Millisecond,
		Threshold:          8,
		MinStdDev:          20 * time.Millisecond,
		AcceptablePause:    100 * time.Millisecond,
		MaxSamples:         16,
		LateTimerTolerance: 50 * time.Millisecond,
		ConfirmTimeout:     100 * time.Millisecond,
	}
}

// Validate reports every field that is out of range, joined into one error.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("heartbeat: config: "+format, args...))
	}
	if c.Interval <= 0 {
		bad("Interval must be > 0, got %v", c.Interval)
	}
	if c.CheckInterval <= 0 {
		bad("CheckInterval must be > 0, got %v", c.CheckInterval)
	}
	if !(c.Threshold >= 1 && c.Threshold <= 100) {
		bad("Threshold must be in [1, 100], got %v", c.Threshold)
	}
	if c.MinStdDev <= 0 {
		bad("MinStdDev must be > 0, got %v", c.MinStdDev)
	}
	if c.AcceptablePause < 0 {
		bad("AcceptablePause must be >= 0, got %v", c.AcceptablePause)
	}
	if c.MaxSamples < 2 {
		bad("MaxSamples must be >= 2, got %d", c.MaxSamples)
	}
	if c.MaxSilence < 0 || (c.MaxSilence > 0 && c.MaxSilence <= c.Interval) {
		bad("MaxSilence must be 0 (no ceiling) or > Interval (%v), got %v", c.Interval, c.MaxSilence)
	}
	if c.LateTimerTolerance <= 0 {
		bad("LateTimerTolerance must be > 0, got %v", c.LateTimerTolerance)
	}
	if c.Confirm != nil && c.ConfirmTimeout <= 0 {
		bad("ConfirmTimeout must be > 0 when Confirm is set, got %v", c.ConfirmTimeout)
	}
	return errors.Join(errs...)
}

// SuspectAfter is the silence after which a Detector whose history shows
// steady beats at Interval suspects the subject: the phi-Threshold crossing
// for the larger of MinStdDev and the seed deviation (Interval/4), capped by
// MaxSilence. It assumes a valid config.
func (c Config) SuspectAfter() time.Duration {
	sd := max(c.MinStdDev, c.Interval/4)
	d := c.Interval + c.AcceptablePause + time.Duration(sigmasAt(c.Threshold)*float64(sd))
	if c.MaxSilence > 0 && c.MaxSilence < d {
		d = c.MaxSilence
	}
	return d
}

// DetectionBound is the longest silence after which a Watcher reports a
// subject that beat steadily at Interval and then stopped: SuspectAfter,
// plus one CheckInterval for the check to come round, plus ConfirmTimeout
// when Confirm is set (a Confirm that answers at once, as the node's does
// for a peer whose connection is gone, adds nothing, so a killed process
// is reported within the bound without Confirm). A late check tick or
// confirmation (see LateTimerTolerance) restarts the silence and so can
// push a detection past this bound; that is the point of it.
func (c Config) DetectionBound() time.Duration {
	d := c.SuspectAfter() + c.CheckInterval
	if c.Confirm != nil {
		d += c.ConfirmTimeout
	}
	return d
}

// params is the part of a Config that every Detector of a Watcher shares,
// with the phi threshold turned into standard deviations once.
type params struct {
	interval   time.Duration
	pause      time.Duration
	minSD      float64 // nanoseconds
	sigmas     float64 // standard deviations past the mean where phi == Threshold
	maxSilence time.Duration
	maxSamples int
}

func newParams(c Config) *params {
	return &params{
		interval:   c.Interval,
		pause:      c.AcceptablePause,
		minSD:      float64(c.MinStdDev),
		sigmas:     sigmasAt(c.Threshold),
		maxSilence: c.MaxSilence,
		maxSamples: c.MaxSamples,
	}
}
