package journal

import (
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Compaction: bbolt reuses the pages of deleted records but never gives
// them back to the file system, so a journal that once held a long history
// keeps its size after the retention deleted it. CompactIfSparse copies
// the live records into a new file and renames it over the old one when
// enough of the file is free.

// CompactMinSize is the smallest journal CompactIfSparse looks at: below
// it the free pages are not worth a rewrite of an SD card.
const CompactMinSize = 4 << 20

// CompactFreeRatio is the share of the file not used by live records
// (free pages, and the unused part of half-empty pages) above which
// CompactIfSparse rewrites the file.
const CompactFreeRatio = 0.5

// CompactResult says what CompactIfSparse did.
type CompactResult struct {
	// Before and After are the file sizes in bytes (equal when nothing
	// was done); Free is the share of the file live records did not use.
	Before, After int64
	Free          float64
	Compacted     bool
}

// CompactIfSparse rewrites the journal at path, which must not be open,
// into a new file holding only its live records when more than
// CompactFreeRatio of its pages is not used by live records and the
// rewrite would give back at least CompactMinSize. The new file
// is written beside the old one, synced and renamed over it, so a power cut
// at any moment leaves either the old journal or the new one. A missing
// file is not an error.
func CompactIfSparse(path string) (CompactResult, error) {
	info, err := os.Stat(path)
	if os.IsNotExist(err) {
		return CompactResult{}, nil
	}
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact journal: %w", err)
	}
	res := CompactResult{Before: info.Size(), After: info.Size()}
	if info.Size() < CompactMinSize {
		return res, nil
	}
	src, err := openBolt(path, config{lockTimeout: DefaultLockTimeout})
	if err != nil {
		return res, err
	}
	// Deleted and shrunk records leave free pages and half-empty leaves
	// (bbolt merges a leaf only below a quarter full): what counts is how
	// much of the file live records use.
	var inuse, used int64
	err = src.View(func(tx *bolt.Tx) error {
		used = tx.Size() // the pages ever allocated (the file may be larger)
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			st := b.Stats()
			inuse += int64(st.BranchInuse + st.LeafInuse + st.InlineBucketInuse)
			return nil
		})
	})
	if err != nil {
		src.Close()
		return res, fmt.Errorf("compact journal %s: %w", path, err)
	}
	res.Free = 1 - float64(inuse)/float64(max(used, 1))
	if res.Free <= CompactFreeRatio || info.Size()-inuse < CompactMinSize {
		return res, src.Close()
	}
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, nil)
	if err != nil {
		src.Close()
		return res, fmt.Errorf("compact journal %s: %w", path, err)
	}
	err = bolt.Compact(dst, src, 16<<20)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if serr := src.Close(); err == nil {
		err = serr
	}
	if err == nil {
		err = syncFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return res, fmt.Errorf("compact journal %s: %w", path, err)
	}
	if info, err := os.Stat(path); err == nil {
		res.After = info.Size()
	}
	res.Compacted = true
	return res, nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
