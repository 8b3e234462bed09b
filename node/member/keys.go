package member

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"

	"github.com/bedwe/bedwe/internal/atomicfile"
)

// SwarmKeyHeader starts every swarm key file: kubo's and IPFS Cluster's
// format (/key/swarm/psk/1.0.0/, an encoding line, the key).
const SwarmKeyHeader = "/key/swarm/psk/1.0.0/\n/base16/\n"

// NewSwarmKey returns a fresh 32-byte pre-shared key encoded as a swarm key
// file.
func NewSwarmKey() ([]byte, error) {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		return nil, fmt.Errorf("generate swarm key: %w", err)
	}
	return []byte(SwarmKeyHeader + hex.EncodeToString(k[:]) + "\n"), nil
}

// WriteSwarmKey writes a fresh swarm key to path (mode 0600). It refuses to
// replace an existing file: a mesh whose key changes on one board splits.
func WriteSwarmKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("swarm key %s already exists: remove it first to replace the mesh's key (every board then needs the new one)", path)
	}
	data, err := NewSwarmKey()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("write swarm key: %w", err)
	}
	return nil
}

// ReadSwarmKey reads a swarm key file (base16, base64 or bin encoding).
func ReadSwarmKey(path string) (pnet.PSK, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read swarm key: %w", err)
	}
	psk, err := pnet.DecodeV1PSK(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("swarm key %s: %w (generate one with `bedwe swarm-key -o FILE`)", path, err)
	}
	if len(psk) != 32 {
		return nil, fmt.Errorf("swarm key %s: %d bytes, want 32", path, len(psk))
	}
	return psk, nil
}

// LoadOrCreateKey reads a libp2p private key file (the format of a node's
// DATA/identity.key) or, when path does not exist, creates an Ed25519 key
// there (mode 0600). Node identities and client keys use it.
func LoadOrCreateKey(path string) (crypto.PrivKey, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		key, err := crypto.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read key: %w", err)
	}
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	raw, err = crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	if err := atomicfile.Write(path, raw, 0o600); err != nil {
		return nil, fmt.Errorf("save key: %w", err)
	}
	return key, nil
}

// ReadKey reads a libp2p private key file written by LoadOrCreateKey.
func ReadKey(path string) (crypto.PrivKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	key, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", path, err)
	}
	return key, nil
}

// KeyID is the peer ID of a private key.
func KeyID(key crypto.PrivKey) (peer.ID, error) {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("peer ID of key: %w", err)
	}
	return id, nil
}
