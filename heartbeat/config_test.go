package heartbeat

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigsValid(t *testing.T) {
	for _, tc := range defaultConfigs {
		if err := tc.cfg.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // substrings of the error; nil means valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"zero interval", func(c *Config) { c.Interval = 0 }, []string{"Interval must be > 0"}},
		{"zero check interval", func(c *Config) { c.CheckInterval = 0 }, []string{"CheckInterval"}},
		{"threshold too low", func(c *Config) { c.Threshold = 0.5 }, []string{"Threshold"}},
		{"threshold NaN", func(c *Config) { c.Threshold = math.NaN() }, []string{"Threshold"}},
		{"zero min std dev", func(c *Config) { c.MinStdDev = 0 }, []string{"MinStdDev"}},
		{"negative pause", func(c *Config) { c.AcceptablePause = -time.Second }, []string{"AcceptablePause"}},
		{"one sample", func(c *Config) { c.MaxSamples = 1 }, []string{"MaxSamples"}},
		{"ceiling below interval", func(c *Config) { c.MaxSilence = c.Interval }, []string{"MaxSilence"}},
		{"no ceiling", func(c *Config) { c.MaxSilence = 0 }, nil},
		{"zero late tolerance", func(c *Config) { c.LateTimerTolerance = 0 }, []string{"LateTimerTolerance"}},
		{"confirm without timeout", func(c *Config) {
			c.Confirm = func(context.Context, string) bool { return false }
			c.ConfirmTimeout = 0
		}, []string{"ConfirmTimeout"}},
		{"timeout without confirm", func(c *Config) { c.ConfirmTimeout = 0 }, nil},
		{"every problem reported", func(c *Config) { c.Interval, c.MaxSamples = 0, 0 },
			[]string{"Interval must be > 0", "MaxSamples"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultTestnetConfig()
			tc.change(&cfg)
			err := cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

// The numbers the package doc promises.
func TestConfigBounds(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name         string
		cfg          Config
		suspectAfter time.Duration // to the millisecond
		bound        time.Duration
	}{
		{"mesh", DefaultMeshConfig(), 5306 * ms, 5556 * ms},
		{"testnet", DefaultTestnetConfig(), 1272 * ms, 1322 * ms},
		{"local", DefaultLocalConfig(), 330 * ms, 340 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.SuspectAfter().Truncate(ms); got != tc.suspectAfter {
				t.Errorf("SuspectAfter = %v, want %v", got, tc.suspectAfter)
			}
			if got := tc.cfg.DetectionBound().Truncate(ms); got != tc.bound {
				t.Errorf("DetectionBound = %v, want %v", got, tc.bound)
			}
		})
	}
	tn := DefaultTestnetConfig()
	if b := tn.DetectionBound(); b > 1500*ms || b <= tn.Interval {
		t.Errorf("testnet DetectionBound = %v, want in (%v, 1.5s]", b, tn.Interval)
	}
	// However jittery the history, the ceiling keeps the testnet in 1.5 s.
	if worst := tn.MaxSilence + tn.CheckInterval; worst > 1500*ms {
		t.Errorf("testnet ceiling + check = %v, want <= 1.5s", worst)
	}
	tn.Confirm = func(context.Context, string) bool { return false }
	if got, want := tn.DetectionBound(), DefaultTestnetConfig().DetectionBound()+tn.ConfirmTimeout; got != want {
		t.Errorf("DetectionBound with Confirm = %v, want %v", got, want)
	}
	tn.MaxSilence = tn.Interval + time.Millisecond
	if got := tn.SuspectAfter(); got != tn.MaxSilence {
		t.Errorf("SuspectAfter with a low ceiling = %v, want the ceiling %v", got, tn.MaxSilence)
	}
}
