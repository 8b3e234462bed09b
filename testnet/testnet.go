package testnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DefaultServices is the services file every testnet node gets unless told
// otherwise: builtins only, so nothing runs outside the test.
//   - fail*    always fails
//   - flaky*   fails half the time (seeded by the idempotency key)
//   - sleep*   sleeps for the input field sleep_ms (ms, or an object by
//     service name), else 100ms
//   - anything else echoes its request (a no-op with a small output)
const DefaultServices = `version: 1
patterns:
  - {match: "fail*", kind: fail, probability: 1}
  - {match: "flaky*", kind: fail, probability: 0.5, seed: 1}
  - {match: "sleep*", kind: sleep, from_request: true, field: sleep_ms, duration: 100ms}
  - {match: "*", kind: echo}
`

// Options configure Up.
type Options struct {
	// Nodes is how many processes to start (>= 1).
	Nodes int
	// Dir holds the manifest, the services file and one data dir per node.
	Dir string
	// Zones is how many load-shedding zones; nodes are assigned round-robin.
	Zones int
	// Binary is the bedwe executable; empty means this process's own.
	Binary string
	// Services is the services file text; empty means DefaultServices.
	Services string
	// Announce is the presence interval (short, so the mesh forms fast).
	Announce time.Duration
	// Progress, when set, receives one line per milestone.
	Progress io.Writer
	// ConnectTimeout bounds the wait for every node to see every other.
	ConnectTimeout time.Duration
	// NodeServices, when set, gives node i its own services file text
	// (nodes for which it returns "" get Services).
	NodeServices func(i int) string
	// Profile is the nodes' timing profile: "testnet" (default: 250 ms
	// beats, ~1.5 s detection) or "mesh" (1 s beats, ~5 s detection, far
	// fewer false alarms when many nodes share few cores).
	Profile string
	// NoPeerWait is how long a node waits for a provider of the next
	// service before failing the workflow (0: the node's default).
	NoPeerWait time.Duration
}

func (o *Options) fill() error {
	if o.Nodes < 1 {
		return fmt.Errorf("a testnet needs at least 1 node (got %d)", o.Nodes)
	}
	if o.Dir == "" {
		return errors.New("a testnet needs a directory (--dir)")
	}
	if o.Zones < 1 {
		o.Zones = 1
	}
	if o.Zones > o.Nodes {
		o.Zones = o.Nodes
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the bedwe binary: %w", err)
		}
		o.Binary = exe
	}
	if o.Services == "" {
		o.Services = DefaultServices
	}
	if o.Announce <= 0 {
		o.Announce = time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30*time.Second + time.Duration(o.Nodes)*time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// Up starts a testnet of real `bedwe node` processes on 127.0.0.1 and
// returns once every node sees every other node's presence.
func Up(ctx context.Context, opts Options) (*Manifest, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if old, err := LoadManifest(dir); err == nil {
		for i := range old.Nodes {
			if old.alive(&old.Nodes[i]) {
				return nil, fmt.Errorf("a testnet is already running in %s (node %d, pid %d); stop it with `bedwe testnet down --dir %s`", dir, i, old.Nodes[i].PID, dir)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create testnet directory: %w", err)
	}
	services := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(services, []byte(opts.Services), 0o644); err != nil {
		return nil, fmt.Errorf("write services file: %w", err)
	}
	binary, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	m := &Manifest{
		Dir:       dir,
		Network:   "testnet-" + hex.EncodeToString(b[:]),
		Binary:    binary,
		Services:  services,
		Announce:  opts.Announce.String(),
		StartedAt: time.Now().UTC(),
	}
	if opts.NoPeerWait > 0 {
		m.NoPeerWait = opts.NoPeerWait.String()
	}
	m.Profile = opts.Profile
	if m.Profile == "" {
		m.Profile = "testnet"
	}
	for z := range opts.Zones {
		m.Zones = append(m.Zones, "z"+strconv.Itoa(z))
	}
	for i := range opts.Nodes {
		nd := filepath.Join(dir, "node-"+strconv.Itoa(i))
		node := Node{
			Index:   i,
			Zone:    m.Zones[i%opts.Zones],
			DataDir: nd,
			Listen:  "/ip4/127.0.0.1/tcp/0",
			Log:     filepath.Join(nd, "node.log"),
		}
		if opts.NodeServices != nil {
			if text := opts.NodeServices(i); text != "" {
				node.Services = filepath.Join(dir, "services-"+strconv.Itoa(i)+".yaml")
				if err := os.WriteFile(node.Services, []byte(text), 0o644); err != nil {
					return nil, fmt.Errorf("write services file of node %d: %w", i, err)
				}
			}
		}
		m.Nodes = append(m.Nodes, node)
	}
	fail := func(err error) (*Manifest, error) {
		_ = m.Save()
		_ = m.Down()
		return nil, err
	}
	// The first node is everyone's bootstrap; the rest start in parallel.
	if err := m.start(ctx, &m.Nodes[0], nil); err != nil {
		return fail(err)
	}
	fixListen(&m.Nodes[0])
	fmt.Fprintf(opts.Progress, "node 0 up (%s)\n", m.Nodes[0].PeerID)
	boot := []string{m.Nodes[0].Addrs[0]}
	var wg sync.WaitGroup
	errs := make([]error, len(m.Nodes))
	sem := make(chan struct{}, 8)
	for i := 1; i < len(m.Nodes); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = m.start(ctx, &m.Nodes[i], boot)
			if errs[i] == nil {
				fixListen(&m.Nodes[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	fmt.Fprintf(opts.Progress, "%d nodes started; waiting for the mesh to connect\n", len(m.Nodes))
	if err := m.Save(); err != nil {
		return fail(err)
	}
	if err := m.WaitConnected(ctx, opts.ConnectTimeout); err != nil {
		return fail(err)
	}
	fmt.Fprintf(opts.Progress, "mesh connected: %d nodes in %d zones\n", len(m.Nodes), len(m.Zones))
	return m, nil
}

// fixListen pins a node's listen address to the port it got, so a restart
// comes back where its peers expect it.
func fixListen(nd *Node) {
	if len(nd.Addrs) == 0 {
		return
	}
	a := nd.Addrs[0]
	if i := indexP2P(a); i > 0 {
		nd.Listen = a[:i]
	}
}

func indexP2P(a string) int {
	for i := 0; i+5 <= len(a); i++ {
		if a[i:i+5] == "/p2p/" {
			return i
		}
	}
	return -1
}

// WaitConnected waits until every live node's presence view lists every
// other live node.
func (m *Manifest) WaitConnected(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		missing := m.missingPresence()
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mesh not connected after %s: %s", limit, missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *Manifest) missingPresence() string {
	live := map[string]bool{}
	for i := range m.Nodes {
		if m.alive(&m.Nodes[i]) {
			live[m.Nodes[i].PeerID] = true
		}
	}
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		if !live[nd.PeerID] {
			continue
		}
		var pj presenceJSON
		if err := readJSON(filepath.Join(nd.DataDir, "presence.json"), &pj); err != nil {
			return fmt.Sprintf("node %d has no presence view yet", i)
		}
		seen := map[string]bool{}
		for _, p := range pj.Peers {
			seen[p.ID] = true
		}
		for id := range live {
			if id != nd.PeerID && !seen[id] {
				return fmt.Sprintf("node %d does not see %s yet", i, id)
			}
		}
	}
	return ""
}

// Down stops every node: SIGTERM, then SIGKILL for those still running after
// a grace period.
func (m *Manifest) Down() error {
	for i := range m.Nodes {
		_ = m.Kill(i, syscall.SIGTERM)
	}
	var errs []error
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		if err := m.waitGone(nd, 5*time.Second); err != nil {
			if err := m.Kill(i, syscall.SIGKILL); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Down stops the testnet whose manifest is in dir.
func Down(dir string) error {
	m, err := LoadManifest(dir)
	if err != nil {
		return err
	}
	return m.Down()
}
