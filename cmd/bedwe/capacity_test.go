package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
)

// TestSubmitBusyExitsThree: a node at its --max-workflows limit refuses a
// submission; bedwe submit prints the reason in one line (no stack) and
// exits 3.
func TestSubmitBusyExitsThree(t *testing.T) {
	dir := t.TempDir()
	svc := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(svc, []byte("version: 1\nservices:\n  nap: {kind: sleep, duration: 1m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.DataDir, cfg.ServicesFile, cfg.MDNS = filepath.Join(dir, "data"), svc, false
	cfg.Listen, cfg.Network, cfg.Zone = []string{"/ip4/127.0.0.1/tcp/0"}, "test-busy-"+filepath.Base(dir), "a"
	cfg.MaxWorkflows = 1
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan api.NodeFile, 1)
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, func(nf api.NodeFile) { ready <- nf }) }()
	t.Cleanup(func() { cancel(); <-done })
	var nf api.NodeFile
	select {
	case nf = <-ready:
	case err := <-done:
		t.Fatalf("node stopped at start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("node did not start within 30s")
	}
	wf := filepath.Join(dir, "nap.bedwe")
	if err := os.WriteFile(wf, []byte("nap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	submit := func() (string, error) {
		var out bytes.Buffer
		app := &cli.App{Name: "bedwe", Commands: []*cli.Command{submitCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
		err := app.Run([]string{"bedwe", "submit", "--peer", nf.Addrs[0], wf})
		return out.String(), err
	}
	if _, err := submit(); err != nil {
		t.Fatalf("first submission: %v", err)
	}
	_, err = submit()
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 3 || !strings.Contains(err.Error(), "--max-workflows") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("second submission: %v; want exit 3 with one line naming --max-workflows", err)
	}
}

// TestNodeCapacityFlags: limits below 1 are refused in one line, before a
// node starts.
func TestNodeCapacityFlags(t *testing.T) {
	for _, flag := range []string{"--max-concurrent", "--queue", "--max-workflows"} {
		var out bytes.Buffer
		app := &cli.App{Name: "bedwe", Commands: []*cli.Command{nodeCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
		done := make(chan error, 1)
		go func() {
			done <- app.Run([]string{"bedwe", "node", "--data", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false", flag, "0"})
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("node %s 0 started instead of refusing", flag) // and runs until the test binary exits
		}
		var ec cli.ExitCoder
		if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), flag+" 0: use at least 1") {
			t.Errorf("node %s 0: %v, want exit 1 saying to use at least 1", flag, err)
		}
	}
}
