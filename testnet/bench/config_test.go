package bench

import (
	"slices"
	"testing"
)

func TestParseExperiments(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", Experiments},
		{"all", Experiments},
		{"wfcommons, sequential", []string{ExpSequential, ExpWfcommons}},
		{"nested", []string{ExpNested}},
		{"flood", []string{ExpFlood}},
		{"flood, idle", []string{ExpIdle, ExpFlood}},
	} {
		got, err := ParseExperiments(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseExperiments(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if all, _ := ParseExperiments("all"); slices.Contains(all, ExpFlood) || slices.Contains(all, ExpIdle) {
		t.Errorf("all includes an experiment that runs by itself: %v", all)
	}
	if _, err := ParseExperiments("sequential,bogus"); err == nil {
		t.Error("an unknown experiment must be an error")
	}
}

func TestModes(t *testing.T) {
	c := DefaultConfig()
	ms := c.Modes()
	if len(ms) != 2 || ms[0].Name != "noop" || ms[1].Name != "sleep100ms" || string(ms[1].input()) != `{"sleep_ms":100}` || ms[0].input() != nil {
		t.Errorf("modes %+v", ms)
	}
	c.ServiceTime = 0
	if got := c.Modes(); len(got) != 1 {
		t.Errorf("service time 0: %d modes, want noop only", len(got))
	}
}
