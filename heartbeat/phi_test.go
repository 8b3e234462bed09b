package heartbeat

import (
	"math"
	"testing"
)

// akkaPhi is Akka's two-branch form of the same formula, kept here as the
// reference the stable form must agree with.
func akkaPhi(elapsed, mean, sd float64) float64 {
	y := (elapsed - mean) / sd
	e := math.Exp(-y * (logisticC1 + logisticC3*y*y))
	if elapsed > mean {
		return -math.Log10(e / (1 + e))
	}
	return -math.Log10(1 - 1/(1+e))
}

func TestPhiMatchesAkka(t *testing.T) {
	const mean, sd = 1000.0, 100.0
	for elapsed := 0.0; elapsed <= 1700; elapsed += 25 {
		got, want := phi(elapsed, mean, sd), akkaPhi(elapsed, mean, sd)
		if math.Abs(got-want) > 1e-9*max(1, want) {
			t.Errorf("phi(%v) = %v, Akka's form gives %v", elapsed, got, want)
		}
	}
}

func TestPhiShape(t *testing.T) {
	const mean, sd = 250.0, 100.0
	if got := phi(mean, mean, sd); math.Abs(got-math.Log10(2)) > 1e-12 {
		t.Errorf("phi at the mean = %v, want log10(2)", got)
	}
	prev := -1.0
	for elapsed := 0.0; elapsed < 1e6; elapsed = elapsed*1.5 + 1 {
		p := phi(elapsed, mean, sd)
		if math.IsNaN(p) || math.IsInf(p, 0) || p < prev {
			t.Fatalf("phi(%v) = %v after %v: want finite and non-decreasing", elapsed, p, prev)
		}
		prev = p
	}
	if prev < 1e6 {
		t.Errorf("phi far past the mean = %v, want huge", prev)
	}
}

// sigmasAt is the exact inverse of phi, so the Detector's deadline is where
// phi reaches the threshold.
func TestSigmasAtInvertsPhi(t *testing.T) {
	for _, threshold := range []float64{1, 2, 3, 5, 8, 10, 12, 16, 30, 100} {
		y := sigmasAt(threshold)
		if got := phi(y, 0, 1); math.Abs(got-threshold) > 1e-9*threshold {
			t.Errorf("phi(sigmasAt(%v) = %v) = %v", threshold, y, got)
		}
	}
	// The number the package doc quotes.
	if y := sigmasAt(8); math.Abs(y-5.226) > 0.001 {
		t.Errorf("sigmasAt(8) = %v, want 5.226", y)
	}
}
