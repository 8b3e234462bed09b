package testnet

import (
	"encoding/json"
	"slices"
	"testing"
)

// Options.NodeFlags reach every node's command line, after the flags the
// testnet sets itself, and survive the manifest's JSON (restarts read it).
func TestNodeFlagsOnEveryCommandLine(t *testing.T) {
	orig := &Manifest{Network: "n", Services: "s.yaml", Announce: "1s", NodeFlags: []string{"--max-concurrent", "4", "--queue", "2"}}
	data, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}
	var m *Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, nd := range []*Node{{Index: 0, DataDir: "/d0", Zone: "z0"}, {Index: 1, DataDir: "/d1", Zone: "z1"}} {
		args := m.args(nd, []string{"/ip4/127.0.0.1/tcp/1/p2p/x"})
		if !slices.Equal(args[len(args)-4:], orig.NodeFlags) {
			t.Errorf("node %d command line %q does not end with %q", nd.Index, args, orig.NodeFlags)
		}
		if args[0] != "node" {
			t.Errorf("node %d command line %q", nd.Index, args)
		}
	}
}
