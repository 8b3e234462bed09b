package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/mem"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/rpc"
)

// maxPresenceBytes bounds one presence message.
const maxPresenceBytes = 64 << 10

// announcement is what a peer gossips about itself on the presence topic.
type announcement struct {
	ID       string   `json:"id"`
	Addrs    []string `json:"addrs"`
	Zone     string   `json:"zone"`
	Services []string `json:"services"`
	Patterns []string `json:"patterns"`
	CPU      float64  `json:"cpu"`
	Mem      float64  `json:"mem"`
	Queue    int      `json:"queue"`
	Draining bool     `json:"draining"`
	// Seq increases with every announcement of one run of the peer;
	// Boot distinguishes runs so a restarted peer is not mistaken for stale.
	Seq  uint64 `json:"seq"`
	Boot int64  `json:"boot"`
	// Sched is the issued_at (Unix nanoseconds) of the signed timetable the
	// peer holds, 0 for none: a peer holding an older one fetches it.
	Sched int64 `json:"sched,omitempty"`
	// Slots is the peer's limit on concurrent step executions, Free how
	// many of them are free and Room how many more steps it takes (to run
	// or to queue) before it refuses them as busy (package node/bulkhead).
	// A peer that announces no Slots (an older version) is not known to be
	// full.
	Slots int `json:"slots,omitempty"`
	Free  int `json:"free,omitempty"`
	Room  int `json:"room,omitempty"`
	// Refresh is how often (milliseconds) the peer re-announces an
	// unchanged presence: receivers keep it for presenceRefreshes of them.
	// Zero (an older version) means every AnnounceInterval, and such a
	// peer expires others after its own PresenceTTL.
	Refresh int64 `json:"refresh,omitempty"`
}

// presenceRefreshes is how many refreshes in a row a peer may miss (lost
// gossip) before it drops out of the view.
const presenceRefreshes = 3

// same reports whether a and b say the same thing to peer choice and
// presence.json: everything but the load figures (CPU, memory), which
// change all the time, and the sequence numbers.
func (a announcement) same(b announcement) bool {
	return a.sameState(b) && a.Queue == b.Queue && a.Free == b.Free && a.Room == b.Room
}

// sameState is same without the step counts (queue, free slots, room),
// which change at every step a busy peer starts or ends, but with
// whether the peer is full or would make a step wait, which peer choice
// weighs most (router.go). A change of state is announced within an
// AnnounceInterval; a change of the counts alone at most once every
// loadAnnounceEvery AnnounceIntervals (announceLoop).
func (a announcement) sameState(b announcement) bool {
	return a.ID == b.ID && a.Zone == b.Zone && a.Draining == b.Draining && a.Sched == b.Sched &&
		a.Slots == b.Slots && a.full() == b.full() && a.waits() == b.waits() &&
		a.Refresh == b.Refresh && slices.Equal(a.Addrs, b.Addrs) &&
		slices.Equal(a.Services, b.Services) && slices.Equal(a.Patterns, b.Patterns)
}

// loadAnnounceEvery is how many AnnounceIntervals a change of the step
// counts alone (announcement.sameState) waits after the last
// announcement. Every announcement reaches every peer, which checks its
// signature (an Ed25519 verification, ~50 µs) and takes it in, and a busy
// node's counts change at every step it starts or ends. Paced, a 40-node
// sequence makes 0.05 announcements a step instead of 0.11, and a 16-node
// flood runs 4–37 % faster (docs/benchmarks.md). Between announcements,
// a sender counts the steps it handed a
// peer itself (noteTaken), and a peer that fills up or frees up announces
// at once (capacityChanged).
const loadAnnounceEvery = 5

// full reports whether the peer announced that it would refuse a step as
// busy.
func (a announcement) full() bool { return a.Slots > 0 && a.Room == 0 }

// waits reports whether a step sent to the peer would wait for a slot.
func (a announcement) waits() bool { return a.Slots > 0 && a.Free == 0 }

type presenceEntry struct {
	ann      announcement
	lastSeen time.Time
	// ttl is how long the entry stays without a new announcement.
	ttl time.Duration
	// seenAt is lastSeen on the timetable clock (what the outage view
	// was told).
	seenAt time.Time
}

// ttlFor is how long an announcement keeps its peer in the view: the
// configured PresenceTTL, or presenceRefreshes of the peer's announced
// refresh interval when that is longer.
func (p *presence) ttlFor(a announcement) time.Duration {
	return max(p.n.cfg.PresenceTTL, presenceRefreshes*time.Duration(a.Refresh)*time.Millisecond)
}

// presence is the node's view of who is out there, fed by pubsub.
type presence struct {
	n     *Node
	topic *pubsub.Topic
	boot  int64
	seq   atomic.Uint64
	// selfID is this peer's ID in string form, encoded once.
	selfID string

	// early are the waits between the announcements right after start
	// (earlyAnnouncements).
	early []time.Duration
	// checks counts announceLoop's checks for a change (it wakes for a
	// change, a poke or a refresh, and never polls); lastCheck is when
	// it last checked and lastAnnounced when it last announced (Unix
	// nanoseconds).
	checks, announcedN       atomic.Uint64
	lastCheck, lastAnnounced atomic.Int64

	mu    sync.Mutex
	peers map[peer.ID]*presenceEntry
	// dirty says the view changed in what presence.json shows, or how
	// soon an entry of it expires (fileLoop).
	dirty chan struct{}

	// loadMu guards the last CPU and memory reading (load).
	loadMu sync.Mutex
	loadAt time.Time
	cpu    float64
	mem    float64
}

// loadEvery bounds how often the CPU and memory figures are read from
// /proc: peer choice asks for this node's own figures on every hand-off
// (2 % of a node's CPU on a no-op sequence).
const loadEvery = time.Second

// earlyAnnouncements are the waits between a node's announcements right
// after it starts: a publish right after joining can reach nobody, and
// the next chance is the refresh, a minute or more on a large mesh.
var earlyAnnouncements = []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}

// presenceQueue is the depth of the gossipsub queues presence traffic
// passes through (validation, each peer's outbound RPCs, the presence
// subscription), against gossipsub's 32: a start-up burst of
// announcements is queued, not dropped.
const presenceQueue = 256

func newPresence(n *Node, ps *pubsub.PubSub) (*presence, error) {
	name := "/bedwe/" + n.cfg.Network + "/presence/1"
	p := &presence{
		n:      n,
		early:  earlyAnnouncements,
		boot:   n.clock.Now().UnixNano(),
		selfID: n.selfID,
		peers:  map[peer.ID]*presenceEntry{},
		dirty:  make(chan struct{}, 1),
	}
	if err := ps.RegisterTopicValidator(name, p.validate); err != nil {
		return nil, fmt.Errorf("presence validator: %w", err)
	}
	t, err := ps.Join(name)
	if err != nil {
		return nil, fmt.Errorf("join presence topic: %w", err)
	}
	p.topic = t
	return p, nil
}

// validate rejects oversized or malformed announcements and ones that claim
// to be from someone other than the signer.
func (p *presence) validate(_ context.Context, _ peer.ID, msg *pubsub.Message) bool {
	if len(msg.Data) > maxPresenceBytes {
		return false
	}
	var a announcement
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return false
	}
	return p.acceptable(msg.GetFrom(), a)
}

// Limits on what one announcement may claim: a member cannot bloat every
// other node's view (presence.json, peer choice) without bound.
const (
	maxAnnouncedServices = 4096
	maxAnnouncedPatterns = 256
	maxAnnouncedAddrs    = 64
	maxAnnouncedName     = 256
)

// acceptable says whether an announcement signed by from may enter the
// view: a node only announces itself (the announced ID is the pubsub
// message's signer), only members announce (a member may relay an
// outsider's message: it is dropped here), and the lists and names stay
// within bounds.
func (p *presence) acceptable(from peer.ID, a announcement) bool {
	if a.ID != from.String() {
		p.n.log.Debug("presence refused: announces another peer", "signer", rpc.ShortID(from), "announced", a.ID)
		return false
	}
	if !p.n.gate.IsMember(from) {
		p.n.log.Debug("presence refused: not a member", "signer", rpc.ShortID(from))
		return false
	}
	if len(a.Services) > maxAnnouncedServices || len(a.Patterns) > maxAnnouncedPatterns || len(a.Addrs) > maxAnnouncedAddrs || len(a.Zone) > maxAnnouncedName {
		return false
	}
	for _, list := range [][]string{a.Services, a.Patterns, a.Addrs} {
		for _, s := range list {
			if len(s) > maxAnnouncedName {
				return false
			}
		}
	}
	return true
}

func (p *presence) run(ctx context.Context) {
	sub, err := p.topic.Subscribe(pubsub.WithBufferSize(presenceQueue))
	if err != nil {
		p.n.log.Error("subscribe to presence", "err", err)
		return
	}
	p.n.calls.Serve(api.ProtoPresenceHello, maxPresenceBytes, p.n.cfg.StreamTimeout, p.serveHello)
	p.watchAddrs(ctx)
	go p.announceLoop(ctx)
	p.n.spawn(p.fileLoop)
	p.watchConns(ctx)
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			return
		}
		var a announcement
		if err := json.Unmarshal(msg.Data, &a); err != nil {
			continue
		}
		id := msg.GetFrom()
		if id == p.n.host.ID() {
			continue
		}
		p.observe(id, a)
	}
}

// watchAddrs tells the announce loop when the host's own addresses
// change (they are announced, and the loop does not poll).
func (p *presence) watchAddrs(ctx context.Context) {
	sub, err := p.n.host.EventBus().Subscribe(new(event.EvtLocalAddressesUpdated))
	if err != nil {
		p.n.log.Warn("presence: address changes are announced only at the next refresh", "err", err)
		return
	}
	go func() {
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-sub.Out():
				if !ok {
					return
				}
				p.n.presenceMayChange()
			}
		}
	}()
}

// observe takes an announcement signed by id (gossiped, or sent on a
// stream from id) into the view. A newcomer is greeted back unless it is
// the one greeting (serveHello answers it with this peer's announcement).
func (p *presence) observe(id peer.ID, a announcement) { p.observeFrom(id, a, true) }

func (p *presence) observeFrom(id peer.ID, a announcement, greetNewcomer bool) {
	// The view names a peer by the ID that signed its announcement, and
	// peer choice reads that string form from the view instead of
	// encoding the ID again for every candidate of every hop.
	a.ID = id.String()
	p.mu.Lock()
	old, known := p.peers[id]
	if known && old.ann.Boot == a.Boot && old.ann.Seq >= a.Seq {
		p.mu.Unlock()
		return
	}
	ttl, at := p.ttlFor(a), p.n.tt.clock.Now()
	p.peers[id] = &presenceEntry{ann: a, lastSeen: p.n.clock.Now(), ttl: ttl, seenAt: at}
	p.mu.Unlock()
	p.n.tt.view.ObserveFor(id.String(), a.Zone, a.Draining, at, p.n.tt.clock.Virtual(ttl))
	p.keepAddrs(id, a)
	if !known || old.ann.Boot != a.Boot {
		// A new run of the peer (it booted after a cut) is alive whatever
		// heartbeat said of its previous run.
		p.n.tt.view.Alive(id.String())
		p.n.breakers.Forget(id.String())
		p.n.log.Debug("peer present", "peer", rpc.ShortID(id), "zone", a.Zone)
		p.n.maybeConnect(id)
		p.n.peerReturned(id)
		// A newcomer has not heard us yet.
		if greetNewcomer {
			p.greet(id)
		}
	}
	// presence.json changes only with what it shows (not last_seen).
	if !known || old.ann.Boot != a.Boot || !fileSame(old.ann, a) {
		p.markDirty()
	} else if (old.ann.Refresh == 0) != (a.Refresh == 0) {
		// A peer of an older version sets this peer's refresh (refresh).
		p.n.presenceMayChange()
	}
	p.n.maybePullSchedule(id, a.Sched)
}

// fileSame reports whether a and b show the same in presence.json's
// signature (membership, zone, services, draining).
func fileSame(a, b announcement) bool {
	return a.Zone == b.Zone && a.Draining == b.Draining &&
		slices.Equal(a.Services, b.Services) && slices.Equal(a.Patterns, b.Patterns)
}

// keepAddrs puts the addresses a peer announced in the peerstore, for
// hours: cuts last hours and presence refreshes them.
func (p *presence) keepAddrs(id peer.ID, a announcement) {
	var addrs []ma.Multiaddr
	for _, s := range a.Addrs {
		if m, err := ma.NewMultiaddr(s); err == nil {
			addrs = append(addrs, m)
		}
	}
	p.n.host.Peerstore().AddAddrs(id, addrs, 6*time.Hour)
}

// markDirty wakes fileLoop: the view changed. A change of the view may
// change this peer's refresh interval too (it grows with the view), so
// announceLoop checks as well.
func (p *presence) markDirty() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
	p.n.presenceMayChange()
}

// presenceMayChange tells presence's announce loop that something this
// peer announces may have changed: its view (the refresh interval grows
// with it), its steps running, its bulkhead, its timetable or its
// addresses. Every such change calls it, for the loop does not poll
// (announceLoop). It never blocks.
func (n *Node) presenceMayChange() {
	select {
	case n.presenceChanged <- struct{}{}:
	default:
	}
}

// poke triggers an early announcement.
func (p *presence) poke() {
	select {
	case p.n.announceNow <- struct{}{}:
	default:
	}
}

// greet sends this peer's announcement to id, a newcomer (a peer that
// starts, or is back from a cut, and that this one's view lacks) or a
// connected peer whose view this one pulls (pullView), if a connection to
// it is open; the greeted peer takes it as if it came by gossip
// and answers with its own announcement and the view it holds (serveHello),
// which this peer takes in.
//
// Why directly, and why only over an open connection: at the start of a
// mesh every peer is a newcomer to every other. Announcing to all for each
// one makes every node announce ~30 times in its first minute and
// overflows gossipsub's queues (docs/benchmarks.md). Greeting every
// newcomer by dialling it makes every node connect to every other (39
// peers and ~59 connections a node at 40 nodes, whatever TargetPeers
// says). So a node greets only the peers it is
// connected to, and a newcomer learns the rest of the mesh from their
// answers; its own announcement reaches the others by gossip.
func (p *presence) greet(id peer.ID) {
	if id == p.n.host.ID() || p.n.host.Network().Connectedness(id) != network.Connected {
		return
	}
	p.n.spawn(func(ctx context.Context) {
		data, err := json.Marshal(p.selfNoLoad(true))
		if err != nil {
			return
		}
		// Not network.WithNoDial: the request may open the peer's shared
		// session (rpc.Mux), and a session opened without dialling would
		// fail every request waiting on it if the connection had just
		// closed. The check above is what keeps greetings off new dials.
		reply, err := p.n.calls.Call(ctx, id, api.ProtoPresenceHello, data, maxHelloAnswer, p.n.cfg.StreamTimeout)
		if err != nil {
			p.n.log.Debug("could not greet a peer", "peer", rpc.ShortID(id), "err", err)
			return
		}
		p.takeHelloAnswer(id, reply)
	})
}

// maxHelloAnswer bounds a greeted peer's answer (its announcement and its
// view): a view that would not fit is cut short (helloAnswerFor).
const maxHelloAnswer = 256 << 10

// helloAnswer is what a greeted peer answers (api.ProtoPresenceHello): its
// own announcement and the others it holds in its view. An older version
// answers "ok", and a refused greeting is answered "no".
type helloAnswer struct {
	Self announcement          `json:"self"`
	View []relayedAnnouncement `json:"view,omitempty"`
}

// relayedAnnouncement is one entry of a greeted peer's view: an announcement it
// took (signed by the peer it names when it came by gossip; the relay
// carries no signature, so the entry is the relaying member's word), how
// long ago it took it and how long it keeps it without a newer one.
type relayedAnnouncement struct {
	Ann   announcement `json:"ann"`
	AgeMs int64        `json:"age_ms"`
	TTLMs int64        `json:"ttl_ms"`
}

// serveHello takes a peer's announcement sent straight to this one
// (greet): the stream's authenticated peer is its signer, so it is checked
// as a gossiped one is (acceptable) and observed. The answer carries this
// peer's own announcement and its view (helloAnswerFor).
func (p *presence) serveHello(_ context.Context, from peer.ID, req []byte) []byte {
	var a announcement
	if len(req) > maxPresenceBytes || json.Unmarshal(req, &a) != nil || from == p.n.host.ID() || !p.acceptable(from, a) {
		return []byte("no")
	}
	p.observeFrom(from, a, false)
	return p.helloAnswerFor(from)
}

// helloAnswerFor encodes this peer's announcement and its view, less the
// greeting peer, within maxHelloAnswer (a view too large for it is cut
// short: the greeting peer learns the rest by gossip).
func (p *presence) helloAnswerFor(from peer.ID) []byte {
	ans := helloAnswer{Self: p.selfNoLoad(false)}
	now := p.n.clock.Now()
	p.mu.Lock()
	p.expireLocked(now)
	for id, e := range p.peers {
		if id != from {
			ans.View = append(ans.View, relayedAnnouncement{Ann: e.ann, AgeMs: now.Sub(e.lastSeen).Milliseconds(), TTLMs: e.ttl.Milliseconds()})
		}
	}
	p.mu.Unlock()
	for {
		data, err := json.Marshal(ans)
		if err != nil {
			return []byte("no")
		}
		if len(data) <= maxHelloAnswer || len(ans.View) == 0 {
			return data
		}
		ans.View = ans.View[:len(ans.View)/2]
	}
}

// takeHelloAnswer takes in what a greeted peer answered: its own
// announcement, signed by the stream's peer, as if it came by gossip, and
// the announcements of its view that this peer's view lacks (relayed).
func (p *presence) takeHelloAnswer(from peer.ID, reply []byte) {
	var ans helloAnswer
	if len(reply) < 2 || reply[0] != '{' || json.Unmarshal(reply, &ans) != nil {
		return // "ok" from an older version, or "no"
	}
	if p.acceptable(from, ans.Self) {
		p.observeFrom(from, ans.Self, false)
	}
	for _, r := range ans.View {
		p.observeRelayed(r)
	}
}

// observeRelayed takes an announcement another peer relayed from its view
// (takeHelloAnswer) when this peer's view lacks the peer it names. The
// relay carries no signature, so it only fills that gap: it is checked as
// a gossiped announcement is (membership, bounds), it keeps the relaying
// peer's age and time to live, so a relay never makes an entry younger
// than the relaying peer's own, and it changes nothing the named peer
// itself said: a peer already in the view, or this peer, is left as it
// is, and the peer's own next announcement replaces the entry.
// Unlike an announcement from the peer itself, a relayed one does not clear
// a heartbeat suspicion or a breaker: the relaying peer may not have heard
// of a death this one has.
func (p *presence) observeRelayed(r relayedAnnouncement) {
	a := r.Ann
	id, err := peer.Decode(a.ID)
	age, ttl := time.Duration(r.AgeMs)*time.Millisecond, time.Duration(r.TTLMs)*time.Millisecond
	if err != nil || id == p.n.host.ID() || age < 0 || age >= ttl || !p.acceptable(id, a) {
		return
	}
	now := p.n.clock.Now()
	at := p.n.tt.clock.Now().Add(-p.n.tt.clock.Virtual(age))
	p.mu.Lock()
	if _, known := p.peers[id]; known {
		p.mu.Unlock()
		return
	}
	a.ID = id.String()
	p.peers[id] = &presenceEntry{ann: a, lastSeen: now.Add(-age), ttl: ttl, seenAt: at}
	p.mu.Unlock()
	p.n.tt.view.ObserveFor(a.ID, a.Zone, a.Draining, at, p.n.tt.clock.Virtual(ttl))
	p.keepAddrs(id, a)
	p.n.log.Debug("peer present (relayed)", "peer", rpc.ShortID(id), "zone", a.Zone)
	p.n.maybeConnect(id)
	// A new candidate for a dispatcher that waits for one.
	p.n.peerReturned(id)
	p.markDirty()
	p.n.maybePullSchedule(id, a.Sched)
}

// pullView greets one connected peer of the view, picked at random, and so
// takes in the announcements of its view that this one lacks: a newcomer
// that connected to its first peers before they knew the mesh, or that
// missed the early announcements of peers it is not connected to, learns
// them without waiting for their refresh (minutes on a large mesh).
func (p *presence) pullView() {
	nw := p.n.host.Network()
	var connected []peer.ID
	for _, id := range nw.Peers() {
		if _, known := p.get(id); known {
			connected = append(connected, id)
		}
	}
	if len(connected) > 0 {
		p.greet(connected[p.n.rand.IntN(len(connected))])
	}
}

// announceLoop publishes this peer's presence: a few times quickly after
// start, at once when poked (a drain, a change of capacity), within
// AnnounceInterval of any change peer choice cares about (presenceMayChange), and
// otherwise every refresh interval (see Config.PresenceRefresh), which
// grows with the view so an idle mesh gossips a bounded number of
// announcements a second.
//
// It does not poll: an idle node wakes once a refresh, not every
// AnnounceInterval. Every source of a change calls presenceMayChange (the view,
// steps starting and ending, the bulkhead, an adopted timetable, the
// host's addresses); the loop checks at most once an AnnounceInterval
// and announces only what differs from its last announcement. A check
// every second would cost an idle node a wake-up, its addresses encoded
// and its view walked each time: a fifth of a lone node's idle CPU on a
// testnet (docs/benchmarks.md).
func (p *presence) announceLoop(ctx context.Context) {
	early := slices.Clone(p.early)
	// The early announcements from 1.7 s on (the fourth), and every
	// refresh, also pull a connected peer's view (pullView): a node greets
	// only the peers it is connected to, so one that missed another's
	// early announcements would otherwise wait for its refresh.
	const pullFromEarly = 3
	var last announcement
	var lastAt time.Time
	var refreshIn time.Duration
	force, pull, step := true, false, 0
	for {
		// This check covers every change signalled before it.
		select {
		case <-p.n.presenceChanged:
		default:
		}
		cur := p.selfNoLoad(false)
		checkedAt := p.n.clock.Now()
		p.lastCheck.Store(checkedAt.UnixNano())
		p.checks.Add(1)
		refreshDue := checkedAt.Sub(lastAt) >= refreshIn
		// A change of the step counts alone waits for the load pace.
		loadAt := lastAt.Add(loadAnnounceEvery * p.n.cfg.AnnounceInterval)
		loadOnly := !cur.same(last) && cur.sameState(last)
		if force || !cur.sameState(last) || (loadOnly && !checkedAt.Before(loadAt)) || refreshDue {
			last, lastAt = p.announce(ctx), p.n.clock.Now()
			p.lastAnnounced.Store(lastAt.UnixNano())
			p.announcedN.Add(1)
			refreshIn = p.jitter(time.Duration(last.Refresh) * time.Millisecond)
			if pull || (refreshDue && !force) {
				p.pullView()
			}
			loadOnly = false
		}
		force, pull = false, false
		wait := refreshIn - p.n.clock.Since(lastAt)
		if loadOnly {
			wait = min(wait, p.n.clock.Until(loadAt))
		}
		if len(early) > 0 {
			wait, early, force = early[0], early[1:], true
			step++
			pull = step >= pullFromEarly
		}
		if !p.waitAnnounce(ctx, wait, checkedAt, &force) {
			return
		}
	}
}

// waitAnnounce waits for announceLoop's next check: wait is up (the next
// refresh, or early announcement), a poke (force is then set), or a
// change (presenceMayChange) no sooner than AnnounceInterval after the check at
// checked. It returns false when ctx ends.
func (p *presence) waitAnnounce(ctx context.Context, wait time.Duration, checked time.Time, force *bool) bool {
	start := p.n.clock.Now()
	t := p.n.clock.NewTimer(max(wait, 0))
	defer t.Stop()
	changed := p.n.presenceChanged
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.Chan():
			return true
		case <-p.n.announceNow:
			*force = true
			return true
		case <-changed:
			gap := p.jitter(p.n.cfg.AnnounceInterval) - p.n.clock.Since(checked)
			if gap <= 0 {
				return true
			}
			// Too soon after the last check: check when the gap is
			// over, or at the timer if that comes first.
			changed = nil
			if gap < wait-p.n.clock.Since(start) {
				t.Reset(gap)
			}
		}
	}
}

// refresh is how often this peer re-announces an unchanged presence:
// PresenceRefresh plus PresenceRefreshPerPeer for each peer in the view,
// or AnnounceInterval while the view holds a peer that announced no
// refresh interval (an older version, which expires peers after its own
// PresenceTTL).
func (p *presence) refresh() time.Duration {
	cfg := p.n.cfg
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.peers {
		if e.ann.Refresh == 0 {
			return cfg.AnnounceInterval
		}
	}
	return cfg.PresenceRefreshFor(len(p.peers))
}

// jitter spreads d by ±20 % so that peers started together do not
// announce together.
func (p *presence) jitter(d time.Duration) time.Duration {
	return d - d/5 + p.n.rand.DurationN(d*2/5+1)
}

func (p *presence) self(bump bool) announcement {
	a := p.selfNoLoad(bump)
	a.CPU, a.Mem = p.load()
	return a
}

// load returns the CPU (since the previous reading) and memory use, read
// at most every loadEvery.
func (p *presence) load() (cpuPercent, memPercent float64) {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	if p.n.clock.Since(p.loadAt) >= loadEvery {
		p.loadAt = p.n.clock.Now()
		if v, err := cpu.Percent(0, false); err == nil && len(v) > 0 {
			p.cpu = v[0]
		}
		if v, err := mem.VirtualMemory(); err == nil {
			p.mem = v.UsedPercent
		}
	}
	return p.cpu, p.mem
}

// selfForChoice is this peer as peer choice weighs it, for every hop:
// self's figures without what choice does not read and costs to build
// (the addresses, the sorted services, the timetable's issue time). It
// offers nothing: whether this peer offers a service is asked of its
// registry (Node.pick).
func (p *presence) selfForChoice() announcement {
	a := p.selfCore()
	a.CPU, a.Mem = p.load()
	return a
}

// selfCore is what self and selfForChoice share: who and where this peer
// is, its room and whether it drains.
func (p *presence) selfCore() announcement {
	n := p.n
	slots, free, room := n.capacity()
	return announcement{
		ID:       p.selfID,
		Zone:     n.cfg.Zone,
		Queue:    int(n.running.Load()),
		Draining: n.draining.Load(),
		Slots:    slots,
		Free:     free,
		Room:     room,
	}
}

// selfNoLoad is self without the CPU and memory figures, which cost two
// /proc reads: enough to tell whether the announcement changed.
func (p *presence) selfNoLoad(bump bool) announcement {
	n := p.n
	var addrs []string
	for _, a := range n.host.Addrs() {
		addrs = append(addrs, a.String())
	}
	seq := p.seq.Load()
	if bump {
		seq = p.seq.Add(1)
	}
	a := p.selfCore()
	a.Addrs = addrs
	a.Services, a.Patterns = n.services.Names(), n.services.Patterns()
	a.Seq, a.Boot = seq, p.boot
	a.Sched = n.announcedSchedule()
	a.Refresh = p.refresh().Milliseconds()
	return a
}

// announce publishes this peer's presence and returns what it published.
func (p *presence) announce(ctx context.Context) announcement {
	self := p.self(true)
	// The node is a candidate for its own steps too (for as long as its
	// peers keep it).
	p.n.tt.view.ObserveFor(self.ID, self.Zone, self.Draining, p.n.tt.clock.Now(), p.n.tt.clock.Virtual(p.ttlFor(self)))
	data, err := json.Marshal(self)
	if err != nil {
		return self
	}
	if m := p.n.metrics; m != nil {
		m.announcements.Inc()
	}
	if err := p.topic.Publish(ctx, data); err != nil && ctx.Err() == nil {
		p.n.log.Debug("announce presence", "err", err)
	}
	return self
}

// livePeer is a fresh entry of the view: a peer and what it announced
// (ann.ID is id's string form, set when the announcement was taken).
type livePeer struct {
	id  peer.ID
	ann announcement
}

// live returns the fresh entries, expiring stale ones. Peer choice calls
// it for every hop, so it copies the view into one slice (a map cost a
// hash and an allocation a peer).
func (p *presence) live() []livePeer {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.n.clock.Now())
	out := make([]livePeer, 0, len(p.peers))
	for id, e := range p.peers {
		out = append(out, livePeer{id, e.ann})
	}
	return out
}

// expire drops the peers whose announcements have outlived their ttl
// (and marks presence.json dirty if any went), without copying the view
// as live does: the file loop calls it every second.
func (p *presence) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.n.clock.Now())
}

func (p *presence) expireLocked(now time.Time) {
	for id, e := range p.peers {
		if now.Sub(e.lastSeen) > e.ttl {
			delete(p.peers, id)
			p.markDirty()
		}
	}
}

// noteFull records that a peer refused a step as busy: until its next
// announcement, peer choice takes it as full.
func (p *presence) noteFull(id peer.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.peers[id]; ok && e.ann.Slots > 0 {
		e.ann.Free, e.ann.Room = 0, 0
	}
}

// annVersion names one announcement of a peer: its run and sequence.
type annVersion struct {
	boot int64
	seq  uint64
}

// version is the version of the peer's latest announcement (zero if none).
func (p *presence) version(id peer.ID) annVersion {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.peers[id]; ok {
		return annVersion{e.ann.Boot, e.ann.Seq}
	}
	return annVersion{}
}

// noteTaken records that a peer took a step: until its next announcement,
// peer choice counts it one step busier, so senders acting on the same
// announcement do not all pick the same peer. before is the version of the
// announcement known when the hand-off was sent: if a newer one has come
// since, it may count the step already (the peer announces a change at
// once, and gossip can beat the ack), and is left as it is. Counted twice,
// a peer with room for one more looked full, and a sender offered the step
// to a full peer instead (a capacity test, once gossip got quicker).
func (p *presence) noteTaken(id peer.ID, before annVersion) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.peers[id]
	if !ok || (annVersion{e.ann.Boot, e.ann.Seq}) != before {
		return
	}
	e.ann.Queue++
	e.ann.Free, e.ann.Room = max(0, e.ann.Free-1), max(0, e.ann.Room-1)
}

// forget drops a peer from the view (it was found silent or dead).
func (p *presence) forget(id peer.ID) {
	p.mu.Lock()
	delete(p.peers, id)
	p.mu.Unlock()
	p.markDirty()
}

// offers reports whether an announcement covers service name.
func (a announcement) offers(name string) bool {
	if slices.Contains(a.Services, name) {
		return true
	}
	for _, pat := range a.Patterns {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// infos renders the view (self first) for clients and presence.json.
func (p *presence) infos() []api.PeerInfo {
	self := p.self(false)
	out := []api.PeerInfo{annInfo(self, p.n.clock.Now(), true, true)}
	live := p.live()
	p.mu.Lock()
	seen := map[peer.ID]time.Time{}
	for id, e := range p.peers {
		seen[id] = e.lastSeen
	}
	p.mu.Unlock()
	var rest []api.PeerInfo
	for _, lp := range live {
		connected := p.n.host.Network().Connectedness(lp.id) == 1 // network.Connected
		rest = append(rest, annInfo(lp.ann, seen[lp.id], false, connected))
	}
	for i := range out {
		p.n.describePower(&out[i])
	}
	for i := range rest {
		p.n.describePower(&rest[i])
		rest[i].Breaker = string(p.n.breakers.State(rest[i].ID))
	}
	sort.Slice(rest, func(i, j int) bool {
		if rest[i].Zone != rest[j].Zone {
			return rest[i].Zone < rest[j].Zone
		}
		return rest[i].ID < rest[j].ID
	})
	return append(out, rest...)
}

func annInfo(a announcement, seen time.Time, self, connected bool) api.PeerInfo {
	return api.PeerInfo{
		ID: a.ID, Addrs: a.Addrs, Zone: a.Zone, Services: a.Services, Patterns: a.Patterns,
		CPU: a.CPU, MemUsed: a.Mem, Queue: a.Queue, Draining: a.Draining,
		LastSeen: seen, Self: self, Connected: connected,
		Slots: a.Slots, Free: a.Free, Room: a.Room,
	}
}

// fileLoop keeps DATA/presence.json in step with the view, so testnets and
// operators can read it without a client. It rewrites the file at most once
// a second and only when membership, zones, services or draining changed
// (load figures change all the time and are not worth a write).
//
// It does not poll: it wakes when the view changed (markDirty) or when its
// first entry is due to expire (untilExpiry), not every second as it did.
func (p *presence) fileLoop(ctx context.Context) {
	path := filepath.Join(p.n.cfg.DataDir, "presence.json")
	last := ""
	for first := true; ; first = false {
		if !first && !p.waitFileChange(ctx) {
			return
		}
		peers := p.infos()[1:]
		var sig strings.Builder
		for _, pi := range peers {
			fmt.Fprintf(&sig, "%s|%s|%v|%v|%v;", pi.ID, pi.Zone, pi.Draining, pi.Services, pi.Patterns)
		}
		if sig.String() == last && last != "" {
			continue
		}
		last = sig.String()
		if last == "" {
			last = "-"
		}
		data, _ := json.Marshal(api.PresenceFile{Self: p.n.selfID, Updated: p.n.clock.Now(), Peers: peers})
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err == nil {
			_ = os.Rename(tmp, path)
		}
		// At most one write a second.
		t := p.n.clock.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
	}
}

// waitFileChange waits until the view changed, expiring the entries that
// are due on the way. It returns false when ctx ends.
func (p *presence) waitFileChange(ctx context.Context) bool {
	for {
		t := p.n.clock.NewTimer(p.untilExpiry())
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-p.dirty:
			t.Stop()
			return true
		case <-t.Chan():
			p.expire() // marks dirty if a peer went
		}
	}
}

// untilExpiry is how long until the first entry of the view expires
// without a newer announcement (a minute when the view is empty: any
// change marks it dirty). An entry whose time to live is shortened
// (checkGone) marks the view dirty, so the wait is taken again.
func (p *presence) untilExpiry() time.Duration {
	now := p.n.clock.Now()
	next := time.Minute
	p.mu.Lock()
	for _, e := range p.peers {
		next = min(next, e.lastSeen.Add(e.ttl).Sub(now))
	}
	p.mu.Unlock()
	// expireLocked drops an entry strictly after its ttl.
	return max(next, 0) + time.Millisecond
}

// watchConns keeps the slowly refreshed view honest between refreshes:
// a connection from a member the view lacks (a newcomer, or a peer back
// from a partition) makes this peer greet it at once (and take in its
// view from the answer), and a view
// peer whose last connection closed is dialled once and, if that fails (a
// killed process: its connections are reset and nothing answers), kept
// only for PresenceTTL after its last announcement, not for its announced
// refreshes.
func (p *presence) watchConns(ctx context.Context) {
	p.n.host.Network().Notify(&network.NotifyBundle{
		ConnectedF: func(_ network.Network, c network.Conn) {
			id := c.RemotePeer()
			if _, known := p.get(id); !known && p.n.gate.IsMember(id) {
				p.greet(id)
			}
		},
		DisconnectedF: func(_ network.Network, c network.Conn) {
			id := c.RemotePeer()
			if _, known := p.get(id); known && ctx.Err() == nil {
				go p.checkGone(ctx, id)
			}
		},
	})
}

// checkGone dials a view peer that lost its last connection and, if it
// cannot be reached, shortens its stay in the view (and in the outage
// view) to PresenceTTL after its last announcement (its next announcement
// restores it).
func (p *presence) checkGone(ctx context.Context, id peer.ID) {
	nw := p.n.host.Network()
	before, known := p.get(id)
	if !known || nw.Connectedness(id) == network.Connected {
		return
	}
	p.n.clearDialBackoff(id)
	dctx, cancel := context.WithTimeout(ctx, p.n.cfg.StreamTimeout)
	defer cancel()
	err := p.n.host.Connect(dctx, peer.AddrInfo{ID: id})
	if err == nil || ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	e, ok := p.peers[id]
	gone := ok && e.ann.Boot == before.Boot && e.ann.Seq == before.Seq && e.ttl > p.n.cfg.PresenceTTL
	var ann announcement
	var seenAt time.Time
	if gone {
		e.ttl = p.n.cfg.PresenceTTL
		ann, seenAt = e.ann, e.seenAt
	}
	p.mu.Unlock()
	if gone {
		p.markDirty() // it expires sooner: fileLoop waits again
		p.n.tt.view.ObserveFor(id.String(), ann.Zone, ann.Draining, seenAt, 0)
		p.n.log.Debug("presence: peer unreachable after its connection closed; kept for PresenceTTL only", "peer", rpc.ShortID(id), "err", err)
	}
}

// get returns a peer's latest announcement.
func (p *presence) get(id peer.ID) (announcement, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.peers[id]
	if !ok {
		return announcement{}, false
	}
	return e.ann, true
}

// forgetID drops a peer named by its string ID.
func (p *presence) forgetID(id string) {
	if pid, err := peer.Decode(id); err == nil {
		p.forget(pid)
	}
}
