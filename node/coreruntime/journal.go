package coreruntime

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/bedwe/bedwe/node/core"
	"github.com/bedwe/bedwe/node/sim"
)

var bucketJournal = []byte("journal")

// journal is the peer's durable record log: one bbolt bucket keyed by the
// big-endian LSN, so a cursor reads records back in append order. A
// commit is one bbolt transaction, which fsyncs before it returns.
type journal struct {
	db *bolt.DB
}

type entry struct {
	lsn  sim.LSN
	data []byte
}

func openJournal(dir string) (*journal, error) {
	path := filepath.Join(dir, "journal.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketJournal)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("create journal bucket in %s: %w", path, err)
	}
	return &journal{db: db}, nil
}

// replay reads the durable records back for Boot: the newest Record of
// each workflow (a register is written whole, so it supersedes older
// ones) and every StartRecord, in LSN order, with the last LSN.
func (j *journal) replay() ([]any, sim.LSN, error) {
	type kept struct {
		lsn sim.LSN
		rec any
	}
	var last sim.LSN
	registers := map[uint64]kept{}
	var out []kept
	err := j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJournal).ForEach(func(k, v []byte) error {
			lsn := sim.LSN(binary.BigEndian.Uint64(k))
			rec, err := decodeRecord(v)
			if err != nil {
				return fmt.Errorf("lsn %d: %w", lsn, err)
			}
			last = lsn
			if r, ok := rec.(core.Record); ok {
				registers[r.Workflow] = kept{lsn, rec}
				return nil
			}
			out = append(out, kept{lsn, rec})
			return nil
		})
	})
	if err != nil {
		return nil, 0, fmt.Errorf("replay journal: %w", err)
	}
	for _, k := range registers {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b kept) int { return cmp.Compare(a.lsn, b.lsn) })
	recs := make([]any, len(out))
	for i, k := range out {
		recs[i] = k.rec
	}
	return recs, last, nil
}

// commit writes a batch in one transaction; it is durable when commit
// returns nil.
func (j *journal) commit(batch []entry) error {
	if len(batch) == 0 {
		return nil
	}
	err := j.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJournal)
		for _, e := range batch {
			// bbolt keeps the key slice until the commit: one per record.
			k := binary.BigEndian.AppendUint64(nil, uint64(e.lsn))
			if err := b.Put(k, e.data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit journal lsn %d-%d: %w", batch[0].lsn, batch[len(batch)-1].lsn, err)
	}
	return nil
}

func (j *journal) close() error {
	if err := j.db.Close(); err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	return nil
}
