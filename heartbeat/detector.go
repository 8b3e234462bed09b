package heartbeat

import (
	"fmt"
	"math"
	"time"
)

// Detector is a phi-accrual failure detector for one subject: it learns
// the distribution of the intervals between the subject's beats and says
// how unlikely the current silence is for a live subject.
//
// A Detector is not safe for concurrent use; the Watcher serialises its
// own. The zero value is not usable: build one with NewDetector.
type Detector struct {
	p *params

	started bool      // a heartbeat has been seen
	last    time.Time // time of the last heartbeat, or of the last restart
	skip    bool      // do not learn the next interval (it starts at a restart)
	win     window
}

// NewDetector returns a Detector tuned by cfg, which must be valid. Its
// history is seeded, as Akka does, with two intervals at Interval -/+
// Interval/4, so the first beats are judged against the expected cadence.
// It suspects nothing until its first Heartbeat.
func NewDetector(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new detector: %w", err)
	}
	d := &Detector{}
	d.init(newParams(cfg))
	return d, nil
}

func (d *Detector) init(p *params) {
	d.p = p
	quarter := int64(p.interval / 4)
	d.win.add(int64(p.interval)-quarter, p.maxSamples)
	d.win.add(int64(p.interval)+quarter, p.maxSamples)
}

// Heartbeat records a beat received at now. The interval since the
// previous beat joins the history only if the subject was not suspected at
// now: an interval that already crossed the threshold is an outage, not a
// sample of the link. A time before the previous beat is ignored.
func (d *Detector) Heartbeat(now time.Time) {
	switch {
	case !d.started:
		d.started = true
	case now.Before(d.last):
		return
	case d.skip:
		d.skip = false
	case now.Before(d.Deadline()):
		d.win.add(int64(now.Sub(d.last)), d.p.maxSamples)
	}
	d.last = now
}

// restart measures silence from now without learning anything: the next
// interval is not recorded, since it would start at now rather than at a
// beat. The Watcher uses it when its own timer ran late and when a
// suspicion is withdrawn.
func (d *Detector) restart(now time.Time) {
	d.started = true
	d.last = now
	d.skip = true
}

// Phi returns the suspicion level at now: -log10 of the estimated chance
// that a live subject stays silent this long. It is 0 before the first
// heartbeat, log10(2) ~= 0.3 at the mean interval plus AcceptablePause,
// and grows without bound with the silence.
func (d *Detector) Phi(now time.Time) float64 {
	if !d.started {
		return 0
	}
	mean, sd := d.estimate()
	return phi(float64(now.Sub(d.last)), mean, sd)
}

// Suspect reports whether the subject is suspected at now: phi has reached
// Threshold, or the silence has reached MaxSilence. It is false before the
// first heartbeat.
func (d *Detector) Suspect(now time.Time) bool {
	return d.started && !now.Before(d.Deadline())
}

// Deadline returns the instant at which, if no beat arrives, the subject
// becomes suspected; it is the zero time before the first heartbeat.
func (d *Detector) Deadline() time.Time {
	if !d.started {
		return time.Time{}
	}
	mean, sd := d.estimate()
	silence := time.Duration(math.Ceil(mean + d.p.sigmas*sd))
	if d.p.maxSilence > 0 && d.p.maxSilence < silence {
		silence = d.p.maxSilence
	}
	return d.last.Add(silence)
}

// Last returns the time silence is measured from: the last heartbeat, or
// the last restart by a Watcher.
func (d *Detector) Last() time.Time { return d.last }

// Interval returns the learned mean and standard deviation of the beat
// intervals in the window (the deviation before the MinStdDev floor).
func (d *Detector) Interval() (mean, stdDev time.Duration) {
	m, v := d.win.meanVar()
	return time.Duration(m), time.Duration(math.Sqrt(v))
}

// estimate returns, in nanoseconds, the mean phi is centred on (learned
// mean plus AcceptablePause) and the deviation it scales by (learned, but
// at least MinStdDev).
func (d *Detector) estimate() (mean, sd float64) {
	m, v := d.win.meanVar()
	return m + float64(d.p.pause), max(math.Sqrt(v), d.p.minSD)
}

// window is a bounded ring of beat intervals in nanoseconds with running
// sums. The sum is exact; the sum of squares is a float and is recomputed
// from the samples each time the ring wraps, so rounding cannot build up.
type window struct {
	samples []int64
	next    int // slot the next sample overwrites once the ring is full
	sum     int64
	sumSq   float64
}

func (w *window) add(x int64, limit int) {
	if len(w.samples) < limit {
		w.samples = append(w.samples, x)
		w.sum += x
		w.sumSq += float64(x) * float64(x)
		return
	}
	old := w.samples[w.next]
	w.samples[w.next] = x
	w.sum += x - old
	w.sumSq += float64(x)*float64(x) - float64(old)*float64(old)
	w.next++
	if w.next == limit {
		w.next = 0
		w.resum()
	}
}

func (w *window) resum() {
	w.sumSq = 0
	for _, x := range w.samples {
		w.sumSq += float64(x) * float64(x)
	}
}

// meanVar returns the mean and the (population) variance of the samples.
func (w *window) meanVar() (mean, variance float64) {
	n := float64(len(w.samples))
	if n == 0 {
		return 0, 0
	}
	mean = float64(w.sum) / n
	return mean, max(w.sumSq/n-mean*mean, 0)
}
