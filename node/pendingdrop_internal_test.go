package node

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/bedwe/bedwe/node/guard"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// TestDropPendingCopyDeletesOnlyThatAttempt checks the write that ends a
// pending guard copy (G17) with the next commit: it deletes the outbox
// entry only when it is the copy of the attempt that ended; a copy of a
// later attempt stored since, an entry it cannot read and an absent one
// are left alone.
func TestDropPendingCopyDeletesOnlyThatAttempt(t *testing.T) {
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	copyOf := func(attempt int) []byte {
		return rpc.MustCBOR(guard.Record{Key: "wf/1", Pack: bytes.Repeat([]byte{'p'}, 8<<10), Holder: pack.Peer{ID: "h"}, Attempt: attempt})
	}
	put := func(key string, v []byte) {
		t.Helper()
		if err := j.Put(journal.BucketOutbox, key, v); err != nil {
			t.Fatal(err)
		}
	}
	drop := func(key string, attempt int) {
		t.Helper()
		if err := j.Update(func(tx *journal.Tx) error { return dropPendingCopy(tx, key, attempt) }); err != nil {
			t.Fatalf("dropPendingCopy(%s, %d): %v", key, attempt, err)
		}
	}
	present := func(key string) bool {
		t.Helper()
		_, ok, err := j.Get(journal.BucketOutbox, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	put("same", copyOf(2))
	drop("same", 2)
	if present("same") {
		t.Error("the pending copy of the attempt that ended is still journaled")
	}
	put("later", copyOf(3))
	drop("later", 2)
	if !present("later") {
		t.Error("a copy of a later attempt was deleted with the end of an earlier one")
	}
	put("garbage", []byte{0xff, 0x00})
	drop("garbage", 2)
	if !present("garbage") {
		t.Error("an entry that is not a guard copy was deleted")
	}
	drop("absent", 2)
}
