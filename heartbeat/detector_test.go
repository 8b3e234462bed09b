package heartbeat

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func newTestDetector(t *testing.T, cfg Config) *Detector {
	t.Helper()
	d, err := NewDetector(cfg)
	if err != nil {
		t.Fatalf("NewDetector: %v", err)
	}
	return d
}

// beatEvery feeds n beats spaced by gap, starting after the last one, and
// returns the time of the last.
func beatEvery(d *Detector, from time.Time, gap time.Duration, n int) time.Time {
	at := from
	for range n {
		at = at.Add(gap)
		d.Heartbeat(at)
	}
	return at
}

func TestDetectorBeforeFirstHeartbeat(t *testing.T) {
	d := newTestDetector(t, DefaultTestnetConfig())
	later := epoch.Add(time.Hour)
	if d.Phi(later) != 0 || d.Suspect(later) || !d.Deadline().IsZero() {
		t.Errorf("before any heartbeat: Phi %v, Suspect %v, Deadline %v; want 0, false, zero",
			d.Phi(later), d.Suspect(later), d.Deadline())
	}
}

// Deadline is where phi reaches Threshold, and Suspect flips exactly there.
func TestDetectorDeadlineIsThresholdCrossing(t *testing.T) {
	for _, tc := range defaultConfigs {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.MaxSilence = 0
			d := newTestDetector(t, cfg)
			rng := rand.New(rand.NewPCG(7, 7))
			at := epoch
			d.Heartbeat(at)
			for range 3 * cfg.MaxSamples {
				at = at.Add(cfg.Interval + time.Duration(rng.NormFloat64()*float64(cfg.Interval)/5))
				d.Heartbeat(at)
			}
			dl := d.Deadline()
			before, after := dl.Add(-time.Microsecond), dl.Add(time.Microsecond)
			if d.Phi(before) >= cfg.Threshold || d.Phi(after) < cfg.Threshold {
				t.Errorf("phi %v a microsecond before the deadline and %v after, want the threshold %v between",
					d.Phi(before), d.Phi(after), cfg.Threshold)
			}
			if d.Suspect(dl.Add(-time.Nanosecond)) || !d.Suspect(dl) {
				t.Error("Suspect does not flip exactly at Deadline")
			}
		})
	}
}

// Steady beats teach a zero deviation, which the floor replaces.
func TestDetectorSteadyBeatsUseFloor(t *testing.T) {
	cfg := DefaultMeshConfig()
	d := newTestDetector(t, cfg)
	d.Heartbeat(epoch)
	last := beatEvery(d, epoch, cfg.Interval, cfg.MaxSamples)
	if mean, sd := d.Interval(); mean != cfg.Interval || sd != 0 {
		t.Fatalf("learned mean %v, deviation %v; want %v, 0", mean, sd, cfg.Interval)
	}
	want := cfg.Interval + cfg.AcceptablePause + time.Duration(math.Ceil(sigmasAt(cfg.Threshold)*float64(cfg.MinStdDev)))
	if got := d.Deadline().Sub(last); got != want {
		t.Errorf("suspect after %v of silence, want %v", got, want)
	}
}

// The window is bounded: MaxSamples new intervals replace all older ones
// (including the two seeds), and one fewer does not.
func TestDetectorWindowBounded(t *testing.T) {
	cfg := DefaultLocalConfig()
	d := newTestDetector(t, cfg)
	d.Heartbeat(epoch)
	last := beatEvery(d, epoch, cfg.Interval, 3*cfg.MaxSamples)
	last = beatEvery(d, last, 2*cfg.Interval, cfg.MaxSamples-1)
	if mean, _ := d.Interval(); mean >= 2*cfg.Interval {
		t.Errorf("after %d slow beats mean = %v, want an old sample still counted", cfg.MaxSamples-1, mean)
	}
	beatEvery(d, last, 2*cfg.Interval, 1)
	if mean, sd := d.Interval(); mean != 2*cfg.Interval || sd != 0 {
		t.Errorf("after %d slow beats mean %v, deviation %v; want %v, 0", cfg.MaxSamples, mean, sd, 2*cfg.Interval)
	}
}

// An interval that ended after the deadline is an outage, not a sample.
func TestDetectorDoesNotLearnOutages(t *testing.T) {
	cfg := DefaultTestnetConfig()
	d := newTestDetector(t, cfg)
	d.Heartbeat(epoch)
	beatEvery(d, epoch, cfg.Interval, cfg.MaxSamples)
	mean0, sd0 := d.Interval()
	late := d.Deadline().Add(time.Second)
	d.Heartbeat(late)
	if mean, sd := d.Interval(); mean != mean0 || sd != sd0 {
		t.Errorf("outage learned: mean %v -> %v, deviation %v -> %v", mean0, mean, sd0, sd)
	}
	if d.Last() != late || d.Suspect(late) {
		t.Errorf("after the late beat Last = %v, suspect %v; want %v, false", d.Last(), d.Suspect(late), late)
	}
}

// A jittery history widens the deadline (that is the point of phi-accrual)
// and MaxSilence caps it.
func TestDetectorAdaptsAndIsCapped(t *testing.T) {
	cfg := DefaultTestnetConfig()
	steady, jittery, capped := cfg, cfg, cfg
	steady.MaxSilence, jittery.MaxSilence = 0, 0
	silence := map[string]time.Duration{}
	for name, c := range map[string]Config{"steady": steady, "jittery": jittery, "capped": capped} {
		d := newTestDetector(t, c)
		rng := rand.New(rand.NewPCG(3, 3))
		at := epoch
		d.Heartbeat(at)
		for range c.MaxSamples {
			gap := c.Interval
			if name != "steady" {
				gap = time.Duration(rng.Float64() * float64(3*c.Interval)) // 0 to 750 ms
			}
			at = at.Add(gap)
			d.Heartbeat(at)
		}
		silence[name] = d.Deadline().Sub(at)
	}
	if silence["jittery"] <= silence["steady"]+200*time.Millisecond {
		t.Errorf("jittery history suspects after %v, steady after %v: want a clearly wider margin",
			silence["jittery"], silence["steady"])
	}
	if silence["jittery"] <= cfg.MaxSilence || silence["capped"] != cfg.MaxSilence {
		t.Errorf("uncapped %v, capped %v; want the cap %v to bite", silence["jittery"], silence["capped"], cfg.MaxSilence)
	}
}

func TestDetectorIgnoresTimeGoingBack(t *testing.T) {
	cfg := DefaultLocalConfig()
	d := newTestDetector(t, cfg)
	last := beatEvery(d, epoch, cfg.Interval, 10)
	mean0, _ := d.Interval()
	d.Heartbeat(last.Add(-time.Second))
	if mean, _ := d.Interval(); d.Last() != last || mean != mean0 {
		t.Errorf("a beat from the past moved Last to %v, mean %v -> %v", d.Last(), mean0, mean)
	}
}

// restart measures silence from now and does not learn the interval that
// starts there.
func TestDetectorRestart(t *testing.T) {
	cfg := DefaultLocalConfig()
	d := newTestDetector(t, cfg)
	last := beatEvery(d, epoch, cfg.Interval, 3*cfg.MaxSamples)
	mean0, sd0 := d.Interval()
	margin := d.Deadline().Sub(last)
	r := last.Add(10 * time.Second)
	d.restart(r)
	if d.Last() != r || d.Deadline().Sub(r) != margin || d.Suspect(r) {
		t.Fatalf("after restart Last = %v, deadline %v later, suspect %v; want %v, %v, false",
			d.Last(), d.Deadline().Sub(r), d.Suspect(r), r, margin)
	}
	d.Heartbeat(r.Add(cfg.Interval / 10))
	if mean, sd := d.Interval(); mean != mean0 || sd != sd0 {
		t.Errorf("interval from the restart was learned: mean %v -> %v, deviation %v -> %v", mean0, mean, sd0, sd)
	}
}

// The running sums match a recomputation however many samples pass
// through the ring.
func TestWindowSumsDoNotDrift(t *testing.T) {
	const limit = 37
	rng := rand.New(rand.NewPCG(11, 11))
	var w window
	for i := range 200_000 {
		w.add(int64(time.Second)+rng.Int64N(int64(500*time.Millisecond)), limit)
		if i%9973 != 0 && i != 200_000-1 {
			continue
		}
		var sum, sq float64
		for _, x := range w.samples {
			sum += float64(x)
		}
		mean := sum / float64(len(w.samples))
		for _, x := range w.samples {
			sq += (float64(x) - mean) * (float64(x) - mean)
		}
		wantVar := sq / float64(len(w.samples))
		gotMean, gotVar := w.meanVar()
		if math.Abs(gotMean-mean) > 1e-6 || math.Abs(gotVar-wantVar) > 1e-6*wantVar {
			t.Fatalf("after %d samples: mean %v var %v, recomputed %v %v", i+1, gotMean, gotVar, mean, wantVar)
		}
	}
}

func TestNewDetectorRejectsBadConfig(t *testing.T) {
	cfg := DefaultLocalConfig()
	cfg.MinStdDev = 0
	if _, err := NewDetector(cfg); err == nil {
		t.Error("NewDetector accepted MinStdDev 0")
	}
}
