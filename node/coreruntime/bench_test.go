package coreruntime

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/bedwe/bedwe/node/sim"
)

// BenchmarkSequence runs, per iteration, a workflow of 200 steps that take
// no time on five real loopback hosts in three zones, and reports the hop
// gap (from one step's start to the next one's, median) beside the floor
// the one-round hand-over aims at: one journal commit (a bbolt transaction
// with fsync) plus one round trip between two hosts.
func BenchmarkSequence(b *testing.B) {
	var mu sync.Mutex
	started := map[uint64]map[int]time.Time{}
	m := newMesh(b, 5, 3, 1, func(x sim.Execution) {
		mu.Lock()
		defer mu.Unlock()
		if started[x.Workflow] == nil {
			started[x.Workflow] = map[int]time.Time{}
		}
		if _, ok := started[x.Workflow][x.Pos]; !ok {
			started[x.Workflow][x.Pos] = time.Now()
		}
	})
	const steps = 200
	var gaps []time.Duration
	b.ResetTimer()
	for i := range b.N {
		w := workflow(uint64(i+1), steps, 0)
		m.rts[i%len(m.rts)].Submit(w)
		m.await(b, []uint64{w.ID}, 2*time.Minute)
		mu.Lock()
		s := started[w.ID<<16]
		for p := 1; p < steps; p++ {
			gaps = append(gaps, s[p].Sub(s[p-1]))
		}
		mu.Unlock()
	}
	b.StopTimer()
	slices.Sort(gaps)
	hop := gaps[len(gaps)/2]
	commit := journalCommit(b)
	rtt := roundTrip(b, m)
	b.ReportMetric(float64(hop.Microseconds())/1000, "hop-ms")
	b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds())/1000, "hop-p99-ms")
	b.ReportMetric(float64(commit.Microseconds())/1000, "commit-ms")
	b.ReportMetric(float64(rtt.Microseconds())/1000, "rtt-ms")
	b.ReportMetric(float64(hop)/float64(commit+rtt), "hop/(commit+rtt)")
}

// journalCommit is the median time of a commit of one 4 KiB record.
func journalCommit(b *testing.B) time.Duration {
	j, err := openJournal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer j.close()
	var ds []time.Duration
	for i := range 50 {
		start := time.Now()
		if err := j.commit([]entry{{lsn: sim.LSN(i + 1), data: make([]byte, 4096)}}); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// roundTrip is the median libp2p ping between two of the mesh's hosts.
func roundTrip(b *testing.B, m *mesh) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	results := ping.Ping(ctx, m.hosts[0], m.hosts[1].ID())
	var ds []time.Duration
	for range 20 {
		r := <-results
		if r.Error != nil {
			b.Fatal(r.Error)
		}
		ds = append(ds, r.RTT)
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
