package outage

import (
	"slices"
	"testing"
	"time"
)

func TestRankOrder(t *testing.T) {
	// threeZone at 10:00 with a 5 min step (7 min need): a is powered for 2
	// hours (1h53m spare), b for 6 and c for 10, both capped at AmpleMargin
	// 3h.
	tests := []struct {
		name   string
		self   string
		cands  []Candidate
		policy UnknownPolicy
		want   []string
	}{
		{"other zones first, then load", "a", []Candidate{
			{Peer: "a1"}, {Peer: "b1", Queue: 5}, {Peer: "c1"},
		}, PreferKnown, []string{"c1", "b1", "a1"}},
		{"margin before load", "c", []Candidate{
			{Peer: "a1"}, {Peer: "b1", Queue: 3},
		}, PreferKnown, []string{"b1", "a1"}},
		{"margin beyond AmpleMargin is equal, load decides", "a", []Candidate{
			{Peer: "c1", Queue: 2}, {Peer: "b1", Queue: 1},
		}, PreferKnown, []string{"b1", "c1"}},
		{"queue, then CPU band", "a", []Candidate{
			{Peer: "b1", Queue: 2, CPU: 5}, {Peer: "b2", Queue: 1, CPU: 90}, {Peer: "b3", Queue: 1, CPU: 30},
		}, PreferKnown, []string{"b3", "b2", "b1"}},
		{"no zone for self: no zone preference", "", []Candidate{
			{Peer: "a1"}, {Peer: "b1", Queue: 1},
		}, PreferKnown, []string{"b1", "a1"}},
		{"excluded peers are dropped", "a", []Candidate{
			{Peer: "stale"}, {Peer: "suspect"}, {Peer: "drain"}, {Peer: "ghost"}, {Peer: "a1"},
		}, PreferKnown, []string{"a1"}},
		{"prefer-known: known in own zone before unknown elsewhere", "a", []Candidate{
			{Peer: "x1"}, {Peer: "a1", Queue: 9},
		}, PreferKnown, []string{"a1", "x1"}},
		{"allow: unknown elsewhere before known in own zone", "a", []Candidate{
			{Peer: "a1"}, {Peer: "x1"},
		}, AllowUnknown, []string{"x1", "a1"}},
		{"allow: known margin before unknown in another zone", "c", []Candidate{
			{Peer: "x1"}, {Peer: "b1", Queue: 4},
		}, AllowUnknown, []string{"b1", "x1"}},
		{"deny: unknown dropped", "a", []Candidate{
			{Peer: "x1"}, {Peer: "a1"},
		}, DenyUnknown, []string{"a1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.AmpleMargin = 3 * time.Hour
			cfg.Unknown = tc.policy
			now := at(10, 0, 0)
			clock := &setClock{t: now}
			v := newView(t, clock, cfg, threeZone)
			for _, p := range []string{"a1", "b1", "b2", "b3", "c1", "suspect"} {
				v.Observe(p, p[:1], false, now)
			}
			v.Suspect("suspect")
			v.Observe("x1", "x", false, now) // zone not in the timetable
			v.Observe("stale", "b", false, now.Add(-time.Minute))
			v.Observe("drain", "b", true, now)
			got := v.Rank(tc.cands, Candidate{Peer: "me", Zone: tc.self}, 5*time.Minute)
			if !slices.Equal(peers(got), tc.want) {
				t.Errorf("Rank = %v, want %v", peers(got), tc.want)
			}
		})
	}
}

func TestRankFillsVerdicts(t *testing.T) {
	now := at(10, 0, 0)
	v := newView(t, &setClock{t: now}, testConfig(), threeZone)
	v.Observe("b1", "b", false, now)
	got := v.Rank([]Candidate{{Peer: "b1", Zone: "stale-zone-name", Queue: 3, CPU: 12}}, Candidate{Zone: "a"}, time.Minute)
	if len(got) != 1 {
		t.Fatalf("Rank = %v", got)
	}
	c := got[0]
	if c.Zone != "b" || c.Queue != 3 || c.CPU != 12 || !c.Verdict.OK || !c.Verdict.Known || !c.Verdict.PoweredUntil.Equal(at(16, 0, 0)) {
		t.Errorf("ranked candidate %+v", c)
	}
}

func TestRankExcludesPeersAboutToGoDark(t *testing.T) {
	// At 11:50 zone a goes dark in 10 minutes: a 5 min step may go there, a
	// 15 min one may not, even though a's peers are idle and b's are busy.
	now := at(11, 50, 0)
	v := newView(t, &setClock{t: now}, testConfig(), threeZone)
	v.Observe("a1", "a", false, now)
	v.Observe("b1", "b", false, now)
	cands := []Candidate{{Peer: "a1"}, {Peer: "b1", Queue: 20, CPU: 99}}
	if got := peers(v.Rank(cands, Candidate{Zone: "c"}, 15*time.Minute)); !slices.Equal(got, []string{"b1"}) {
		t.Errorf("15 min step: %v, want [b1]", got)
	}
	if got := peers(v.Rank(cands, Candidate{Zone: "c"}, 5*time.Minute)); !slices.Equal(got, []string{"b1", "a1"}) {
		t.Errorf("5 min step: %v, want [b1 a1] (b has more spare)", got)
	}
}

func TestRankTiesAreSeededAndSpread(t *testing.T) {
	now := at(10, 0, 0)
	cands := []Candidate{{Peer: "b1", CPU: 31}, {Peer: "b2", CPU: 35}, {Peer: "b3", CPU: 39}}
	run := func(seed uint64) [][]string {
		cfg := testConfig()
		cfg.Seed = seed
		v := newView(t, &setClock{t: now}, cfg, threeZone)
		for _, c := range cands {
			v.Observe(c.Peer, "b", false, now)
		}
		var out [][]string
		for range 30 {
			out = append(out, peers(v.Rank(cands, Candidate{Zone: "a"}, time.Minute)))
		}
		return out
	}
	a, b := run(42), run(42)
	firsts := map[string]int{}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			t.Fatalf("call %d: same seed, different order: %v vs %v", i, a[i], b[i])
		}
		firsts[a[i][0]]++
	}
	if len(firsts) != 3 {
		t.Errorf("over 30 calls the tied peers came first %v; want all three to get work", firsts)
	}
	if c := run(43); slices.EqualFunc(a, c, slices.Equal) {
		t.Error("seeds 42 and 43 gave the same 30 orders")
	}
}
