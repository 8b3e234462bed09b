package testnet_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/testnet"
)

// outsider starts a real `bedwe node` process that is not part of testnet
// m: it offers X* (recording every invocation in record), bootstraps from
// node 0 and gets extra flags; it is killed when the test ends.
func outsider(t *testing.T, m *testnet.Manifest, record string, extra ...string) api.NodeFile {
	t.Helper()
	dir := t.TempDir()
	services := filepath.Join(dir, "services.yaml")
	text := fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"X*\", kind: echo}\n", record)
	if err := os.WriteFile(services, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	args := append([]string{"node", "--data", data, "--listen", "/ip4/127.0.0.1/tcp/0", "--zone", "outside",
		"--services", services, "--network", m.Network, "--mdns=false", "--profile", "testnet",
		"--announce", "1s", "--bootstrap", m.Nodes[0].Addrs[0]}, extra...)
	logf, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bedweBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("outsider log:\n%s", log)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		var nf api.NodeFile
		raw, err := os.ReadFile(filepath.Join(data, "node.json"))
		if err == nil && jsonUnmarshal(string(raw), &nf) == nil && nf.PID == cmd.Process.Pid {
			return nf
		}
		if time.Now().After(deadline) {
			t.Fatalf("outsider wrote no node.json within 30s")
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// oneLine fails the test unless a CLI error is one line containing want.
func oneLine(t *testing.T, what, stderr, want string) {
	t.Helper()
	msg := strings.TrimRight(stderr, "\n")
	if strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine ") || !strings.Contains(msg, want) {
		t.Errorf("%s: stderr is not one line containing %q:\n%s", what, want, stderr)
	}
}

// TestMembership runs a testnet of real processes with membership on (the
// default) next to outside nodes and clients: a node without the swarm key
// cannot connect, one with the key but not trusted is gated, neither ever
// receives a pack although only they offer the service; outside clients
// cannot submit or read; adding the outsider to the trusted-peers file
// lets it in while everything runs.
func TestMembership(t *testing.T) {
	m := up(t, testnet.Options{Nodes: 3, Zones: 3, NoPeerWait: 2 * time.Second,
		Services: "version: 1\npatterns:\n  - {match: \"S*\", kind: echo}\n"})
	if m.SwarmKey == "" || m.TrustedPeers == "" || m.ClientKey == "" {
		t.Fatalf("testnet without membership: %+v", m)
	}
	record := filepath.Join(t.TempDir(), "outside-invocations.jsonl")
	withKey := outsider(t, m, record, "--swarm-key", m.SwarmKey)
	withoutKey := outsider(t, m, record)
	empty := t.TempDir() // a data dir without a node: no local keys
	addr := m.Nodes[0].Addrs[0]

	t.Run("the outsider with the key is refused at the transport", func(t *testing.T) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, stderr, code := bedwe(t, "", "peers", "--testnet", m.Dir, "--node", "0", "--refused", "-o", "json")
			if code != 0 {
				t.Fatalf("peers --refused: exit %d: %s", code, stderr)
			}
			var refused []api.RefusedPeer
			if err := jsonUnmarshal(out, &refused); err != nil {
				t.Fatalf("peers --refused -o json: %v\n%s", err, out)
			}
			found := false
			for _, r := range refused {
				found = found || r.ID == withKey.PeerID
				if r.ID == withoutKey.PeerID {
					t.Errorf("the node without the swarm key was identified: it must fail before the security handshake")
				}
			}
			if found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 0 does not list the untrusted outsider %s as refused: %s", withKey.PeerID, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("outside nodes never receive a pack", func(t *testing.T) {
		st := run(t, m, "S1 X1", "")
		if st.State != api.StateFailed || !strings.Contains(st.Error, "X1") {
			t.Fatalf("a workflow only outsiders can run ended %s (%s); want failed at X1", st.State, st.Error)
		}
		if recs, _ := service.ReadRecords(record); len(recs) != 0 {
			t.Fatalf("outside nodes ran %d steps: %+v", len(recs), recs)
		}
	})

	t.Run("outside clients cannot submit or read", func(t *testing.T) {
		before, stderr, code := bedwe(t, "", "status", "--testnet", m.Dir, "--node", "0", "-o", "json")
		if code != 0 {
			t.Fatalf("status: %s", stderr)
		}
		_, stderr, code = bedwe(t, "S1", "submit", "-", "--peer", addr, "--data", empty, "--swarm-key", m.SwarmKey)
		if code != 1 {
			t.Fatalf("an unlisted client's submit exited %d; want 1", code)
		}
		oneLine(t, "unlisted client", stderr, "is not authorized: add it to --clients on the node")
		_, stderr, code = bedwe(t, "S1", "submit", "-", "--peer", addr, "--data", empty)
		if code != 1 {
			t.Fatalf("a client without the swarm key exited %d; want 1", code)
		}
		oneLine(t, "client without the swarm key", stderr, "--swarm-key")
		_, stderr, code = bedwe(t, "", "status", "--peer", addr, "--data", empty, "--swarm-key", m.SwarmKey, "-o", "json")
		if code != 1 {
			t.Fatalf("an unlisted client read the workflows (exit %d)", code)
		}
		after, _, _ := bedwe(t, "", "status", "--testnet", m.Dir, "--node", "0", "-o", "json")
		if before != after {
			t.Fatalf("the workflows of node 0 changed after outside submissions:\nbefore %s\nafter %s", before, after)
		}
	})

	t.Run("a listed client may submit", func(t *testing.T) {
		key := filepath.Join(t.TempDir(), "client.key")
		id, stderr, code := bedwe(t, "", "id", "--client-key", key)
		if code != 0 {
			t.Fatalf("id: %s", stderr)
		}
		if err := os.WriteFile(m.Clients, []byte(id), 0o644); err != nil {
			t.Fatal(err)
		}
		// The nodes re-read --clients within a second or so.
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, stderr, code := bedwe(t, "S1", "submit", "-", "--peer", addr, "--data", empty,
				"--swarm-key", m.SwarmKey, "--client-key", key, "--wait", "-o", "json")
			if code == 0 {
				var st api.Status
				if err := jsonUnmarshal(out, &st); err != nil || st.State != api.StateSucceeded {
					t.Fatalf("listed client's workflow: %v %s", err, out)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a listed client still cannot submit: %s", stderr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("trusting the outsider lets it in", func(t *testing.T) {
		f, err := os.OpenFile(m.TrustedPeers, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "%s  # admitted by the test\n", withKey.PeerID)
		f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Every node must see it: S1 may run on any of them, and the one
		// that does hands X1 on (waiting for node 0 alone failed here in
		// about half the runs on a busy machine: S1's holder had not yet
		// heard of the outsider when X1 was due).
		for i := range m.Nodes {
			for {
				out, _, _ := bedwe(t, "", "peers", "--testnet", m.Dir, "--node", strconv.Itoa(i), "-o", "json")
				if strings.Contains(out, withKey.PeerID) {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("node %d does not see the outsider after it was trusted: %s", i, out)
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
		st := run(t, m, "S1 X1", "")
		if st.State != api.StateSucceeded {
			t.Fatalf("state %s: %s", st.State, st.Error)
		}
		recs, err := service.ReadRecords(record)
		if err != nil || len(recs) != 1 || recs[0].Peer != withKey.PeerID {
			t.Fatalf("X1 ran %d times (%v) on %+v; want once on the admitted outsider", len(recs), err, recs)
		}
	})
}

// TestNodeRefusesQUICWithSwarmKey: a private network runs on TCP only and
// the node says so in one line.
func TestNodeRefusesQUICWithSwarmKey(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "swarm.key")
	if _, stderr, code := bedwe(t, "", "swarm-key", "-o", key); code != 0 {
		t.Fatalf("swarm-key: %s", stderr)
	}
	if _, stderr, code := bedwe(t, "", "swarm-key", "-o", key); code != 1 {
		t.Fatalf("swarm-key replaced an existing key: %s", stderr)
	}
	_, stderr, code := bedwe(t, "", "node", "--data", filepath.Join(dir, "data"), "--swarm-key", key,
		"--listen", "/ip4/127.0.0.1/udp/0/quic-v1", "--mdns=false")
	if code != 1 {
		t.Fatalf("node with QUIC and a swarm key exited %d", code)
	}
	oneLine(t, "QUIC with a swarm key", stderr, "QUIC cannot be used with a private network")
}
