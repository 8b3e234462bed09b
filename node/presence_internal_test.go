package node

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

func TestAnnouncementSameIgnoresLoad(t *testing.T) {
	a := announcement{ID: "p", Zone: "z0", Services: []string{"s"}, Slots: 16, Free: 16, Room: 80, CPU: 3, Mem: 40, Seq: 1, Refresh: 10000}
	b := a
	b.CPU, b.Mem, b.Seq = 97, 41, 2
	if !a.same(b) {
		t.Error("load figures and seq count as a change")
	}
	for name, change := range map[string]func(*announcement){
		"free":     func(x *announcement) { x.Free-- },
		"draining": func(x *announcement) { x.Draining = true },
		"services": func(x *announcement) { x.Services = []string{"s", "t"} },
		"sched":    func(x *announcement) { x.Sched = 1 },
		"refresh":  func(x *announcement) { x.Refresh = 20000 },
	} {
		c := a
		change(&c)
		if a.same(c) {
			t.Errorf("%s change not seen", name)
		}
	}
}

// An announcement without a refresh interval (an older peer) has no
// "refresh" field on the wire, and one with it still decodes in an older
// peer's struct (unknown fields are ignored by encoding/json).
func TestAnnouncementRefreshOmitted(t *testing.T) {
	b, err := json.Marshal(announcement{ID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "refresh") {
		t.Errorf("refresh on the wire when zero: %s", b)
	}
}

func TestPresenceRefreshGrowsWithView(t *testing.T) {
	cfg := TestnetConfig()
	cfg.fillDefaults()
	p := &presence{n: &Node{cfg: cfg}, peers: map[peer.ID]*presenceEntry{}}
	add := func(n int, refresh int64) {
		for i := range n {
			p.peers[peer.ID(strings.Repeat("x", len(p.peers)+1+i))] = &presenceEntry{ann: announcement{Refresh: refresh}}
		}
	}
	if got := p.refresh(); got != cfg.PresenceRefresh {
		t.Errorf("empty view: refresh %v, want %v", got, cfg.PresenceRefresh)
	}
	add(79, 1000)
	if got, want := p.refresh(), 79*cfg.PresenceRefreshPerPeer; got != want {
		t.Errorf("79 peers: refresh %v, want %v", got, want)
	}
	if got, want := p.ttlFor(announcement{Refresh: 40000}), 120*time.Second; got != want {
		t.Errorf("ttlFor(40 s refresh) = %v, want %v", got, want)
	}
	if got := p.ttlFor(announcement{}); got != cfg.PresenceTTL {
		t.Errorf("ttlFor(older peer) = %v, want PresenceTTL %v", got, cfg.PresenceTTL)
	}
	add(1, 0) // an older peer: back to the old pace
	if got := p.refresh(); got != cfg.AnnounceInterval {
		t.Errorf("with an older peer: refresh %v, want AnnounceInterval %v", got, cfg.AnnounceInterval)
	}
}
