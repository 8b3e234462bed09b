package testnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nodeJSON is the part of DATA/node.json a testnet reads.
type nodeJSON struct {
	PeerID    string   `json:"peer_id"`
	Addrs     []string `json:"addrs"`
	PID       int      `json:"pid"`
	PublicKey string   `json:"public_key"`
	HTTP      string   `json:"http"`
}

// presenceJSON is the part of DATA/presence.json a testnet reads.
type presenceJSON struct {
	Peers []struct {
		ID string `json:"id"`
	} `json:"peers"`
}

// args builds the command line of node i.
func (m *Manifest) args(nd *Node, bootstrap []string) []string {
	services := m.Services
	if nd.Services != "" {
		services = nd.Services
	}
	args := []string{"node",
		"--data", nd.DataDir,
		"--listen", nd.Listen,
		"--zone", nd.Zone,
		"--services", services,
		"--network", m.Network,
		"--mdns=false",
		"--profile", m.profile(),
		"--announce", m.Announce,
		"--log-level", nodeLogLevel(),
		"--events", nd.Events(),
		"--http", nd.httpAddr(),
	}
	// Flags the manifest may leave empty: passed only when set.
	for _, f := range []struct{ flag, value string }{
		{"--no-peer-wait", m.NoPeerWait}, {"--schedule", m.Schedule}, {"--clock", m.Clock},
		{"--routing", m.Routing}, {"--trusted-keys", m.Keys}, {"--swarm-key", m.SwarmKey},
		{"--trusted-peers", m.TrustedPeers}, {"--client-key", m.ClientKey}, {"--clients", m.Clients},
	} {
		if f.value != "" {
			args = append(args, f.flag, f.value)
		}
	}
	for _, b := range bootstrap {
		args = append(args, "--bootstrap", b)
	}
	args = append(args, m.NodeFlags...)
	if os.Getenv("BEDWE_TESTNET_PPROF") != "" {
		args = append(args, "--pprof") // Go's profiler on each node's --http
	}
	return args
}

// nodeLogLevel is the --log-level of testnet nodes: info, or
// BEDWE_TESTNET_LOG_LEVEL when set (debug to trace a failing chaos run).
// Likewise BEDWE_TESTNET_PPROF (any value) serves Go's profiler on every
// node's --http listener.
func nodeLogLevel() string {
	if l := os.Getenv("BEDWE_TESTNET_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// start launches node nd as a detached process (its own session, so it
// outlives the command that started it) logging to its data dir, and waits
// for it to write node.json.
func (m *Manifest) start(ctx context.Context, nd *Node, bootstrap []string) error {
	if err := os.MkdirAll(nd.DataDir, 0o700); err != nil {
		return fmt.Errorf("node %d: %w", nd.Index, err)
	}
	_ = os.Remove(filepath.Join(nd.DataDir, "node.json"))
	logf, err := os.OpenFile(nd.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %d log: %w", nd.Index, err)
	}
	defer logf.Close()
	// The command: the manifest's binary, or the node's own command (an
	// emulator running a board's build: qemu-user runs it in its own
	// process, so the pid is still the node's).
	argv := append([]string{m.Binary}, m.args(nd, bootstrap)...)
	if len(nd.Command) > 0 {
		argv = append(slices.Clone(nd.Command), m.args(nd, bootstrap)...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if nd.Namespace != "" {
		// ip netns exec execs the binary in place: the pid is the node's.
		cmd = exec.Command("ip", append([]string{"netns", "exec", nd.Namespace}, argv...)...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %d: %w", nd.Index, err)
	}
	nd.PID = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			if last := tail(nd.Log, 300); nd.HTTP != "" && strings.Contains(last, "--http "+nd.HTTP+":") && strings.Contains(last, "address already in use") {
				// The port pinned at the first start was taken while the
				// node was down (another process got it as a free port):
				// start on a fresh one, which node.json then names.
				nd.HTTP = ""
				return m.start(ctx, nd, bootstrap)
			}
			return fmt.Errorf("node %d exited at start (%v); its log %s ends:\n%s", nd.Index, err, nd.Log, tail(nd.Log, 2000))
		case <-ctx.Done():
			_ = syscall.Kill(nd.PID, syscall.SIGKILL)
			return ctx.Err()
		case <-deadline.C:
			_ = syscall.Kill(nd.PID, syscall.SIGKILL)
			return fmt.Errorf("node %d wrote no node.json within 30s; log %s", nd.Index, nd.Log)
		case <-tick.C:
		}
		var nj nodeJSON
		if readJSON(filepath.Join(nd.DataDir, "node.json"), &nj) == nil && nj.PID == nd.PID {
			nd.PeerID, nd.Addrs, nd.PublicKey = nj.PeerID, nj.Addrs, nj.PublicKey
			if nj.HTTP != "" {
				nd.HTTP = nj.HTTP // pinned: a restart listens there again
			}
			return nil
		}
	}
}

// httpAddr is the node's --http: the address it got at its first start,
// or any free loopback port for that start.
func (nd *Node) httpAddr() string {
	if nd.HTTP != "" {
		return nd.HTTP
	}
	return "127.0.0.1:0"
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(data) > n {
		data = data[len(data)-n:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return string(data)
}

// alive reports whether pid is a running bedwe node of this testnet (not a
// recycled pid).
func (m *Manifest) alive(nd *Node) bool {
	if nd.PID <= 0 {
		return false
	}
	if err := syscall.Kill(nd.PID, 0); err != nil {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(nd.PID) + "/cmdline")
	if err != nil {
		return true // no /proc: trust the signal check
	}
	if bytes.Contains(cmdline, []byte("zombie")) {
		return false
	}
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(nd.PID) + "/stat")
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
		return false
	}
	return bytes.Contains(cmdline, []byte(nd.DataDir))
}

// Kill sends sig to node i's process and, for SIGKILL, waits until it is gone.
func (m *Manifest) Kill(i int, sig syscall.Signal) error {
	nd := &m.Nodes[i]
	if !m.alive(nd) {
		return nil
	}
	if err := syscall.Kill(nd.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal node %d (pid %d): %w", i, nd.PID, err)
	}
	if sig != syscall.SIGKILL {
		return nil
	}
	return m.waitGone(nd, 10*time.Second)
}

func (m *Manifest) waitGone(nd *Node, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for m.alive(nd) {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d (pid %d) still running after %s", nd.Index, nd.PID, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Restart starts node i again with the same data dir and listen address,
// bootstrapping from the live nodes.
//
// Restarts of different nodes may run concurrently; the node keeps every
// flag it was first started with (timetable, clock, routing, trusted keys).
func (m *Manifest) Restart(ctx context.Context, i int) error {
	nodesMu.Lock()
	nd := m.Nodes[i]
	boot := m.bootstrapFor(i)
	nodesMu.Unlock()
	if m.alive(&nd) {
		return fmt.Errorf("node %d is still running (pid %d)", i, nd.PID)
	}
	if err := m.start(ctx, &nd, boot); err != nil {
		return err
	}
	nodesMu.Lock()
	m.Nodes[i] = nd
	nodesMu.Unlock()
	return m.Save()
}

// bootstrapFor lists the addresses of the next four nodes, up or not:
// their ports are fixed after the first start and a node keeps dialing its
// bootstrap peers, so after a blackout the mesh re-forms as nodes return.
func (m *Manifest) bootstrapFor(i int) []string {
	var out []string
	for k := 1; k < len(m.Nodes) && len(out) < 4; k++ {
		nd := &m.Nodes[(i+k)%len(m.Nodes)]
		if len(nd.Addrs) > 0 {
			out = append(out, nd.Addrs[0])
		}
	}
	return out
}

func (m *Manifest) profile() string {
	if m.Profile == "" {
		return "testnet"
	}
	return m.Profile
}
