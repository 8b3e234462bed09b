package testnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/schedule"
)

// ManifestFile is the name of the manifest inside a testnet directory.
const ManifestFile = "manifest.json"

// Membership files of a testnet directory (see Manifest.SwarmKey,
// TrustedPeers and ClientKey).
const (
	SwarmKeyFile     = "swarm.key"
	TrustedPeersFile = "trusted-peers"
	ClientKeyFile    = "client.key"
	ClientsFile      = "clients"
)

// ScheduleFile is the name of the testnet's copy of its timetable, and
// TrustedKeysFile that of the file listing every node's public key (passed
// to every node as --trusted-keys).
const (
	ScheduleFile    = "schedule.yaml"
	TrustedKeysFile = "trusted-keys"
)

// Manifest describes a running testnet: where each node keeps its data and
// how to reach it. `bedwe testnet up` writes it; every client verb's
// --testnet flag and `bedwe testnet down` read it.
type Manifest struct {
	Dir      string   `json:"dir"`
	Network  string   `json:"network"`
	Binary   string   `json:"binary"`
	Services string   `json:"services"`
	Zones    []string `json:"zones"`
	Announce string   `json:"announce"`
	// Profile is passed to every node as --profile.
	Profile string `json:"profile,omitempty"`
	// NoPeerWait is passed to every node as --no-peer-wait when set.
	NoPeerWait string `json:"no_peer_wait,omitempty"`
	// Schedule is the testnet's timetable (DIR/schedule.yaml), passed to
	// every node as --schedule; empty: none.
	Schedule string `json:"schedule,omitempty"`
	// Clock is the shared virtual clock (START@EPOCHxSPEED), passed to
	// every node as --clock; empty: real time.
	Clock string `json:"clock,omitempty"`
	// Routing is passed to every node as --routing when set.
	Routing string `json:"routing,omitempty"`
	// NodeFlags are appended to every node's command line.
	NodeFlags []string `json:"node_flags,omitempty"`
	// Keys is DIR/trusted-keys, passed to every node as --trusted-keys.
	Keys string `json:"trusted_keys,omitempty"`
	// SwarmKey (DIR/swarm.key) is the testnet's private network key, passed
	// to every node as --swarm-key; empty: an open testnet (Options.Open).
	SwarmKey string `json:"swarm_key,omitempty"`
	// TrustedPeers (DIR/trusted-peers) lists every node's peer ID, passed
	// to every node as --trusted-peers.
	TrustedPeers string `json:"trusted_peers,omitempty"`
	// ClientKey (DIR/client.key) is the testnet's client key, passed to
	// every node as --client-key: every node authorizes it as its own CLI,
	// so clients of the testnet (--testnet DIR) may use any node.
	ClientKey string `json:"client_key,omitempty"`
	// Clients (DIR/clients) lists client peer IDs besides the testnet's
	// own, passed to every node as --clients; it starts empty and nodes
	// re-read it when it changes.
	Clients string `json:"clients,omitempty"`
	// Record is the invocation record file the services file names
	// (DIR/invocations.jsonl unless the caller's services text names
	// another): every service invocation of every node appends a line to
	// it before running. Empty: the services file names none.
	Record string `json:"record,omitempty"`
	// Netns is set when every node runs in a network namespace of its own
	// (Options.Netns): what Down removes, and what partition, heal and
	// link act on.
	Netns     *Netns    `json:"netns,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Nodes     []Node    `json:"nodes"`
}

// Node is one testnet process.
type Node struct {
	Index   int      `json:"index"`
	PeerID  string   `json:"peer_id"`
	PID     int      `json:"pid"`
	Addrs   []string `json:"addrs"`
	Zone    string   `json:"zone"`
	DataDir string   `json:"data_dir"`
	Listen  string   `json:"listen"`
	Log     string   `json:"log"`
	// Command, when set, starts this node in place of the manifest's
	// Binary (its first word is the program, the rest come before the
	// node's arguments).
	Command []string `json:"command,omitempty"`
	// Services overrides the testnet's services file for this node.
	Services string `json:"services,omitempty"`
	// PublicKey is the node's Ed25519 public key (base64, from node.json).
	PublicKey string `json:"public_key,omitempty"`
	// Record is the invocation record file of the node's own services file
	// when it differs from the manifest's Record.
	Record string `json:"record,omitempty"`
	// Namespace, Addr and Veth are set on a network-namespace testnet: the
	// node's namespace, its address on the testnet's bridge, and the
	// bridge-side end of its veth (in Netns.Bridge).
	Namespace string `json:"namespace,omitempty"`
	Addr      string `json:"addr,omitempty"`
	Veth      string `json:"veth,omitempty"`
	// HTTP is the node's metrics listener, HOST:PORT (bedwe node --http;
	// Prometheus text at MetricsURL): a free loopback port the node picked
	// at its first start, kept across restarts.
	HTTP string `json:"http,omitempty"`
}

// MetricsURL is where the node serves its Prometheus metrics ("" before
// its first start).
func (nd *Node) MetricsURL() string {
	if nd.HTTP == "" {
		return ""
	}
	return "http://" + nd.HTTP + "/metrics"
}

// EventsFile is the name of a node's events file in its data dir: every
// testnet node runs with --events DATA/events.jsonl (package node/events).
const EventsFile = "events.jsonl"

// Events is the path of the node's events file.
func (nd *Node) Events() string { return filepath.Join(nd.DataDir, EventsFile) }

// LoadManifest reads DIR/manifest.json.
func LoadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no testnet in %s (missing %s); start one with `bedwe testnet up --dir %s`", dir, ManifestFile, dir)
		}
		return nil, fmt.Errorf("read testnet manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read testnet manifest %s: %w", path, err)
	}
	return &m, nil
}

// saveMu serialises manifest writes (nodes restart concurrently), and
// nodesMu guards the Node entries Restart updates while other restarts
// read them or save the manifest.
var (
	saveMu  sync.Mutex
	nodesMu sync.Mutex
)

// Save writes the manifest atomically.
func (m *Manifest) Save() error {
	saveMu.Lock()
	defer saveMu.Unlock()
	nodesMu.Lock()
	data, err := json.MarshalIndent(m, "", "  ")
	nodesMu.Unlock()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(m.Dir, ManifestFile), data, 0o644); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// VirtualClock is the testnet's shared timetable clock (the zero clock,
// real time, when it has none).
func (m *Manifest) VirtualClock() (schedule.VirtualClock, error) {
	c, err := schedule.ParseVirtualClock(m.Clock)
	if err != nil {
		return c, fmt.Errorf("testnet manifest: %w", err)
	}
	return c, nil
}

// LoadSchedule reads the testnet's timetable; it fails when the testnet was
// started without one.
func (m *Manifest) LoadSchedule() (*schedule.Schedule, error) {
	if m.Schedule == "" {
		return nil, fmt.Errorf("the testnet in %s has no timetable (start it with `bedwe testnet up --schedule FILE`)", m.Dir)
	}
	return schedule.Load(m.Schedule)
}

// NodeStatus is a node of the manifest with whether its process runs.
type NodeStatus struct {
	Node
	Running bool `json:"running"`
}

// RecordFiles lists the distinct invocation record files of the testnet:
// the manifest's and any node's own.
func (m *Manifest) RecordFiles() []string {
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	add(m.Record)
	for _, nd := range m.Nodes {
		add(nd.Record)
	}
	return out
}

// ClientOptions are the keys a client of the testnet dials with: its swarm
// key and its client key (none for an open testnet).
func (m *Manifest) ClientOptions() (client.Options, error) {
	o, err := client.LoadOptions(m.SwarmKey, m.ClientKey)
	if err != nil {
		return o, fmt.Errorf("testnet %s: %w", m.Dir, err)
	}
	return o, nil
}

// Dial connects a client to a testnet node at a full multiaddr with the
// testnet's keys.
func (m *Manifest) Dial(ctx context.Context, addrs ...string) (*client.Client, error) {
	o, err := m.ClientOptions()
	if err != nil {
		return nil, err
	}
	return client.DialWith(ctx, o, addrs...)
}

// Status reports every node and whether its process is running.
func (m *Manifest) Status() []NodeStatus {
	out := make([]NodeStatus, len(m.Nodes))
	for i := range m.Nodes {
		out[i] = NodeStatus{Node: m.Nodes[i], Running: m.alive(&m.Nodes[i])}
	}
	return out
}
