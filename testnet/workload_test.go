package testnet

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/schedule"
)

// TestMixedWorkflow checks that the generated workload parses, mixes every
// kind, and gives every step a sleep time in range.
func TestMixedWorkflow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := map[string]int{}
	for i := range 500 {
		g := MixedWorkflow(rng)
		kinds[g.Kind]++
		w, err := grammar.Parse("gen.bedwe", []byte(g.Source))
		if err != nil {
			t.Fatalf("workflow %d does not parse: %v\n%s", i, err, g.Source)
		}
		var in struct {
			SleepMs map[string]int `json:"sleep_ms"`
		}
		if err := json.Unmarshal(g.Input, &in); err != nil {
			t.Fatal(err)
		}
		labels := grammar.Labels(w)
		if len(labels) != len(in.SleepMs) {
			t.Fatalf("workflow %d: %d services, %d sleep times\n%s", i, len(labels), len(in.SleepMs), g.Source)
		}
		for _, name := range labels {
			ms, ok := in.SleepMs[name]
			if !ok || ms < 100 || ms > 3000 {
				t.Fatalf("workflow %d: service %s sleeps %d ms (present %v)", i, name, ms, ok)
			}
			if ms > 400 && !strings.Contains(g.Source, name+"[expect=3s]") {
				t.Errorf("workflow %d: long step %s without expect=3s: %s", i, name, g.Source)
			}
		}
		if g.Kind == KindChoice && !strings.Contains(g.Source, "CHOICE(") {
			t.Errorf("choice workflow without CHOICE: %s", g.Source)
		}
		if g.Critical <= 0 || g.Steps < 3 {
			t.Errorf("workflow %d: critical %s, steps %d: %s", i, g.Critical, g.Steps, g.Source)
		}
	}
	for _, k := range []string{KindSequence, KindFork, KindChoice, KindLong} {
		if kinds[k] < 30 {
			t.Errorf("only %d %s workflows of 500: %v", kinds[k], k, kinds)
		}
	}
	// The same seed gives the same workload.
	a, b := MixedWorkflow(rand.New(rand.NewPCG(7, 7))), MixedWorkflow(rand.New(rand.NewPCG(7, 7)))
	if a.Source != b.Source || string(a.Input) != string(b.Input) {
		t.Errorf("same seed, different workflows:\n%s\n%s", a.Source, b.Source)
	}
}

// TestRotation checks the generated timetable: one zone dark at a time, 2 h
// of every 6 h each, an hour of full power between cuts.
func TestRotation(t *testing.T) {
	text, s, err := Rotation(RotationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Parse(text); err != nil {
		t.Fatalf("rotation does not parse: %v\n%s", err, text)
	}
	loc, _ := time.LoadLocation("Africa/Johannesburg")
	from := time.Date(2026, 3, 2, 0, 0, 0, 0, loc)
	for _, z := range []string{"north", "south"} {
		ws := s.Windows(z, from, from.Add(24*time.Hour))
		if len(ws) != 4 {
			t.Fatalf("zone %s: %d windows in a day, want 4: %v", z, len(ws), ws)
		}
		for _, w := range ws {
			if w.Duration() != 2*time.Hour {
				t.Errorf("zone %s: window %v lasts %s", z, w, w.Duration())
			}
		}
	}
	for m := 0; m < 24*60; m += 15 {
		at := from.Add(time.Duration(m) * time.Minute)
		n, _ := s.StateAt("north", at)
		so, _ := s.StateAt("south", at)
		if n == schedule.Dark && so == schedule.Dark {
			t.Fatalf("both zones dark at %s", at)
		}
		want := schedule.Dark
		if h := (m / 60) % 6; h != 0 && h != 1 {
			want = schedule.Powered
		}
		if n != want {
			t.Errorf("north at %s: %s, want %s", at.Format("15:04"), n, want)
		}
	}
	if _, _, err := Rotation(RotationOptions{Period: 5 * time.Hour}); err == nil {
		t.Error("a period that does not divide a day was accepted")
	}
}
