package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
)

// TestMeshOverQUIC: the host's transports are chosen, not go-libp2p's
// default set (node.transportOptions), so QUIC must be named to stay
// usable. Two nodes without a swarm key that listen on QUIC only form a
// mesh, and a step only the second offers runs there.
func TestMeshOverQUIC(t *testing.T) {
	quicOnly := func(services string, bootstrap []string) node.Config {
		cfg := testConfig(t, node.TestnetConfig(), services)
		cfg.Network = "quic-" + t.Name()
		cfg.Listen = []string{"/ip4/127.0.0.1/udp/0/quic-v1"}
		cfg.Bootstrap = bootstrap
		return cfg
	}
	entry, _ := runNode(t, quicOnly("version: 1\nservices:\n  start: {kind: echo}\n", nil))
	for _, a := range entry.Addrs {
		if !strings.Contains(a, "/quic-v1/") {
			t.Fatalf("entry listens on %s, want QUIC only", a)
		}
	}
	other, _ := runNode(t, quicOnly("version: 1\nservices:\n  only: {kind: echo}\n", entry.Addrs))
	waitPeers(t, entry, 2)
	st := runWorkflow(t, entry.Addrs[0], "start only")
	if st.State != "succeeded" {
		t.Fatalf("workflow over QUIC: %s %s", st.State, st.Error)
	}
	ran := ""
	for _, e := range st.Trace {
		if e.Service == "only" {
			ran = e.Peer
		}
	}
	if ran != other.PeerID {
		t.Fatalf("step only ran on %q, want the QUIC-only peer %s", ran, other.PeerID)
	}
}

// TestListenOnUnspokenTransportRefused: a listen address on a transport the
// host does not speak stops the node at start with a message naming the
// ones it does, not go-libp2p's "no transport for protocol".
func TestListenOnUnspokenTransportRefused(t *testing.T) {
	for _, addr := range []string{"/ip4/127.0.0.1/tcp/0/ws", "/ip4/127.0.0.1/udp/0/quic-v1/webtransport"} {
		cfg := testConfig(t, node.TestnetConfig(), "version: 1\nservices:\n  s: {kind: echo}\n")
		cfg.Listen = []string{addr}
		n, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = n.Run(ctx, func(api.NodeFile) { t.Errorf("node listening on %s started", addr) })
		cancel()
		if err == nil || !strings.Contains(err.Error(), "listens on TCP") || !strings.Contains(err.Error(), addr) {
			t.Errorf("listen %s: %v, want a refusal naming TCP and QUIC", addr, err)
		}
	}
}
