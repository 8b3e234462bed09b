package testnet_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bedwe/bedwe/internal/tier"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/testnet"
)

// qemuAArch64 is the qemu-user emulator for linux/arm64 programs, as
// Debian's qemu-user-static and qemu-user packages name it.
func qemuAArch64() string {
	for _, name := range []string{"qemu-aarch64-static", "qemu-aarch64"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestBoardBuildIsAMeshMember shows that the linux/arm64 build runs as a
// member of a mesh, not only that it compiles: node 3 of a four-node
// testnet is the arm64 binary under qemu-user, and it alone offers the
// board* services, so the amd64 peers must hand it those steps (one of them
// a FORK branch) and take the rest back from it. The arm64 binary is
// BEDWE_ARM64_BINARY when set (CI passes the stripped cross build), else it
// is built here. Without qemu-user the test skips, except under CI, where
// a missing emulator fails it.
func TestBoardBuildIsAMeshMember(t *testing.T) {
	tier.Faults(t)
	qemu := qemuAArch64()
	if qemu == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("qemu-user is not installed (Debian package qemu-user-static)")
		}
		t.Skip("qemu-user is not installed (Debian package qemu-user-static)")
	}
	arm64 := os.Getenv("BEDWE_ARM64_BINARY")
	if arm64 == "" {
		arm64 = filepath.Join(t.TempDir(), "bedwe-linux-arm64")
		build := exec.Command("go", "build", "-trimpath", "-o", arm64, "github.com/bedwe/bedwe/cmd/bedwe")
		build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the arm64 binary: %v\n%s", err, out)
		}
	}
	const board = 3
	m := up(t, testnet.Options{
		Nodes: 4, Zones: 2, Profile: "mesh",
		NodeCommand: func(i int) []string {
			if i == board {
				return []string{qemu, arm64}
			}
			return nil
		},
		NodeServices: func(i int) string {
			if i == board {
				return "version: 1\npatterns:\n  - {match: \"board*\", kind: echo}\n"
			}
			return "version: 1\npatterns:\n  - {match: \"host*\", kind: echo}\n"
		},
	})
	boardPeer := m.Nodes[board].PeerID
	if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(m.Nodes[board].PID), "exe")); err != nil || !strings.Contains(filepath.Base(exe), "qemu") {
		t.Fatalf("node %d runs %q (%v), want the emulator %s", board, exe, err, qemu)
	}
	st := run(t, m, `host1 board1 FORK(board2 host2, host3) SYNC board3 host4`, "")
	if st.State != api.StateSucceeded {
		t.Fatalf("state %s: %s", st.State, st.Error)
	}
	got := ran(st)
	if len(got) != 7 {
		t.Fatalf("ran %v, want 7 steps", got)
	}
	for _, e := range st.Trace {
		if e.Outcome != "ok" {
			continue
		}
		onBoard := e.Peer == boardPeer
		if strings.HasPrefix(e.Service, "board") != onBoard {
			t.Errorf("step %s ran on %s (the arm64 member is %s)", e.Service, e.Peer, boardPeer)
		}
	}
}
