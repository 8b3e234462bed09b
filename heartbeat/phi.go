package heartbeat

import "math"

// Coefficients of the logistic approximation to the standard normal
// cumulative distribution used by Akka's phi-accrual detector (Bowling et
// al., "A logistic approximation to the cumulative normal distribution",
// 2009): P(Z > y) ~= 1 / (1 + exp(y*(c1 + c3*y*y))), good to about 1e-4.
const (
	logisticC1 = 1.5976
	logisticC3 = 0.070566
)

// phi is -log10 of the probability that a live subject, whose beat
// intervals are normal with the given mean and standard deviation, stays
// silent for at least elapsed. All three are in the same unit; sd must be
// > 0. It is continuous, increasing in elapsed, log10(2) at the mean, and
// finite for every finite input (it grows like the cube of elapsed).
func phi(elapsed, mean, sd float64) float64 {
	y := (elapsed - mean) / sd
	a := y * (logisticC1 + logisticC3*y*y)
	// phi = log10(1 + e^a), written to neither overflow nor lose digits.
	if a > 0 {
		return (a + math.Log1p(math.Exp(-a))) / math.Ln10
	}
	return math.Log1p(math.Exp(a)) / math.Ln10
}

// sigmasAt inverts phi: the number of standard deviations past the mean
// at which phi reaches threshold (> log10 2). It solves
// c3*y^3 + c1*y = ln(10^threshold - 1) with Cardano's formula; the cubic
// is increasing, so the root is unique. For threshold 8 it is about 5.22.
func sigmasAt(threshold float64) float64 {
	a := threshold*math.Ln10 + math.Log1p(-math.Pow(10, -threshold))
	p := logisticC1 / logisticC3
	q := -a / logisticC3
	r := math.Sqrt(q*q/4 + p*p*p/27)
	return math.Cbrt(-q/2+r) + math.Cbrt(-q/2-r)
}
