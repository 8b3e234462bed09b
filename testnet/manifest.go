package testnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ManifestFile is the name of the manifest inside a testnet directory.
const ManifestFile = "manifest.json"

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
	NoPeerWait string    `json:"no_peer_wait,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	Nodes      []Node    `json:"nodes"`
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
	// Services overrides the testnet's services file for this node.
	Services string `json:"services,omitempty"`
}

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

// saveMu serialises manifest writes (nodes restart concurrently).
var saveMu sync.Mutex

// Save writes the manifest atomically.
func (m *Manifest) Save() error {
	saveMu.Lock()
	defer saveMu.Unlock()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(m.Dir, ".manifest-*")
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return os.Rename(tmp.Name(), filepath.Join(m.Dir, ManifestFile))
}

// NodeStatus is a node of the manifest with whether its process runs.
type NodeStatus struct {
	Node
	Running bool `json:"running"`
}

// Status reports every node and whether its process is running.
func (m *Manifest) Status() []NodeStatus {
	out := make([]NodeStatus, len(m.Nodes))
	for i := range m.Nodes {
		out[i] = NodeStatus{Node: m.Nodes[i], Running: m.alive(&m.Nodes[i])}
	}
	return out
}
