package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/member"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/node/service"
)

// privateMesh is the shared files of a test mesh with membership: a swarm
// key and a trusted-peers file.
type privateMesh struct {
	dir, network, swarmKey, trusted string
	psk                             pnet.PSK
}

func newPrivateMesh(t *testing.T) *privateMesh {
	t.Helper()
	dir := t.TempDir()
	m := &privateMesh{dir: dir, network: "member-" + filepath.Base(dir),
		swarmKey: filepath.Join(dir, "swarm.key"), trusted: filepath.Join(dir, "trusted-peers")}
	if err := member.WriteSwarmKey(m.swarmKey); err != nil {
		t.Fatal(err)
	}
	psk, err := member.ReadSwarmKey(m.swarmKey)
	if err != nil {
		t.Fatal(err)
	}
	m.psk = psk
	m.trust(t)
	return m
}

// trust rewrites the trusted-peers file with ids (nodes re-read it).
func (m *privateMesh) trust(t *testing.T, ids ...peer.ID) {
	t.Helper()
	writeIDs(t, m.trusted, ids...)
}

func writeIDs(t *testing.T, path string, ids ...peer.ID) {
	t.Helper()
	text := "# test list\n"
	for _, id := range ids {
		text += id.String() + "  # a member\n"
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// config is a node of the mesh whose identity is created now, so the test
// can list it before the node starts.
func (m *privateMesh) config(t *testing.T, services string) (node.Config, peer.ID) {
	t.Helper()
	cfg := testConfig(t, node.TestnetConfig(), services)
	cfg.Network = m.network
	cfg.SwarmKeyFile = m.swarmKey
	cfg.TrustedPeersFile = m.trusted
	cfg.NoPeerWait = 2 * time.Second
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := member.LoadOrCreateKey(filepath.Join(cfg.DataDir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := member.KeyID(key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, id
}

// eventually polls cond until it returns nil or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// localClient dials a node as its own CLI does (node.json's keys).
func localClient(t *testing.T, dataDir string) *client.Client {
	t.Helper()
	cl, err := client.DialDataDir(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// seesPeers returns nil once the node's view lists every id.
func seesPeers(cl *client.Client, ids ...peer.ID) error {
	peers, err := cl.Peers(context.Background())
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !slices.ContainsFunc(peers, func(p api.PeerInfo) bool { return p.ID == id.String() }) {
			return fmt.Errorf("%s not in view", id)
		}
	}
	return nil
}

func refusedBy(cl *client.Client, id peer.ID) error {
	resp, err := cl.Refused(context.Background())
	if err != nil {
		return err
	}
	for _, r := range resp {
		if r.ID == id.String() {
			return nil
		}
	}
	return fmt.Errorf("%s not among the refused peers %v", id, resp)
}

func pskHost(t *testing.T, psk pnet.PSK, key crypto.PrivKey) host.Host {
	t.Helper()
	opts := []libp2p.Option{libp2p.NoListenAddrs}
	if psk != nil {
		opts = append(opts, libp2p.PrivateNetwork(psk))
	}
	if key != nil {
		opts = append(opts, libp2p.Identity(key))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func connect(h host.Host, nf api.NodeFile) error {
	ai, err := peer.AddrInfoFromString(nf.Addrs[0])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Connect(ctx, *ai); err != nil {
		return err
	}
	// A gated connection may be closed just after the dialer's side of
	// the upgrade finished: a round trip on it tells.
	return rpc.CallCBOR(ctx, h, ai.ID, api.ProtoClient, api.ClientRequest{Op: api.OpPeers}, &api.ClientResponse{}, 5*time.Second)
}

// TestMembershipPrivateSwarmAndGater runs a private mesh of two members and
// an outside node that holds the swarm key but is not trusted: hosts
// without the key cannot connect, the outsider is gated and never receives
// a pack although it alone offers the service, and once it is added to the
// trusted-peers file (re-read while the nodes run) it joins and runs it.
func TestMembershipPrivateSwarmAndGater(t *testing.T) {
	m := newPrivateMesh(t)
	record := filepath.Join(m.dir, "outsider-invocations.jsonl")
	cfgA, idA := m.config(t, echoServices)
	cfgB, idB := m.config(t, echoServices)
	cfgC, idC := m.config(t, fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"X*\", kind: echo}\n", record))
	m.trust(t, idA, idB)
	nfA, _ := runNode(t, cfgA)
	cfgB.Bootstrap, cfgC.Bootstrap = nfA.Addrs, nfA.Addrs
	runNode(t, cfgB)
	runNode(t, cfgC)
	clA := localClient(t, cfgA.DataDir)
	eventually(t, 30*time.Second, "A sees B", func() error { return seesPeers(clA, idB) })

	t.Run("without the swarm key the dial fails", func(t *testing.T) {
		if err := connect(pskHost(t, nil, nil), nfA); err == nil {
			t.Fatal("a host without the swarm key connected to a private node")
		}
		other, err := member.NewSwarmKey()
		if err != nil {
			t.Fatal(err)
		}
		otherFile := filepath.Join(t.TempDir(), "other.key")
		if err := os.WriteFile(otherFile, other, 0o600); err != nil {
			t.Fatal(err)
		}
		otherPSK, err := member.ReadSwarmKey(otherFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := connect(pskHost(t, otherPSK, nil), nfA); err == nil {
			t.Fatal("a host with another swarm key connected")
		}
		_, err = client.Dial(context.Background(), nfA.Addrs...)
		if err == nil {
			t.Fatal("a client without the swarm key connected")
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "--swarm-key") {
			t.Errorf("client error is not one line naming --swarm-key: %q", msg)
		}
	})

	t.Run("with the key but not trusted it is gated", func(t *testing.T) {
		h := pskHost(t, m.psk, nil)
		if err := connect(h, nfA); err == nil {
			t.Fatal("an untrusted host with the swarm key kept a connection")
		}
		eventually(t, 10*time.Second, "A lists the untrusted host as refused", func() error { return refusedBy(clA, h.ID()) })
		eventually(t, 10*time.Second, "A lists the outside node as refused", func() error { return refusedBy(clA, idC) })
	})

	t.Run("an outside node never receives a pack", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := clA.Submit(ctx, "out.bedwe", "S1 X1", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		final, err := clA.Wait(ctx, st.ID, 50*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final.State != api.StateFailed {
			t.Fatalf("workflow needing the outsider's service ended %s; want failed (no member offers X1)", final.State)
		}
		if recs, _ := service.ReadRecords(record); len(recs) != 0 {
			t.Fatalf("the outside node ran %d steps: %+v", len(recs), recs)
		}
	})

	t.Run("trusting it lets it in", func(t *testing.T) {
		m.trust(t, idA, idB, idC)
		eventually(t, 30*time.Second, "A sees C once trusted", func() error { return seesPeers(clA, idC) })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := clA.Submit(ctx, "in.bedwe", "S1 X1", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		final, err := clA.Wait(ctx, st.ID, 50*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final.State != api.StateSucceeded {
			t.Fatalf("state %s: %s", final.State, final.Error)
		}
		recs, err := service.ReadRecords(record)
		if err != nil || len(recs) != 1 {
			t.Fatalf("the new member ran %d steps (%v); want 1", len(recs), err)
		}
	})
}

// TestMembershipClients checks who may use the client protocol of a node
// with membership: its own CLI, listed clients and nobody else; and that a
// listed client may not speak the members' protocols.
func TestMembershipClients(t *testing.T) {
	m := newPrivateMesh(t)
	cfg, id := m.config(t, echoServices)
	clients := filepath.Join(m.dir, "clients")
	cfg.ClientsFile = clients
	keyFile := filepath.Join(m.dir, "client.key")
	key, err := member.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyID, _ := member.KeyID(key)
	writeIDs(t, clients, keyID)
	m.trust(t, id)
	nf, _ := runNode(t, cfg)
	local := localClient(t, cfg.DataDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("an unlisted client cannot connect, submit or read", func(t *testing.T) {
		opts, err := client.LoadOptions(m.swarmKey, "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.DialWith(ctx, opts, nf.Addrs...)
		if err == nil {
			t.Fatal("a client with a throw-away identity connected to a node with membership")
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "is not authorized: add it to --clients") {
			t.Errorf("error is not one line saying what is missing: %q", msg)
		}
		list, err := local.List(ctx)
		if err != nil || len(list) != 0 {
			t.Fatalf("workflows on the node: %v, %v; want none", list, err)
		}
	})

	t.Run("a listed client submits and reads results", func(t *testing.T) {
		opts, err := client.LoadOptions(m.swarmKey, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.DialWith(ctx, opts, nf.Addrs...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		st, err := cl.Submit(ctx, "wf", "S1 S2", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		final, err := cl.Wait(ctx, st.ID, 50*time.Millisecond, nil)
		if err != nil || final.State != api.StateSucceeded {
			t.Fatalf("listed client's workflow: %v %+v", err, final)
		}
		// The node's own CLI reads it too.
		if _, err := local.Result(ctx, st.ID); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a listed client may not hand off packs", func(t *testing.T) {
		h := pskHost(t, m.psk, key)
		ai, _ := peer.AddrInfoFromString(nf.Addrs[0])
		if err := h.Connect(ctx, *ai); err != nil {
			t.Fatal(err)
		}
		raw, err := rpc.Call(ctx, h, ai.ID, api.ProtoHandoff, packFor(t, "S1"), api.MaxControlFrame, 5*time.Second)
		if err == nil {
			t.Fatalf("a client's hand-off was answered: %x", raw)
		}
		eventually(t, 10*time.Second, "the node lists the client's hand-off as refused", func() error { return refusedBy(local, keyID) })
	})

	t.Run("a client removed from the list is cut off", func(t *testing.T) {
		writeIDs(t, clients)
		opts, _ := client.LoadOptions(m.swarmKey, keyFile)
		eventually(t, 10*time.Second, "the removed client cannot dial", func() error {
			cl, err := client.DialWith(ctx, opts, nf.Addrs...)
			if err != nil {
				return nil
			}
			defer cl.Close()
			if _, err := cl.Peers(ctx); err != nil {
				return nil
			}
			return errors.New("still served")
		})
	})
}

// TestClientsListOnOpenMesh: with --clients but no --trusted-peers, any
// peer connects but only listed clients (and the node's own CLI) may
// submit or read; the refusal names what is missing.
func TestClientsListOnOpenMesh(t *testing.T) {
	cfg := testConfig(t, node.TestnetConfig(), echoServices)
	cfg.ClientsFile = filepath.Join(t.TempDir(), "clients")
	writeIDs(t, cfg.ClientsFile)
	nf, _ := runNode(t, cfg)
	local := localClient(t, cfg.DataDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := local.Submit(ctx, "wf", "S1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.Wait(ctx, st.ID, 50*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	outsider, err := client.Dial(ctx, nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer outsider.Close()
	_, err = outsider.Submit(ctx, "wf", "S1", nil)
	var re *client.RemoteError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "is not authorized: add it to --clients on the node") {
		t.Fatalf("outside submit: %v; want a refusal naming --clients", err)
	}
	if _, err := outsider.Result(ctx, st.ID); err == nil {
		t.Fatal("an outside client read a result")
	}
	list, err := local.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("workflows on the node: %d (%v); want only the local one", len(list), err)
	}
}

// TestPresenceOnlyAnnouncesItself: an announcement that names another peer
// than its signer never enters a node's view.
func TestPresenceOnlyAnnouncesItself(t *testing.T) {
	cfg := testConfig(t, node.TestnetConfig(), echoServices)
	nf, _ := runNode(t, cfg)
	h, to := rawHost(t, nf)
	ps, err := pubsub.NewGossipSub(context.Background(), h, pubsub.WithMessageSigning(true), pubsub.WithStrictSignatureVerification(true))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join("/bedwe/" + cfg.Network + "/presence/1")
	if err != nil {
		t.Fatal(err)
	}
	victim := pskHost(t, nil, nil).ID()
	// The forged announcement carries a higher sequence number than every
	// genuine one of the same boot: were it taken, the node would keep it
	// and ignore the genuine ones (it keys its view by signer).
	announce := func(id peer.ID, zone string) {
		seq := uint64(time.Now().UnixNano())
		if id != h.ID() {
			seq = 1 << 62
		}
		data, _ := json.Marshal(map[string]any{"id": id.String(), "zone": zone, "services": []string{"S1"}, "seq": seq, "boot": 1})
		if err := topic.Publish(context.Background(), data); err != nil {
			t.Fatal(err)
		}
	}
	cl := localClient(t, cfg.DataDir)
	// Gossip needs the node in the topic's mesh first: announce both until
	// the genuine one shows.
	eventually(t, 30*time.Second, "the genuine announcement shows", func() error {
		announce(victim, "forged")
		announce(h.ID(), "genuine")
		return seesPeers(cl, h.ID())
	})
	if err := seesPeers(cl, victim); err == nil {
		t.Fatalf("node %s took an announcement of %s signed by %s", to, victim, h.ID())
	}
}
