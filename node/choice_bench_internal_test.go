package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/breaker"
	"github.com/bedwe/bedwe/node/env"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/pack"
)

// choiceNode is a node with what peer choice reads: a host that listens
// nowhere, a catch-all echo service, breakers, the outage view and a
// presence view of the given number of live peers in four zones; and a
// context for its background tasks (presence dials and greets in them).
func choiceNode(b testing.TB, peers int) *Node {
	b.Helper()
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	reg, err := service.Parse([]byte("version: 1\npatterns:\n  - {match: \"*\", kind: echo}\n"))
	if err != nil {
		b.Fatal(err)
	}
	cfg := TestnetConfig()
	cfg.Zone, cfg.DataDir = "z0", b.TempDir()
	cfg.fillDefaults()
	n := &Node{clock: clockwork.NewRealClock(), rand: env.NewRand(1), host: h, selfID: h.ID().String(), cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), services: reg, breakers: breaker.New(cfg.Breaker), returned: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	n.ctx = ctx
	b.Cleanup(func() { cancel(); n.wg.Wait() })
	if err := n.newBulkhead(); err != nil {
		b.Fatal(err)
	}
	if err := n.startTimetable(); err != nil {
		b.Fatal(err)
	}
	n.pres = &presence{n: n, selfID: h.ID().String(), peers: map[peer.ID]*presenceEntry{}}
	for i := range peers {
		id := newPeerID(b)
		a := announcement{ID: id.String(), Zone: fmt.Sprintf("z%d", i%4), Patterns: []string{"*"},
			Slots: 16, Free: 16, Room: 80, Seq: 1, Boot: 1, Refresh: time.Hour.Milliseconds()}
		n.pres.peers[id] = &presenceEntry{ann: a, lastSeen: time.Now(), ttl: time.Hour}
	}
	return n
}

// Peer choice reads each peer's ID string from the view (ann.ID, set from
// the announcement's signer when it is taken) instead of encoding it for
// every candidate: a peer whose circuit breaker is open is still never
// picked, and an announcement that names another peer is filed under
// its signer.
func TestPeerChoiceReadsTheViewsIDs(t *testing.T) {
	n := choiceNode(t, 8)
	live := n.pres.live()
	keep := live[3]
	for _, lp := range live {
		if lp.id == keep.id {
			continue
		}
		for range 3 {
			n.breakers.Failure(lp.id.String())
		}
	}
	exclude := map[peer.ID]bool{n.host.ID(): true}
	for range 20 {
		if got, ok := n.pick("n7", 0, exclude, nil); !ok || got != keep.id {
			t.Fatalf("pick = %s, %v; want %s, the one peer whose breaker is closed", got, ok, keep.id)
		}
		if got, ok := n.pickGuardianPreferring(exclude, nil, nil); !ok || got != keep.id {
			t.Fatalf("guardian = %s, %v; want %s, the one peer whose breaker is closed", got, ok, keep.id)
		}
	}

	// A known peer's next announcement (a newcomer's would also greet it).
	signer := newPeerID(t)
	first := announcement{ID: signer.String(), Zone: "z1", Seq: 1, Boot: 1, Refresh: time.Hour.Milliseconds()}
	n.pres.peers[signer] = &presenceEntry{ann: first, lastSeen: time.Now(), ttl: time.Hour}
	n.pres.observe(signer, announcement{ID: keep.ann.ID, Zone: "z1", Seq: 2, Boot: 1, Refresh: time.Hour.Milliseconds()})
	for _, lp := range n.pres.live() {
		if lp.id == signer && lp.ann.Seq != 2 {
			t.Fatalf("the second announcement of %s was not taken", signer)
		}
		if lp.id == signer && lp.ann.ID != signer.String() {
			t.Fatalf("an announcement signed by %s is filed naming %s", signer, lp.ann.ID)
		}
	}
}

// BenchmarkPeerChoice is what a hop spends choosing peers among 40 live
// ones: the next step's executor (pick) and the receiver's
// backup guardian (pickHolderBackup, preferring a guardian of the step
// before).
func BenchmarkPeerChoice(b *testing.B) {
	n := choiceNode(b, 40)
	live := n.pres.live()
	var guardians []pack.Peer
	for _, lp := range live[:2] {
		guardians = append(guardians, pack.Peer{ID: lp.ann.ID, Zone: lp.ann.Zone})
	}
	b.Run("pick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := n.pick("n7", 0, nil, nil); !ok {
				b.Fatal("no peer picked")
			}
		}
	})
	b.Run("holder-backup", func(b *testing.B) {
		rec := held.Record{Guardians: guardians[:1]}
		b.ReportAllocs()
		for b.Loop() {
			if p := n.pickHolderBackup(rec, guardians); p.ID == "" {
				b.Fatal("no backup picked")
			}
		}
	})
}
