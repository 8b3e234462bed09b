package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/env"
	"github.com/bedwe/bedwe/node/member"
	"github.com/bedwe/bedwe/node/rpc"
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
	p := &presence{n: &Node{clock: clockwork.NewRealClock(), rand: env.NewRand(1), cfg: cfg}, peers: map[peer.ID]*presenceEntry{}}
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

// A greeted peer's answer carries its own announcement and its view, less
// the greeting peer, with each entry's age and time to live; the greeting
// peer takes from it only the peers its view lacks (observeRelayed),
// keeping their age, and leaves alone a peer it already holds, an entry
// the relaying peer was about to drop, an entry that names a peer other
// than the one that signed it, and itself.
func TestHelloAnswerRelaysTheView(t *testing.T) {
	relay := choiceNode(t, 3)
	gate, err := member.NewGate(member.Policy{Self: relay.host.ID()})
	if err != nil {
		t.Fatal(err)
	}
	relay.gate = gate
	greeter := newPeerID(t)
	relay.pres.peers[greeter] = &presenceEntry{ann: announcement{ID: greeter.String(), Seq: 1, Boot: 1}, lastSeen: time.Now(), ttl: time.Hour}
	var ans helloAnswer
	if err := json.Unmarshal(relay.pres.helloAnswerFor(greeter), &ans); err != nil {
		t.Fatal(err)
	}
	if ans.Self.ID != relay.host.ID().String() {
		t.Errorf("answer's own announcement names %q, want the relaying peer %s", ans.Self.ID, relay.host.ID())
	}
	if len(ans.View) != 3 {
		t.Fatalf("answer relays %d peers, want the 3 of its view besides the greeting peer", len(ans.View))
	}
	for _, r := range ans.View {
		if r.Ann.ID == greeter.String() {
			t.Error("the answer relays the greeting peer's own announcement back to it")
		}
		if r.TTLMs != time.Hour.Milliseconds() || r.AgeMs < 0 || r.AgeMs > time.Minute.Milliseconds() {
			t.Errorf("relayed %s with age %d ms, ttl %d ms; want its entry's (ttl one hour)", r.Ann.ID, r.AgeMs, r.TTLMs)
		}
	}

	taker := choiceNode(t, 0)
	taker.gate, err = member.NewGate(member.Policy{Self: taker.host.ID()})
	if err != nil {
		t.Fatal(err)
	}
	// The relaying peer's view is keyed by the peers the answer names.
	ids := map[string]peer.ID{}
	for id := range relay.pres.peers {
		ids[id.String()] = id
	}
	known := ans.View[0]
	held := announcement{ID: known.Ann.ID, Zone: "mine", Seq: 9, Boot: 9}
	taker.pres.peers[ids[known.Ann.ID]] = &presenceEntry{ann: held, lastSeen: time.Now(), ttl: time.Hour}
	old := ans.View[1]
	old.AgeMs, old.TTLMs = 61_000, 60_000
	aged := ans.View[2]
	aged.AgeMs = 30_000
	impostor := aged
	impostor.Ann.ID = "not-a-peer-id"
	self := aged
	self.Ann.ID = taker.host.ID().String()
	for _, r := range []relayedAnnouncement{known, old, aged, impostor, self} {
		taker.pres.observeRelayed(r)
	}
	if e := taker.pres.peers[ids[known.Ann.ID]]; e.ann.Zone != "mine" || e.ann.Seq != 9 {
		t.Errorf("a relayed announcement replaced the peer's own (zone %q seq %d)", e.ann.Zone, e.ann.Seq)
	}
	if _, ok := taker.pres.peers[ids[old.Ann.ID]]; ok {
		t.Error("an entry older than its time to live was taken")
	}
	e, ok := taker.pres.peers[ids[aged.Ann.ID]]
	if !ok {
		t.Fatal("a peer the view lacked was not taken from the relayed view")
	}
	if since := time.Since(e.lastSeen); since < 30*time.Second || since > 31*time.Second || e.ttl != time.Hour {
		t.Errorf("relayed entry last seen %v ago with ttl %v; want the relaying peer's 30 s and one hour", since, e.ttl)
	}
	if e.ann.ID != aged.Ann.ID {
		t.Errorf("relayed entry filed naming %q, want %q", e.ann.ID, aged.Ann.ID)
	}
	if len(taker.pres.peers) != 2 {
		t.Errorf("view holds %d peers after the relay, want 2 (the held one and the one taken)", len(taker.pres.peers))
	}
}

// pullView greets a peer of the view this node is connected to, never one
// it would have to dial, and takes in the view it answers: here the only
// connected peer (a real host) relays a peer this node had not heard of.
func TestPullViewAsksAConnectedPeer(t *testing.T) {
	n := choiceNode(t, 5) // five known peers, none connected
	gate, err := member.NewGate(member.Policy{Self: n.host.ID()})
	if err != nil {
		t.Fatal(err)
	}
	n.gate = gate
	n.calls = rpc.NewMux(n.host, nil, time.Second, nil)
	t.Cleanup(n.calls.Close)

	relay := p2ptest.Host(t)
	unheard := newPeerID(t)
	var greetings atomic.Int32
	rpc.Serve(relay, nil, api.ProtoPresenceHello, maxPresenceBytes, 10*time.Second, func(_ context.Context, from peer.ID, _ []byte) []byte {
		greetings.Add(1)
		ans, _ := json.Marshal(helloAnswer{
			Self: announcement{ID: relay.ID().String(), Zone: "z2", Seq: 1, Boot: 1},
			View: []relayedAnnouncement{{Ann: announcement{ID: unheard.String(), Zone: "z3", Seq: 1, Boot: 1}, AgeMs: 1000, TTLMs: time.Hour.Milliseconds()}},
		})
		return ans
	})
	n.pres.peers[relay.ID()] = &presenceEntry{ann: announcement{ID: relay.ID().String(), Zone: "z2", Seq: 1, Boot: 1}, lastSeen: time.Now(), ttl: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.host.Connect(ctx, peer.AddrInfo{ID: relay.ID(), Addrs: relay.Addrs()}); err != nil {
		t.Fatal(err)
	}

	n.pres.pullView()
	n.wg.Wait() // the greeting, and what taking in its answer started
	if got := greetings.Load(); got != 1 {
		t.Fatalf("the connected peer was greeted %d times, want once", got)
	}
	if _, ok := n.pres.get(unheard); !ok {
		t.Fatal("the peer the connected one relayed is not in the view")
	}
	if len(n.host.Network().Peers()) != 1 {
		t.Errorf("connected to %d peers after pulling a view, want only the one it asked", len(n.host.Network().Peers()))
	}
}

// announcingNode is choiceNode with presence on a real gossipsub topic
// (a mesh of one) and its announce loop running: no early
// announcements, an AnnounceInterval of interval and a refresh far off;
// it returns once the loop made its first announcement.
func announcingNode(t *testing.T, interval time.Duration) *Node {
	n := choiceNode(t, 0)
	n.cfg.AnnounceInterval = interval
	n.cfg.PresenceRefresh = time.Hour
	n.presenceChanged = make(chan struct{}, 1)
	n.announceNow = make(chan struct{}, 1)
	gate, err := member.NewGate(member.Policy{Self: n.host.ID()})
	if err != nil {
		t.Fatal(err)
	}
	n.gate = gate
	ps, err := pubsub.NewGossipSub(n.ctx, n.host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPresence(n, ps)
	if err != nil {
		t.Fatal(err)
	}
	p.early = nil
	n.pres = p
	n.spawn(p.announceLoop)
	waitUntil(t, "the first announcement", func() bool { return p.announcedN.Load() >= 1 })
	return n
}

// waitUntil fails t if cond does not hold within 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The announce loop does not poll: an idle node checks for a change only
// when told one may have happened (presenceMayChange), and announces only
// what changed. A check every AnnounceInterval would be a wake-up a
// second per node on a testnet (a fifth of a lone node's idle CPU).
func TestAnnounceLoopWakesForChangesOnly(t *testing.T) {
	const interval = 10 * time.Millisecond
	n := announcingNode(t, interval)
	p := n.pres
	checks, seq := p.checks.Load(), p.seq.Load()

	// Idle: thirty AnnounceIntervals pass without a check. (A loop that
	// polled would have checked about thirty times.)
	time.Sleep(30 * interval)
	if got := p.checks.Load(); got != checks {
		t.Fatalf("an idle node checked for changes %d times in %v, want none", got-checks, 30*interval)
	}

	// Told of a change that is none: it checks, and announces nothing.
	n.presenceMayChange()
	waitUntil(t, "a check after presenceMayChange", func() bool { return p.checks.Load() > checks })
	if got := p.seq.Load(); got != seq {
		t.Errorf("announced %d times with nothing changed, want none", got-seq)
	}

	// A step starts (what runHeld does): the queue is announced.
	n.running.Add(1)
	n.presenceMayChange()
	waitUntil(t, "the new queue announced", func() bool { return p.seq.Load() > seq })

	// The bulkhead fills: its callback tells presence, and the room is
	// announced.
	seq = p.seq.Load()
	release, err := n.bulk.Acquire(context.Background(), "step", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	waitUntil(t, "the room taken announced", func() bool { return p.seq.Load() > seq })
	if a := p.selfNoLoad(false); a.Queue != 1 || a.Free != a.Slots-1 {
		t.Errorf("announced queue %d, free %d of %d; want 1 and one slot taken", a.Queue, a.Free, a.Slots)
	}
}

// Two changes within AnnounceInterval are announced once, at the end of
// the interval: the loop checks at most once an interval.
func TestAnnounceLoopChecksAtMostOnceAnInterval(t *testing.T) {
	const interval = 300 * time.Millisecond
	n := announcingNode(t, interval)
	p := n.pres
	checks, first := p.checks.Load(), p.lastCheck.Load()
	for range 5 {
		n.running.Add(1)
		n.presenceMayChange()
	}
	waitUntil(t, "a check after the changes", func() bool { return p.checks.Load() > checks })
	// jitter keeps the gap within ±20 % of the interval.
	if gap := time.Duration(p.lastCheck.Load() - first); gap < interval*4/5 {
		t.Errorf("checked %v after the last check, want no sooner than %v (an AnnounceInterval less its jitter)", gap, interval*4/5)
	}
	// The check covered the whole burst: no second one follows it. (The
	// window can only hide a late check, never invent one.)
	time.Sleep(2 * interval)
	if got := p.checks.Load() - checks; got != 1 {
		t.Errorf("%d checks for five changes in a burst, want 1", got)
	}
}

// presence.json drops a peer whose entry expired without a newer
// announcement: its loop sleeps until the first entry of the view
// expires (untilExpiry), not only until the view is marked dirty. A loop
// that waited for dirty alone would list a silent peer for ever (peer
// choice expires entries itself, so only the file would be wrong).
func TestPresenceFileDropsAnExpiredPeer(t *testing.T) {
	n := announcingNode(t, 10*time.Millisecond)
	p := n.pres
	n.spawn(p.fileLoop)
	other := p2ptest.Host(t).ID() // a peer ID; the host itself is not used
	p.mu.Lock()
	p.peers[other] = &presenceEntry{ann: announcement{ID: other.String(), Zone: "z1", Services: []string{"s"}}, lastSeen: time.Now(), ttl: 1500 * time.Millisecond}
	p.mu.Unlock()
	p.markDirty()

	path := filepath.Join(n.cfg.DataDir, "presence.json")
	lists := func() (bool, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, false
		}
		var f api.PresenceFile
		if json.Unmarshal(b, &f) != nil {
			return false, false
		}
		return true, slices.ContainsFunc(f.Peers, func(pi api.PeerInfo) bool { return pi.ID == other.String() })
	}
	waitUntil(t, "presence.json listing the peer", func() bool { read, listed := lists(); return read && listed })
	waitUntil(t, "presence.json without the peer once its entry expired", func() bool { read, listed := lists(); return read && !listed })
}

// A change of the step counts alone (a step started or ended, a slot
// taken) is announced no sooner than loadAnnounceEvery AnnounceIntervals
// after the last announcement; a change of state (here: draining) within
// an AnnounceInterval, whatever counts are pending. Unpaced, a busy node
// would announce every step start and end at the AnnounceInterval pace,
// and every peer would verify each announcement's signature.
func TestAnnounceLoopPacesStepCounts(t *testing.T) {
	const interval = 400 * time.Millisecond
	n := announcingNode(t, interval)
	p := n.pres
	count, last := p.announcedN.Load(), p.lastAnnounced.Load()

	n.running.Add(1) // a step starts: the queue changes, nothing else
	n.presenceMayChange()
	waitUntil(t, "the new queue announced", func() bool { return p.announcedN.Load() > count })
	if gap := time.Duration(p.lastAnnounced.Load() - last); gap < loadAnnounceEvery*interval {
		t.Errorf("a change of the queue alone announced %v after the last announcement, want no sooner than %v", gap, loadAnnounceEvery*interval)
	}
	if a := p.selfNoLoad(false); a.Queue != 1 {
		t.Fatalf("queue %d, want 1", a.Queue)
	}

	count, last = p.announcedN.Load(), p.lastAnnounced.Load()
	n.running.Add(1)
	n.draining.Store(true)
	n.presenceMayChange()
	waitUntil(t, "draining announced", func() bool { return p.announcedN.Load() > count })
	// The bound leaves the loop most of the load pace (2 s) as slack.
	if gap := time.Duration(p.lastAnnounced.Load() - last); gap >= loadAnnounceEvery*interval {
		t.Errorf("draining announced %v after the last announcement: it waited for the step counts' pace (%v)", gap, loadAnnounceEvery*interval)
	}
}
