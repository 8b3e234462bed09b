// Package member decides who belongs to a bedwe mesh: the swarm key of a
// private libp2p network, the trusted-peers list enforced at the transport
// by a connection gater, the clients allowed to submit and read results,
// and per-peer rate limits.
//
// Three rings, from the outside in:
//
//   - the swarm key (libp2p pnet): a host without the mesh's 32-byte key
//     cannot complete a connection at all; nothing of it reaches the gater;
//   - the gater (Gate): with a trusted-peers file, a connection whose
//     authenticated peer ID is neither a member nor an authorized client is
//     closed right after the security handshake and remembered as refused;
//   - the protocols: members speak every protocol; an authorized client
//     only the client protocol (the node enforces it per stream).
//
// With no trusted-peers file the mesh is open (membership is opt-in):
// every peer that holds the swarm key, or any peer without one, is a member.
// With no trusted-peers and no clients file every client is authorized.
//
// Files are re-read when their modification time or size changes (Refresh);
// an unreadable or malformed file keeps the previous list in force.
package member

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/bedwe/bedwe/node/api"
)

// Policy configures a Gate.
type Policy struct {
	// Self is the node's own peer ID: always a member.
	Self peer.ID
	// TrustedPeersFile lists the members, one peer ID per line; empty means
	// an open mesh.
	TrustedPeersFile string
	// ClientsFile lists client peer IDs allowed to submit, cancel and read
	// results besides the members; empty means none besides Clients (or
	// everyone, when TrustedPeersFile is empty too).
	ClientsFile string
	// Clients are always authorized as clients: the key of the node's own
	// CLI (DATA/client.key).
	Clients []peer.ID
	// Logger receives refusals at debug level and file errors at warn.
	Logger *slog.Logger
}

// maxRefused bounds the refusals a Gate remembers; refusalMemory is how
// long one is shown.
const (
	maxRefused    = 128
	refusalMemory = time.Hour
)

// Gate is the node's membership policy and its libp2p connection gater.
// It is safe for concurrent use.
type Gate struct {
	pol Policy
	log *slog.Logger

	mu      sync.Mutex // guards the lists and refused
	trusted *listFile  // nil: open mesh
	clients *listFile  // nil: no clients file
	refused map[peer.ID]*api.RefusedPeer
}

// NewGate reads the policy's files; a missing or malformed file is an error
// (the node refuses to start rather than run open by mistake).
func NewGate(pol Policy) (*Gate, error) {
	g := &Gate{pol: pol, log: pol.Logger, refused: map[peer.ID]*api.RefusedPeer{}}
	if g.log == nil {
		g.log = slog.Default()
	}
	if pol.TrustedPeersFile != "" {
		g.trusted = &listFile{path: pol.TrustedPeersFile}
		if _, err := g.trusted.load(); err != nil {
			return nil, fmt.Errorf("trusted peers: %w", err)
		}
	}
	if pol.ClientsFile != "" {
		g.clients = &listFile{path: pol.ClientsFile}
		if _, err := g.clients.load(); err != nil {
			return nil, fmt.Errorf("clients: %w", err)
		}
	}
	return g, nil
}

// Refresh re-reads the files that changed and reports whether a list
// changed. A file that became unreadable or malformed keeps its previous
// list (and is logged).
func (g *Gate) Refresh() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	changed := false
	for _, l := range []*listFile{g.trusted, g.clients} {
		if l == nil {
			continue
		}
		ok, err := l.load()
		if err != nil {
			g.log.Warn("membership list not re-read; the previous one stays in force", "err", err)
		}
		changed = changed || ok
	}
	return changed
}

// Closed reports whether membership is enforced (a trusted-peers file).
func (g *Gate) Closed() bool { return g.trusted != nil }

// ClientsRestricted reports whether client requests need authorization.
func (g *Gate) ClientsRestricted() bool { return g.trusted != nil || g.clients != nil }

// IsMember reports whether id may speak the mesh's own protocols (hand-offs,
// guards, heartbeats, gossip).
func (g *Gate) IsMember(id peer.ID) bool {
	if g.trusted == nil || id == g.pol.Self {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.trusted.ids[id]
}

// IsClient reports whether id may submit, cancel, list and read results.
func (g *Gate) IsClient(id peer.ID) bool {
	if !g.ClientsRestricted() || id == g.pol.Self || slices.Contains(g.pol.Clients, id) {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.trusted != nil && g.trusted.ids[id] {
		return true
	}
	return g.clients != nil && g.clients.ids[id]
}

// Admits reports whether a connection with id may stay open: a member or an
// authorized client.
func (g *Gate) Admits(id peer.ID) bool {
	if g.trusted == nil {
		return true
	}
	return g.IsMember(id) || g.IsClient(id)
}

// Refuse remembers that id was refused (shown by `bedwe peers --refused`).
func (g *Gate) Refuse(id peer.ID, addr, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.refused[id]
	if !ok {
		if len(g.refused) >= maxRefused {
			g.dropOldest()
		}
		r = &api.RefusedPeer{ID: id.String()}
		g.refused[id] = r
		g.log.Info("refused a peer", "peer", id.String(), "addr", addr, "reason", reason)
	}
	r.Count++
	r.Last = time.Now().UTC()
	r.Reason = reason
	if addr != "" {
		r.Addr = addr
	}
}

func (g *Gate) dropOldest() {
	var oldest peer.ID
	var at time.Time
	for id, r := range g.refused {
		if oldest == "" || r.Last.Before(at) {
			oldest, at = id, r.Last
		}
	}
	delete(g.refused, oldest)
}

// Refused lists the peers refused within the last hour, newest first.
func (g *Gate) Refused() []api.RefusedPeer {
	g.mu.Lock()
	defer g.mu.Unlock()
	cut := time.Now().Add(-refusalMemory)
	var out []api.RefusedPeer
	for id, r := range g.refused {
		if r.Last.Before(cut) {
			delete(g.refused, id)
			continue
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b api.RefusedPeer) int { return b.Last.Compare(a.Last) })
	return out
}

var _ connmgr.ConnectionGater = (*Gate)(nil)

// InterceptPeerDial refuses to dial peers that are not admitted.
func (g *Gate) InterceptPeerDial(id peer.ID) bool { return g.Admits(id) }

// InterceptAddrDial allows every address.
func (g *Gate) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }

// InterceptAccept allows every inbound connection until its peer is known.
func (g *Gate) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptSecured closes a connection whose authenticated peer is neither a
// member nor an authorized client, and remembers the refusal.
func (g *Gate) InterceptSecured(dir network.Direction, id peer.ID, cm network.ConnMultiaddrs) bool {
	if g.Admits(id) {
		return true
	}
	addr := ""
	if cm != nil && cm.RemoteMultiaddr() != nil {
		addr = cm.RemoteMultiaddr().String()
	}
	g.Refuse(id, addr, "not in --trusted-peers or --clients")
	return false
}

// InterceptUpgraded allows every connection that got this far.
func (g *Gate) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }
