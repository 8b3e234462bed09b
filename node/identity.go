package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// loadIdentity reads the node's private key from dir/identity.key, creating
// an Ed25519 key on first start so the peer ID survives restarts.
func loadIdentity(dir string) (crypto.PrivKey, error) {
	path := filepath.Join(dir, "identity.key")
	raw, err := os.ReadFile(path)
	if err == nil {
		key, err := crypto.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, fmt.Errorf("read identity %s: %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read identity: %w", err)
	}
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, fmt.Errorf("generate identity: %w", err)
	}
	raw, err = crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode identity: %w", err)
	}
	if err := atomicfile.Write(path, raw, 0o600); err != nil {
		return nil, fmt.Errorf("save identity: %w", err)
	}
	return key, nil
}

// InitIdentity makes sure dir holds the node's identity key, creating dir
// (mode 0700) and an Ed25519 key when missing, as the node's first start
// would; an existing key is kept, so the peer ID never changes. It returns
// the raw public key (what other nodes trust to accept timetables this node
// signs), the peer ID, and whether the key was created now.
func InitIdentity(dir string) (pub []byte, id string, created bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", false, fmt.Errorf("create data directory: %w", err)
	}
	_, statErr := os.Stat(filepath.Join(dir, "identity.key"))
	if _, err := loadIdentity(dir); err != nil {
		return nil, "", false, err
	}
	pub, id, err = ReadPublicKey(dir)
	if err != nil {
		return nil, "", false, err
	}
	return pub, id, errors.Is(statErr, fs.ErrNotExist), nil
}
