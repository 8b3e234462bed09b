package member

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

func TestSwarmKeyRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swarm.key")
	if err := WriteSwarmKey(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 || lines[0] != "/key/swarm/psk/1.0.0/" || lines[1] != "/base16/" || len(lines[2]) != 64 {
		t.Fatalf("not kubo's swarm key format:\n%s", data)
	}
	psk, err := ReadSwarmKey(path)
	if err != nil || len(psk) != 32 {
		t.Fatalf("read back: %d bytes, %v", len(psk), err)
	}
	if err := WriteSwarmKey(path); err == nil {
		t.Fatal("an existing swarm key was replaced")
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSwarmKey(path); err == nil || !strings.Contains(err.Error(), "bedwe swarm-key") {
		t.Fatalf("bad key file: %v", err)
	}
}

func TestReadPeerList(t *testing.T) {
	key, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := KeyID(key)
	path := filepath.Join(t.TempDir(), "trusted-peers")
	os.WriteFile(path, []byte("# members\n\n"+id.String()+"  # board a\n"), 0o644)
	ids, err := ReadPeerList(path)
	if err != nil || len(ids) != 1 || !ids[id] {
		t.Fatalf("got %v, %v", ids, err)
	}
	os.WriteFile(path, []byte(id.String()+"\nnot-a-peer\n"), 0o644)
	if _, err := ReadPeerList(path); err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Fatalf("bad line: %v; want FILE:2", err)
	}
}

func TestGateKeepsListWhenFileBreaks(t *testing.T) {
	dir := t.TempDir()
	keyA, _ := LoadOrCreateKey(filepath.Join(dir, "a"))
	keyB, _ := LoadOrCreateKey(filepath.Join(dir, "b"))
	a, _ := KeyID(keyA)
	b, _ := KeyID(keyB)
	path := filepath.Join(dir, "trusted-peers")
	os.WriteFile(path, []byte(a.String()+"\n"), 0o644)
	g, err := NewGate(Policy{TrustedPeersFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if !g.IsMember(a) || g.IsMember(b) || g.Admits(b) {
		t.Fatal("wrong initial membership")
	}
	os.WriteFile(path, []byte(a.String()+"\n"+b.String()+"\n"), 0o644)
	if !g.Refresh() || !g.IsMember(b) {
		t.Fatal("a changed list was not re-read")
	}
	os.WriteFile(path, []byte("garbage garbage\n"), 0o644)
	g.Refresh()
	if !g.IsMember(a) || !g.IsMember(b) {
		t.Fatal("a malformed list replaced the one in force")
	}
}

func TestLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	l := NewLimiter(Rate{PerSecond: 2, Burst: 3}, func() time.Time { return now })
	id := peer.ID("p")
	for i := range 3 {
		if !l.Allow(id) {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	if l.Allow(id) {
		t.Fatal("a request beyond the burst was allowed")
	}
	if !l.Allow(peer.ID("q")) {
		t.Fatal("another peer was limited too")
	}
	now = now.Add(500 * time.Millisecond)
	if !l.Allow(id) || l.Allow(id) {
		t.Fatal("want exactly one token after half a second at 2/s")
	}
}
