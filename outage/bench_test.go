package outage

import (
	"fmt"
	"testing"
	"time"
)

// benchView is threeZone at 10:00 with 40 live peers spread over the three
// zones and two zones not in the timetable.
func benchView(b *testing.B) (*View, []Candidate) {
	now := at(10, 0, 0)
	v := newView(b, &setClock{t: now}, testConfig(), threeZone)
	zones := []string{"a", "b", "c", "x", "y"}
	cands := make([]Candidate, 40)
	for i := range cands {
		p := fmt.Sprintf("12D3KooWpeer%02d", i)
		v.Observe(p, zones[i%len(zones)], i%13 == 0, now)
		cands[i] = Candidate{Peer: p, Queue: i % 4, CPU: float64(i * 7 % 100)}
	}
	return v, cands
}

func BenchmarkCanRun(b *testing.B) {
	v, cands := benchView(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = v.CanRun(cands[i%len(cands)].Peer, 5*time.Minute)
		i++
	}
}

func BenchmarkRank40(b *testing.B) {
	v, cands := benchView(b)
	self := Candidate{Zone: "a"}
	b.ReportAllocs()
	for b.Loop() {
		if len(v.Rank(cands, self, 5*time.Minute)) == 0 {
			b.Fatal("no candidate")
		}
	}
}

func BenchmarkExpected(b *testing.B) {
	v, _ := benchView(b)
	for i := range 100 {
		v.Learn("svc", time.Duration(i)*time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = v.Expected("svc", time.Second)
	}
}
