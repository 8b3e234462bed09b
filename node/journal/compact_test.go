package journal

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestCompactIfSparse fills a journal, deletes most of it (as the
// retention does), and checks that compaction gives the space back and
// keeps every live record; a dense journal is left alone.
func TestCompactIfSparse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(path, WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 1500)
	const n = 6000
	err = j.Update(func(tx *Tx) error {
		for i := range n {
			if err := tx.Put(BucketWorkflows, fmt.Sprintf("wf-%05d", i), value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// Dense: nothing to do.
	res, err := CompactIfSparse(path)
	if err != nil {
		t.Fatal(err)
	}
	if res.Compacted || res.Before < CompactMinSize {
		t.Fatalf("dense journal: %+v, want a journal over %d bytes left alone", res, CompactMinSize)
	}
	j, err = Open(path, WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	err = j.Update(func(tx *Tx) error {
		for i := range n {
			if i%10 == 0 {
				continue
			}
			if err := tx.Delete(BucketWorkflows, fmt.Sprintf("wf-%05d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	res, err = CompactIfSparse(path)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Compacted || res.After >= res.Before/3 {
		t.Fatalf("sparse journal: %+v, want it compacted to under a third", res)
	}
	j, err = Open(path)
	if err != nil {
		t.Fatalf("compacted journal does not open: %v", err)
	}
	defer j.Close()
	count, err := j.Count(BucketWorkflows)
	if err != nil {
		t.Fatal(err)
	}
	if count != n/10 {
		t.Fatalf("%d records after compaction, want %d", count, n/10)
	}
	if _, ok, _ := j.Get(BucketWorkflows, "wf-00010"); !ok {
		t.Fatal("a live record was lost")
	}
}
