package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
	if err := writeFileAtomic(path, raw, 0o600); err != nil {
		return nil, fmt.Errorf("save identity: %w", err)
	}
	return key, nil
}

// writeFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path, so readers never see a partial file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
