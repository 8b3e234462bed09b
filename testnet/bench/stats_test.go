package bench

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		in   []time.Duration
		want Summary
	}{
		{nil, Summary{}},
		{[]time.Duration{5 * ms}, Summary{5 * ms, 5 * ms, 5 * ms, 1}},
		{[]time.Duration{9 * ms, 1 * ms, 4 * ms}, Summary{4 * ms, 1 * ms, 9 * ms, 3}},
		{[]time.Duration{8 * ms, 2 * ms, 4 * ms, 6 * ms}, Summary{5 * ms, 2 * ms, 8 * ms, 4}},
	} {
		if got := Summarize(tc.in); got != tc.want {
			t.Errorf("Summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 10; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {1, 10}} {
		if got := Quantile(ds, tc.q); got != tc.want {
			t.Errorf("Quantile(1..10, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing should be 0")
	}
	if ds[0] != 10 {
		t.Error("Quantile sorted its argument in place")
	}
}
