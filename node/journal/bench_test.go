package journal

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/bedwe/bedwe/internal/cputime"
)

var value4K = bytes.Repeat([]byte{0xab}, 4096)

// BenchmarkPut4KiB measures journal write latency: one 4 KiB value per
// commit, fsynced (the cost a node pays before acking a pack).
func BenchmarkPut4KiB(b *testing.B) {
	j, _ := openTemp(b)
	b.SetBytes(int64(len(value4K)))
	i := 0
	start := cputime.Used()
	for b.Loop() {
		if err := j.Put(BucketPacks, PackKey("wf", fmt.Sprint(i), 0), value4K); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cputime.ReportPerOp(b, start)
}

// BenchmarkPut4KiBNoSync is BenchmarkPut4KiB without fsync, to show what
// the fsync costs.
func BenchmarkPut4KiBNoSync(b *testing.B) {
	j, _ := openTemp(b, WithoutSync())
	b.SetBytes(int64(len(value4K)))
	i := 0
	start := cputime.Used()
	for b.Loop() {
		if err := j.Put(BucketPacks, PackKey("wf", fmt.Sprint(i), 0), value4K); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cputime.ReportPerOp(b, start)
}

// BenchmarkBatch4KiB has 16 goroutines per CPU each writing 4 KiB values
// through Batch, so concurrent writes share commits and fsyncs; ns/op is
// per value.
func BenchmarkBatch4KiB(b *testing.B) { benchConcurrent(b, (*Journal).Batch) }

// benchConcurrent has 16 goroutines per CPU each writing 4 KiB values,
// one per call of write; ns/op is per value.
func benchConcurrent(b *testing.B, write func(j *Journal, fn func(tx *Tx) error) error) {
	j, _ := openTemp(b)
	b.SetBytes(int64(len(value4K)))
	b.SetParallelism(16)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := PackKey("wf", fmt.Sprint(n.Add(1)), 0)
			if err := write(j, func(tx *Tx) error { return tx.Put(BucketPacks, k, value4K) }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkUpdate100x4KiB writes 100 values of 4 KiB in one fsynced
// Update; ns/op is per transaction.
func BenchmarkUpdate100x4KiB(b *testing.B) {
	j, _ := openTemp(b)
	b.SetBytes(100 * int64(len(value4K)))
	i := 0
	for b.Loop() {
		err := j.Update(func(tx *Tx) error {
			for range 100 {
				if err := tx.Put(BucketPacks, PackKey("wf", fmt.Sprint(i), 0), value4K); err != nil {
					return err
				}
				i++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen measures Open of a journal holding 2,000 packs of 4 KiB
// (8 MB), including the full-file consistency check.
func BenchmarkOpen(b *testing.B) {
	path := b.TempDir() + "/journal.db"
	j, err := Open(path, WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	err = j.Update(func(tx *Tx) error {
		for i := range 2000 {
			if err := tx.Put(BucketPacks, PackKey("wf", fmt.Sprint(i), 0), value4K); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	j.Close()
	for b.Loop() {
		j, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		j.Close()
	}
}

// BenchmarkUpdateConcurrent4KiB is BenchmarkBatch4KiB through Update: 16
// goroutines per CPU, each value in an Update of its own; Updates that
// arrive while a commit runs share the next one (group commit), without
// Batch's wait for more writers. ns/op is per value.
func BenchmarkUpdateConcurrent4KiB(b *testing.B) { benchConcurrent(b, (*Journal).Update) }
