package outage

import (
	"fmt"
	"testing"
	"time"
)

func TestExpected(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	seq := func(n int) []time.Duration { // 1ms .. n ms
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = ms(i + 1)
		}
		return out
	}
	tests := []struct {
		name     string
		learned  []time.Duration
		declared time.Duration
		want     time.Duration
	}{
		{"nothing known: default", nil, 0, time.Minute},
		{"declared, no samples", nil, 30 * time.Second, 30 * time.Second},
		{"declared wins below MinSamples", seq(4), 30 * time.Second, 30 * time.Second},
		{"learned wins at MinSamples", seq(5), 30 * time.Second, ms(5)},
		{"p90 of ten samples is the ninth", seq(10), 0, ms(9)},
		{"p90 of twenty is the eighteenth", seq(20), time.Hour, ms(18)},
		{"undeclared: a few samples beat the default", seq(2), 0, ms(2)},
		{"one slow outlier in ten is above p90", append(seq(9), time.Hour), 0, ms(9)},
		{"two slow outliers in ten reach p90", append(seq(8), time.Hour, time.Hour), 0, time.Hour},
		{"only the last Samples (32) count", append(repeat(time.Hour, 40), seq(32)...), 0, ms(29)},
		{"negative durations are ignored", []time.Duration{-time.Second, -time.Second, -time.Second, -time.Second, -time.Second}, 7 * time.Second, 7 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newView(t, &setClock{t: at(7, 0, 0)}, testConfig(), "")
			for _, d := range tc.learned {
				v.Learn("svc", d)
			}
			if got := v.Expected("svc", tc.declared); got != tc.want {
				t.Errorf("Expected = %v, want %v", got, tc.want)
			}
			if got := v.Expected("other", 0); got != time.Minute {
				t.Errorf("another service learned from svc: %v", got)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestExpectedFollowsChange(t *testing.T) {
	v := newView(t, &setClock{t: at(7, 0, 0)}, testConfig(), "")
	for range 32 {
		v.Learn("s", time.Second)
	}
	if got := v.Expected("s", 0); got != time.Second {
		t.Fatalf("steady 1s service: Expected = %v", got)
	}
	// The service slows to 10 s: within 4 runs p90 of 32 (rank 29) is
	// still 1 s, after 4 it is 10 s.
	for i := 1; i <= 4; i++ {
		v.Learn("s", 10*time.Second)
		want := time.Second
		if i == 4 {
			want = 10 * time.Second
		}
		if got := v.Expected("s", 0); got != want {
			t.Errorf("after %d slow runs: Expected = %v, want %v", i, got, want)
		}
	}
}

func TestLearnBoundsServices(t *testing.T) {
	v := newView(t, &setClock{t: at(7, 0, 0)}, testConfig(), "")
	for i := range maxServices + 10 {
		v.Learn(fmt.Sprint("svc", i), time.Second)
	}
	if n := len(v.learn.services); n != maxServices {
		t.Errorf("learned %d services, want the cap %d", n, maxServices)
	}
	if got := v.Expected(fmt.Sprint("svc", maxServices+5), 0); got != time.Minute {
		t.Errorf("a service past the cap was learned: %v", got)
	}
}
