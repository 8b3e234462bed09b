package node_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// startNode runs a real node in this process on loopback and returns its
// node file once it listens.
func startNode(t *testing.T, services string) api.NodeFile { return startNodeB(t, services) }

// startNodeB is startNode for tests and benchmarks.
func startNodeB(t testing.TB, services string) api.NodeFile {
	t.Helper()
	nf, _ := runNode(t, testConfig(t, node.DefaultConfig(), services))
	return nf
}

// testConfig is base set up for a loopback test node: its own data
// directory and services file, a network of its own, zone z0, no mDNS and
// a logger that writes to node.log in that directory (printed, last lines
// first trimmed, when the test fails). Callers adjust the rest.
func testConfig(t testing.TB, base node.Config, services string) node.Config {
	t.Helper()
	dir := t.TempDir()
	svc := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(svc, []byte(services), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := base
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.ServicesFile = svc
	cfg.Network = "test-" + filepath.Base(dir)
	cfg.MDNS = false
	cfg.Zone = "z0"
	cfg.Logger = testLogger(t, filepath.Join(dir, "node.log"))
	return cfg
}

// testLogger writes a test node's debug log to path and, if the test
// fails, prints its last lines so a failure on a busy CI machine can be
// read afterwards.
func testLogger(t testing.TB, path string) *slog.Logger {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Close()
		if !t.Failed() {
			return
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return
		}
		const keep = 16 << 10
		if len(data) > keep {
			data = data[len(data)-keep:]
		}
		t.Logf("last lines of %s:\n%s", path, data)
	})
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// runNode runs a node with cfg in this process and returns its node file
// once it listens, and a stop function (idempotent; also run at cleanup)
// that shuts the node down and reports a failed run.
func runNode(t testing.TB, cfg node.Config) (api.NodeFile, func()) {
	t.Helper()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan api.NodeFile, 1)
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, func(nf api.NodeFile) { ready <- nf }) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("node run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case nf := <-ready:
		return nf, stop
	case err := <-done:
		done <- err // for stop, run at cleanup
		t.Fatalf("node stopped at start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("node did not start within 30s")
	}
	return api.NodeFile{}, stop
}

// rawHost is a plain libp2p host connected to the node, speaking the wire
// protocol by hand.
func rawHost(t *testing.T, nf api.NodeFile) (host.Host, peer.ID) { return rawHostB(t, nf) }

// rawHostB is rawHost for tests and benchmarks.
func rawHostB(t testing.TB, nf api.NodeFile) (host.Host, peer.ID) {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, connectHost(t, h, nf)
}

// connectHost connects h to the node at nf and returns the node's ID.
func connectHost(t testing.TB, h host.Host, nf api.NodeFile) peer.ID {
	t.Helper()
	ai, err := peer.AddrInfoFromString(nf.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Connect(ctx, *ai); err != nil {
		t.Fatal(err)
	}
	return ai.ID
}

func handoff(t *testing.T, h host.Host, to peer.ID, payload []byte) (api.Ack, error) {
	return handoffB(t, h, to, payload)
}

// handoffB is handoff for tests and benchmarks.
func handoffB(t testing.TB, h host.Host, to peer.ID, payload []byte) (api.Ack, error) {
	t.Helper()
	raw, err := rpc.Call(context.Background(), h, to, api.ProtoHandoff, payload, api.MaxControlFrame, 10*time.Second)
	if err != nil {
		return api.Ack{}, err
	}
	var ack api.Ack
	if err := rpc.Dec.Unmarshal(raw, &ack); err != nil {
		t.Fatalf("decode ack: %v", err)
	}
	return ack, nil
}

func packFor(t *testing.T, src string) []byte {
	t.Helper()
	w, err := grammar.Parse("t", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	grammar.AssignPaths(w)
	p := &pack.Pack{
		WorkflowID: "wf-test",
		Origin:     []pack.Peer{{ID: "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD"}},
		Workflow:   w,
		Input:      []byte("null"),
	}
	b, err := pack.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const echoServices = "version: 1\npatterns:\n  - {match: \"S*\", kind: echo}\n"

func TestHandoffRefusesUndeclaredService(t *testing.T) {
	nf := startNode(t, echoServices)
	h, id := rawHost(t, nf)
	ack, err := handoff(t, h, id, packFor(t, "X1 S2"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code != api.CodeUnknownService {
		t.Fatalf("ack %+v, want a refusal with code %s", ack, api.CodeUnknownService)
	}
	if !strings.Contains(ack.Error, `"X1"`) || !strings.Contains(ack.Error, "S*") {
		t.Errorf("refusal %q should name the service and what the peer offers", ack.Error)
	}
}

func TestHandoffAcceptsDeclaredService(t *testing.T) {
	nf := startNode(t, echoServices)
	h, id := rawHost(t, nf)
	ack, err := handoff(t, h, id, packFor(t, "S1"))
	if err != nil {
		t.Fatal(err)
	}
	if !ack.OK {
		t.Fatalf("ack %+v, want OK", ack)
	}
}

func TestHandoffRejectsMalformedPacks(t *testing.T) {
	nf := startNode(t, echoServices)
	h, id := rawHost(t, nf)
	valid := packFor(t, "S1 S2")
	cases := map[string][]byte{
		"garbage":       []byte("this is not a pack"),
		"empty":         {},
		"truncated":     valid[:len(valid)/2],
		"wrong version": append([]byte{valid[0], valid[1], 99}, valid[3:]...),
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			ack, err := handoff(t, h, id, payload)
			if err != nil {
				t.Fatalf("the node should answer a bad pack with a refusal, got %v", err)
			}
			if ack.OK || ack.Code != api.CodeBadPack {
				t.Errorf("ack %+v, want code %s", ack, api.CodeBadPack)
			}
		})
	}
	t.Run("oversized frame", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := h.NewStream(ctx, id, protocol.ID(api.ProtoHandoff))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// Announce a 1 GiB frame: the node must not try to read or allocate it.
		var hdr [binary.MaxVarintLen64]byte
		n := binary.PutUvarint(hdr[:], 1<<30)
		_, _ = s.Write(hdr[:n])
		_, _ = s.Write(make([]byte, 4096))
		_ = s.CloseWrite()
		_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf, err := io.ReadAll(s)
		if err == nil && len(buf) > 0 {
			t.Errorf("the node answered an oversized frame with %d bytes; want a reset", len(buf))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the node neither answered nor reset within 10s")
		}
	})
	// The node is still serving after all that.
	cl, err := client.Dial(context.Background(), nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Peers(context.Background()); err != nil {
		t.Fatalf("node stopped answering after bad input: %v", err)
	}
}

func TestSubmitReportsSyntaxErrorsWithPosition(t *testing.T) {
	nf := startNode(t, echoServices)
	cl, err := client.Dial(context.Background(), nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.Submit(context.Background(), "wf.bedwe", "S1\nFORK(S2) SYNC", nil)
	var re *client.RemoteError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "wf.bedwe:2:") {
		t.Fatalf("got %v, want a remote error at wf.bedwe:2:COL", err)
	}
	_, err = cl.Submit(context.Background(), "wf.bedwe", "S1", []byte("{not json"))
	if err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("got %v, want an input JSON error", err)
	}
}

func TestSingleNodeRunsWorkflowAndResumesOrigin(t *testing.T) {
	nf := startNode(t, echoServices)
	cl, err := client.Dial(context.Background(), nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cl.Submit(ctx, "wf", "S1 FORK(S2, S3) SYNC FIRST(S4, S5) ENDFIRST S6", []byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	final, err := cl.Wait(ctx, st.ID, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != api.StateSucceeded {
		t.Fatalf("state %s: %s", final.State, final.Error)
	}
	for _, label := range []string{"S1", "S2", "S3", "S6"} {
		if _, ok := final.Result[label]; !ok {
			t.Errorf("result lacks %s: %v", label, final.Result)
		}
	}
	_, s4 := final.Result["S4"]
	_, s5 := final.Result["S5"]
	if s4 == s5 {
		t.Errorf("FIRST must keep exactly one of S4, S5; result %v", final.Result)
	}
}
