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
