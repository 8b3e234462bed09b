package node_test

import (
	"context"
	"github.com/bedwe/bedwe/internal/tier"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/breaker"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
)

// startBreakerNode runs a node that keeps peers in its view for a minute
// after their last announcement and waits at most 3 s for a provider.
func startBreakerNode(t *testing.T, network, services string, bootstrap []string) (api.NodeFile, func()) {
	t.Helper()
	cfg := testConfig(t, node.TestnetConfig(), services)
	cfg.Network = network
	cfg.Bootstrap = bootstrap
	cfg.PresenceTTL = time.Minute
	cfg.NoPeerWait = 3 * time.Second
	cfg.Breaker = breaker.Config{Failures: 3, OpenFor: time.Minute, MaxOpenFor: time.Minute}
	return runNode(t, cfg)
}

// TestBreakerOpensOnFailedHandoffs: the only provider of a service stops
// while the entry still lists it; failed hand-offs open its circuit
// breaker, `peers` shows it open, and later workflows fail without
// dialling it.
func TestBreakerOpensOnFailedHandoffs(t *testing.T) {
	tier.Faults(t)
	network := "brk-" + t.Name()
	entry, _ := startBreakerNode(t, network, "version: 1\nservices:\n  start: {kind: echo}\n", nil)
	gone, stopGone := startBreakerNode(t, network, "version: 1\nservices:\n  only: {kind: echo}\n", entry.Addrs)
	waitPeers(t, entry, 2)
	stopGone()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, entry.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	run := func() api.Status { return runWorkflow(t, entry.Addrs[0], "start only") }
	// The first workflow keeps retrying the listed provider until its wait
	// runs out: three failures open the breaker.
	if st := run(); st.State != api.StateFailed {
		t.Fatalf("workflow with a dead only provider: %s", st.State)
	}
	peers, err := cl.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state := ""
	for _, p := range peers {
		if p.ID == gone.PeerID {
			state = p.Breaker
		}
	}
	if state != string(breaker.Open) {
		t.Fatalf("breaker for the dead provider: %q, want open", state)
	}
	// Peer choice now passes the peer over: it is never even tried (no
	// dial, no refusal by its breaker at hand-off time).
	st := run()
	if st.State != api.StateFailed || strings.Contains(st.Error, "dial") || strings.Contains(st.Error, "circuit breaker open for") ||
		!strings.Contains(st.Error, "passed over: ") {
		t.Fatalf("second workflow: %s %q; want a failure for lack of a provider, without trying the peer", st.State, st.Error)
	}
}
