package client

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/member"
)

// Options are the keys a client dials with.
type Options struct {
	// SwarmKey is the private network's key (nil: a public network).
	SwarmKey pnet.PSK
	// SwarmKeyFile names it in error messages.
	SwarmKeyFile string
	// Identity is the client key (nil: a throw-away identity, which a node
	// with membership or a clients list refuses).
	Identity crypto.PrivKey
	// IdentityFile names it in error messages.
	IdentityFile string
}

// LoadOptions reads a swarm key file and a client key file; either path may
// be empty.
func LoadOptions(swarmKeyFile, clientKeyFile string) (Options, error) {
	var o Options
	if swarmKeyFile != "" {
		psk, err := member.ReadSwarmKey(swarmKeyFile)
		if err != nil {
			return o, err
		}
		o.SwarmKey, o.SwarmKeyFile = psk, swarmKeyFile
	}
	if clientKeyFile != "" {
		key, err := member.ReadKey(clientKeyFile)
		if err != nil {
			return o, fmt.Errorf("client key: %w", err)
		}
		o.Identity, o.IdentityFile = key, clientKeyFile
	}
	return o, nil
}

// NodeOptions are the keys of a local node, from its node.json: its swarm
// key and its own CLI's client key (skipped when this user cannot read it,
// e.g. a node running as another user).
func NodeOptions(nf api.NodeFile) (Options, error) {
	o, err := LoadOptions(nf.SwarmKey, "")
	if err != nil {
		return o, err
	}
	if nf.ClientKey != "" {
		key, err := member.ReadKey(nf.ClientKey)
		switch {
		case err == nil:
			o.Identity, o.IdentityFile = key, nf.ClientKey
		case errors.Is(err, fs.ErrPermission):
		default:
			return o, fmt.Errorf("client key of the node: %w", err)
		}
	}
	return o, nil
}

// Or fills o's unset keys from d.
func (o Options) Or(d Options) Options {
	if o.SwarmKey == nil {
		o.SwarmKey, o.SwarmKeyFile = d.SwarmKey, d.SwarmKeyFile
	}
	if o.Identity == nil {
		o.Identity, o.IdentityFile = d.Identity, d.IdentityFile
	}
	return o
}

func (o Options) newHost() (host.Host, error) {
	opts := []libp2p.Option{libp2p.NoListenAddrs}
	if o.SwarmKey != nil {
		opts = append(opts, libp2p.PrivateNetwork(o.SwarmKey))
	}
	if o.Identity != nil {
		opts = append(opts, libp2p.Identity(o.Identity))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("start client host: %w", err)
	}
	return h, nil
}

// connectError explains a failed dial in one line, saying which key is the
// likely cause: a private network's handshake fails (or hangs) when the
// keys differ, and a node with membership closes the connection of an
// unlisted client right after the security handshake (admitted says the
// handshake went through).
func connectError(target, self peer.ID, o Options, admitted bool, err error) error {
	msg := oneLine(err.Error())
	var hint string
	switch {
	case admitted:
		hint = fmt.Sprintf(": the node closed the connection after the handshake: client %s is not authorized: add it to --clients on the node (or dial with a listed key: --client-key FILE)", self)
	case strings.Contains(msg, "security") && o.SwarmKey == nil:
		hint = " (is the mesh private? pass its swarm key with --swarm-key FILE)"
	case strings.Contains(msg, "security"):
		hint = fmt.Sprintf(" (does the node use the swarm key %s? a node on another or no private network looks like this; check --swarm-key)", o.SwarmKeyFile)
	}
	return fmt.Errorf("connect to peer %s: %s%s", target, msg, hint)
}

// oneLine joins a multi-line libp2p dial error into one line.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n  * ", "; ")
	return strings.Join(strings.Fields(s), " ")
}
