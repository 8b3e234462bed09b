package outage

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestObservePrunesLongGonePeers(t *testing.T) {
	t0 := at(7, 0, 0)
	clock := &setClock{t: t0}
	v := newView(t, clock, testConfig(), twoZone)
	for i := range 40 {
		v.Observe(fmt.Sprint("old", i), "east", false, t0)
	}
	v.Suspect("old0") // a suspicion in force keeps its peer
	// Ten TTLs later a new crowd arrives; once the map has doubled since
	// the last prune, the old peers are dropped.
	t1 := t0.Add(forgetAfter*testConfig().PresenceTTL + time.Second)
	clock.Set(t1)
	v.Suspect("old0")
	for i := range 30 {
		v.Observe(fmt.Sprint("new", i), "west", false, t1)
	}
	if _, ok := v.Zone("old5"); ok {
		t.Error("a peer unheard for ten TTLs was kept")
	}
	if _, ok := v.Zone("old0"); !ok {
		t.Error("a suspected peer was pruned")
	}
	if z, ok := v.Zone("new29"); !ok || z != "west" {
		t.Errorf("Zone(new29) = %q, %v", z, ok)
	}
	v.mu.RLock()
	n := len(v.peers)
	v.mu.RUnlock()
	if n != 31 {
		t.Errorf("%d peers kept, want 30 new + 1 suspected", n)
	}
}

// TestConcurrentUse exercises every method from many goroutines; run with
// -race. Afterwards the view must still answer consistently.
func TestConcurrentUse(t *testing.T) {
	clock := &setClock{t: at(10, 0, 0)}
	v := newView(t, clock, testConfig(), threeZone)
	s := v.Schedule()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				p := fmt.Sprintf("p%d", (g*7+i)%20)
				zone := string(rune('a' + i%3))
				switch i % 7 {
				case 0:
					v.Observe(p, zone, false, clock.Now())
				case 1:
					v.Suspect(p)
				case 2:
					v.Alive(p)
				case 3:
					v.Learn("svc", time.Duration(i)*time.Millisecond)
				case 4:
					_ = v.Rank([]Candidate{{Peer: "p1"}, {Peer: "p2"}, {Peer: p}}, Candidate{Zone: zone}, v.Expected("svc", time.Second))
				case 5:
					_ = v.CanRun(p, time.Minute)
					_, _ = v.Drain(zone)
				case 6:
					v.Offer(s)
					if i%49 == 0 {
						v.Forget(p)
					}
				}
			}
		}()
	}
	wg.Wait()
	v.Observe("final", "b", false, clock.Now())
	v.Alive("final")
	if vd := v.CanRun("final", time.Minute); !vd.OK || !vd.Known {
		t.Errorf("after concurrent use: %s", vd.Reason)
	}
}
