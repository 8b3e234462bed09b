package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// TestMeasureRetention measures what docs/operations.md quotes: journal size
// and restart time with a week of finished workflows, without and with the
// retention. It runs only with BEDWE_MEASURE_RETENTION=N (N finished
// workflow records, e.g. 50000) and prints the figures.
func TestMeasureRetention(t *testing.T) {
	var total int
	if _, err := fmt.Sscan(os.Getenv("BEDWE_MEASURE_RETENTION"), &total); err != nil || total <= 0 {
		t.Skip("set BEDWE_MEASURE_RETENTION=N to measure the retention on N workflow records")
	}
	dir := t.TempDir()
	jpath := filepath.Join(dir, "data", "journal.db")
	j, err := journal.Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	// Records shaped like the soak's: a 6-step workflow with echo
	// outputs and its trace, finished over the last week.
	now := time.Now().UTC()
	rec := func(i int) origin.Record {
		st := api.Status{ID: fmt.Sprintf("wf-%016x", i), State: api.StateSucceeded, StepsDone: 6, StepsTotal: 6, Origin: "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD",
			Submitted: now.Add(-time.Duration(float64(i) / float64(total) * float64(7*24*time.Hour))), Result: map[string]json.RawMessage{}}
		st.Finished = st.Submitted.Add(3 * time.Second)
		for s := range 6 {
			st.Result[fmt.Sprintf("sleep%d", s)] = json.RawMessage(`{"slept_ms":500,"by":"12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD"}`)
			st.Trace = append(st.Trace, pack.TraceEntry{Path: fmt.Sprint(s), Service: fmt.Sprintf("sleep%d", s), Peer: "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD", Zone: "z1", Start: st.Submitted, End: st.Finished, Outcome: pack.OutcomeOK})
		}
		st.Origins = []string{"/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD"}
		return origin.Record{Status: st, Source: "sleep0 FORK(sleep1 sleep2, sleep3 sleep4) SYNC sleep5"}
	}
	for lo := 0; lo < total; lo += 1000 {
		err := j.Update(func(tx *journal.Tx) error {
			for i := lo; i < min(lo+1000, total); i++ {
				r := rec(i)
				if err := tx.Put(journal.BucketWorkflows, r.Status.ID, rpc.MustCBOR(&r)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		info, err := os.Stat(jpath)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	one := rec(0)
	t.Logf("%d finished workflow records, %d bytes each: journal %.1f MiB", total, len(rpc.MustCBOR(&one)), float64(size())/(1<<20))

	start := func() (*Node, func(), time.Duration) { return runInternalNode(t, dir, "") }
	n, stop, took := start()
	t.Logf("restart with every record: %s (records loaded: %d)", took.Round(time.Millisecond), len(n.origins.all()))
	began := time.Now()
	pc := n.prune(context.Background(), now)
	t.Logf("retention 24h: %+v in %s", pc, time.Since(began).Round(time.Millisecond))
	for _, w := range n.origins.all() {
		if w.Pruned() {
			tomb := w.Record()
			t.Logf("a tombstone is %d bytes", len(rpc.MustCBOR(&tomb)))
			break
		}
	}
	stop()
	t.Logf("journal after the retention, before compaction: %.1f MiB", float64(size())/(1<<20))
	if keep := os.Getenv("BEDWE_MEASURE_KEEP"); keep != "" {
		data, _ := os.ReadFile(jpath)
		_ = os.WriteFile(keep, data, 0o600)
	}
	n, stop, took = start()
	t.Logf("restart (compacts first): %s, journal %.1f MiB, records %d", took.Round(time.Millisecond), float64(size())/(1<<20), len(n.origins.all()))
	stop()
}
