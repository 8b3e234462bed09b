package rpc_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/bedwe/bedwe/node/rpc"
)

// A peer that takes the ping stream but never answers (as behind a cut,
// on a connection that still looks open) is not reported as answering:
// ping.Ping closes its channel without a result when ctx ends, and the
// zero Result read from it carries no error.
func TestPingMutePeerIsAnError(t *testing.T) {
	a, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if _, err := rpc.Ping(context.Background(), a, b.ID()); err != nil {
		t.Fatalf("ping of a live peer: %v", err)
	}
	b.SetStreamHandler(ping.ID, func(s network.Stream) {
		defer s.Close()
		_, _ = io.Copy(io.Discard, s)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if rtt, err := rpc.Ping(ctx, a, b.ID()); err == nil {
		t.Fatalf("ping of a mute peer answered (rtt %s), want an error", rtt)
	}
}
