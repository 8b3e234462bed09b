package p2ptest_test

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/internal/cputime"
	"github.com/bedwe/bedwe/internal/p2ptest"
)

// BenchmarkConnect is one new connection between two real hosts of this
// process and its closing: TCP on loopback, the TLS handshake, yamux and
// libp2p's identify exchange. cpu-ns/op is the CPU of both ends: what a
// hop to a peer not yet connected pays on top of its requests (a bedwe
// node adds its gossip streams and a presence greeting).
func BenchmarkConnect(b *testing.B) {
	client, server := p2ptest.Host(b), p2ptest.Host(b)
	ai := peer.AddrInfo{ID: server.ID(), Addrs: server.Addrs()}
	start := cputime.Used()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := client.Connect(ctx, ai)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if client.Network().Connectedness(server.ID()) != network.Connected {
			b.Fatal("not connected after Connect")
		}
		if err := client.Network().ClosePeer(server.ID()); err != nil {
			b.Fatal(err)
		}
	}
	cputime.ReportPerOp(b, start)
}
