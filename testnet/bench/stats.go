package bench

import (
	"slices"
	"time"
)

// Summary is the median, minimum and maximum of repeated measurements.
type Summary struct {
	Median, Min, Max time.Duration
	// N is the number of measurements.
	N int
}

// Summarize returns the summary of ds (the zero Summary when ds is empty).
// The median of an even count is the mean of the two middle values.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	mid := len(s) / 2
	med := s[mid]
	if len(s)%2 == 0 {
		med = (s[mid-1] + s[mid]) / 2
	}
	return Summary{Median: med, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// Quantile returns the q-quantile (0 <= q <= 1) of ds by the nearest-rank
// method, or 0 when ds is empty.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// ms renders d in milliseconds to the microsecond, the unit of every CSV.
func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
