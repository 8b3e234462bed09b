package node_test

import (
	"strings"
	"testing"

	"github.com/bedwe/bedwe/node"
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
