package testnet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/bedwe/bedwe/internal/tier"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/testnet"
)

// upNetns starts a network-namespace testnet on a random 10.77.X.0/24 (so
// it does not collide with one started by hand), or skips the test where
// namespaces are not available.
func upNetns(t *testing.T, opts testnet.Options) *testnet.Manifest {
	t.Helper()
	if err := testnet.NetnsAvailable(); errors.Is(err, testnet.ErrNeedRoot) {
		t.Skipf("network namespaces need root: running as uid %d", os.Geteuid())
	} else if err != nil {
		t.Skip("network namespaces need root: " + err.Error())
	}
	opts.Netns = true
	opts.Subnet = fmt.Sprintf("10.77.%d.0/24", 1+rand.IntN(250))
	return up(t, opts)
}

// leftovers lists what of the testnet's namespaces and host link remains.
func leftovers(m *testnet.Manifest) []string {
	var out []string
	names, _ := filepath.Glob("/run/netns/bedwe-" + m.Netns.ID + "-*")
	out = append(out, names...)
	if exec.Command("ip", "link", "show", m.Netns.HostLink).Run() == nil {
		out = append(out, "link "+m.Netns.HostLink)
	}
	return out
}

// TestNetnsUpDown starts a namespace testnet, runs a workflow through the
// CLI from the root namespace, partitions and heals it through the CLI, and
// checks that down removes everything after the harness "crashed" (every
// node SIGKILLed, the manifest left behind).
func TestNetnsUpDown(t *testing.T) {
	tier.Faults(t)
	m := upNetns(t, testnet.Options{Nodes: 3, Zones: 3})
	for i, nd := range m.Nodes {
		if nd.Namespace == "" || nd.Addr == "" || nd.Veth == "" {
			t.Fatalf("node %d: manifest lacks its namespace, address or veth: %+v", i, nd)
		}
	}
	st := run(t, m, "a b c", "")
	if st.State != "succeeded" {
		t.Fatalf("workflow through the host link: %s %s", st.State, st.Error)
	}
	if _, stderr, code := bedwe(t, "", "testnet", "partition", "--dir", m.Dir, "--isolate", "z0"); code != 0 {
		t.Fatalf("partition: exit %d: %s", code, stderr)
	}
	out, stderr, code := bedwe(t, "", "testnet", "links", "--dir", m.Dir, "-o", "json")
	var links []testnet.LinkState
	if code != 0 || json.Unmarshal([]byte(out), &links) != nil {
		t.Fatalf("links: exit %d: %s %s", code, out, stderr)
	}
	if len(links) != 3 || len(links[0].Cut) != 2 || !slices.Contains(links[1].Cut, m.Nodes[0].Addr) || len(links[2].Cut) != 1 {
		t.Fatalf("after isolating node 0, links = %+v", links)
	}
	if _, stderr, code := bedwe(t, "", "testnet", "link", "--dir", m.Dir, "--node", "1", "--loss", "5", "--rate", "10mbit"); code != 0 {
		t.Fatalf("link: exit %d: %s", code, stderr)
	}
	if _, stderr, code := bedwe(t, "", "testnet", "heal", "--dir", m.Dir); code != 0 {
		t.Fatalf("heal: exit %d: %s", code, stderr)
	}
	links, err := m.Links()
	if err != nil {
		t.Fatal(err)
	}
	if len(links[0].Cut) != 0 || links[1].LossPct != 5 || links[1].Qdisc == "" {
		t.Fatalf("after heal and link, links = %+v", links)
	}

	for i := range m.Nodes {
		if err := m.Kill(i, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := bedwe(t, "", "testnet", "down", "--dir", m.Dir); code != 0 {
		t.Fatalf("down after a crash: exit %d: %s", code, stderr)
	}
	if left := leftovers(m); len(left) > 0 {
		t.Fatalf("down left %v", left)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, testnet.ManifestFile)); err != nil {
		t.Fatalf("manifest: %v", err)
	}
}

// TestNetnsAClientMayAskOften: a client on another address (the root
// namespace, over the host link) may run the CLI again and again. Every
// call opens a connection of its own, and libp2p's default limit on new
// connections from one address (a burst of 16, then one every 5 s)
// would refuse the 17th and lock a client that polls a result out. 40
// calls in a row must all be answered.
func TestNetnsAClientMayAskOften(t *testing.T) {
	tier.Faults(t)
	m := upNetns(t, testnet.Options{Nodes: 2, Zones: 1})
	st := submitAt0(t, m, "a")
	for i := 1; i <= 40; i++ {
		if out, stderr, code := bedwe(t, "", "status", st.ID, "--testnet", m.Dir, "--node", "0", "-o", "json"); code != 0 {
			t.Fatalf("status call %d of 40 from one address: exit %d: %s %s", i, code, out, stderr)
		}
	}
}

// TestNetnsChaos runs each network scenario once on a fresh namespace
// testnet of 6 nodes in 3 zones, with the assertions of TestChaos and, for
// isolate-holder, invariant I1 on the isolated chain.
func TestNetnsChaos(t *testing.T) {
	tier.Faults(t)
	for _, scenario := range testnet.NetnsScenarios {
		t.Run(scenario, func(t *testing.T) {
			m := upNetns(t, testnet.Options{Nodes: 6, Zones: 3})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sum, err := m.Chaos(ctx, testnet.ChaosOptions{
				Scenario: scenario, Workflows: 3, StepMillis: 500,
				Timeout: time.Minute, Progress: logWriter{t},
			})
			if err != nil {
				t.Fatalf("chaos %s: %v", scenario, err)
			}
			out, _ := json.Marshal(sum)
			t.Logf("chaos %s: %s", scenario, out)
			if scenario == "isolate-holder" && sum.IsolatedStep == "" {
				t.Errorf("isolate-holder isolated no step")
			}
			for _, msg := range chaosFailures(sum) {
				t.Error(msg)
			}
		})
	}
}
