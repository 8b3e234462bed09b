package node

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node/env"
)

// At start presence names many peers within a moment, before any dial
// finishes. maybeConnect must count the dials it has in flight, or a node
// dials every peer it hears of instead of TargetPeers (a 40-node testnet
// keeps ~28 connections a node instead of 8: docs/benchmarks.md).
func TestMaybeConnectCountsDialsInFlight(t *testing.T) {
	newHost := func() host.Host {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	self := newHost()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := &Node{clock: clockwork.NewRealClock(), rand: env.NewRand(1), host: self, selfID: self.ID().String(), ctx: ctx, cfg: Config{TargetPeers: 2}}
	var others []peer.ID
	for range 6 {
		o := newHost()
		self.Peerstore().AddAddrs(o.ID(), o.Addrs(), time.Hour)
		others = append(others, o.ID())
	}
	// All six are named before any dial can finish, as at start.
	for _, id := range others {
		n.maybeConnect(id)
	}
	n.wg.Wait() // every dial ended (each is bounded by 5 s)
	if got := len(self.Network().Peers()); got != 2 {
		t.Fatalf("connected to %d peers, want TargetPeers (2): dials in flight were not counted", got)
	}
	// Connected to TargetPeers, it dials nobody else.
	n.maybeConnect(others[len(others)-1])
	if d := n.dialing.Load(); d != 0 {
		t.Fatalf("dialled a peer beyond TargetPeers")
	}
}

// Concurrent answersFresh checks of one peer share one check: each check's
// redial closes every connection to the peer, so two at once could close
// the fresh connection the other had just dialled and read a live holder
// as gone. The peer here does not answer pings on its first connection
// (a connection a cut left mute) and answers on any later one.
func TestAnswersFreshChecksOfOnePeerShareOneCheck(t *testing.T) {
	self, holder := p2ptest.Host(t), p2ptest.Host(t)
	var mu sync.Mutex
	var first network.Conn
	var mutePings, answeredPings int
	holder.SetStreamHandler(ping.ID, func(s network.Stream) {
		mu.Lock()
		if first == nil {
			first = s.Conn()
		}
		mute := s.Conn() == first
		if mute {
			mutePings++
		} else {
			answeredPings++
		}
		mu.Unlock()
		defer s.Close()
		buf := make([]byte, ping.PingSize)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if !mute {
				if _, err := s.Write(buf); err != nil {
					return
				}
			}
		}
	})
	n := connectedNode(t, self, holder)
	const checks = 4
	answers := make(chan bool, checks)
	start := make(chan struct{})
	for range checks {
		go func() {
			<-start
			answers <- n.answersFresh(n.ctx, holder.ID())
		}()
	}
	close(start)
	for range checks {
		if !<-answers {
			t.Errorf("a concurrent check read the live peer as gone")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if answeredPings != 1 {
		t.Errorf("the peer answered %d pings on fresh connections (muted %d), want 1: concurrent checks did not share one", answeredPings, mutePings)
	}
}

// A check that asks whether a peer answers now is not answered by a
// shared check that began earlier and found it silent: a join replica on
// a flapping link that suspected its actor during a cut and asked after
// the heal would be given the answer of a check begun during the cut, and
// take a live actor over (join J7). The peer here
// drops every ping that reaches it while it is cut off (as a cut does)
// and answers every one after.
func TestAnswersFreshSinceAsksAgainAfterAStaleCheck(t *testing.T) {
	self, holder := p2ptest.Host(t), p2ptest.Host(t)
	var cut atomic.Bool
	cut.Store(true)
	holder.SetStreamHandler(ping.ID, func(s network.Stream) {
		defer s.Close()
		buf := make([]byte, ping.PingSize)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if cut.Load() {
				continue // dropped
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	})
	n := connectedNode(t, self, holder)
	// A check begins during the cut: its ping on the connection it has
	// (1 s) and the ping on a fresh connection sent after it are dropped.
	early := make(chan bool, 1)
	go func() { early <- n.answersFresh(n.ctx, holder.ID()) }()
	time.Sleep(2 * time.Second)
	// The cut ends while that check still waits for its fresh ping; a
	// check asked now must see the peer answer.
	cut.Store(false)
	asked := time.Now()
	late := make(chan bool, 1)
	go func() { late <- n.answersFreshSince(n.ctx, holder.ID(), asked) }()
	if <-early {
		t.Fatal("the check begun during the cut found the peer answering")
	}
	if !<-late {
		t.Fatal("a check asked after the heal was answered by the shared check begun during the cut: the peer read as gone")
	}
}

// connectedNode is a Node around host self, connected to holder, enough
// for its answersFresh checks.
func connectedNode(t *testing.T, self, holder host.Host) *Node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := self.Connect(ctx, peer.AddrInfo{ID: holder.ID(), Addrs: holder.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return &Node{clock: clockwork.NewRealClock(), rand: env.NewRand(1), host: self, selfID: self.ID().String(), ctx: ctx}
}
