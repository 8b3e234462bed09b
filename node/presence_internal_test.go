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

// noteTaken counts a peer one step busier until its next announcement,
// but not over an announcement that came after the hand-off was sent:
// that one may count the step already (gossip beat the ack), and counting
// it twice made a peer with room for one more look full (room 0), so the
// next step went to a full peer.
func TestNoteTakenNotOverANewerAnnouncement(t *testing.T) {
	id := peer.ID("roomy")
	p := &presence{peers: map[peer.ID]*presenceEntry{}}
	p.peers[id] = &presenceEntry{ann: announcement{Slots: 1, Free: 1, Room: 2, Seq: 5, Boot: 1}}
	sent := p.version(id)
	p.noteTaken(id, sent)
	if a, _ := p.get(id); a.Free != 0 || a.Room != 1 || a.Queue != 1 {
		t.Errorf("taken on the announcement it was sent on: free %d room %d queue %d, want 0 1 1", a.Free, a.Room, a.Queue)
	}

	p.peers[id] = &presenceEntry{ann: announcement{Slots: 1, Free: 1, Room: 2, Seq: 5, Boot: 1}}
	sent = p.version(id)
	// The peer took the step and announced it before its ack came back.
	p.peers[id].ann = announcement{Slots: 1, Free: 0, Room: 1, Queue: 1, Seq: 6, Boot: 1}
	p.noteTaken(id, sent)
	if a, _ := p.get(id); a.Room != 1 || a.full() {
		t.Errorf("taken after a newer announcement: room %d (full %v), want 1 (not full)", a.Room, a.full())
	}
	// A restarted peer (new boot) is a newer announcement too.
	p.peers[id].ann = announcement{Slots: 1, Free: 1, Room: 2, Seq: 1, Boot: 2}
	p.noteTaken(id, sent)
	if a, _ := p.get(id); a.Room != 2 {
		t.Errorf("taken after a restart's announcement: room %d, want 2", a.Room)
	}
}
