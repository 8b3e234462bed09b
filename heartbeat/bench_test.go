package heartbeat

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

const benchSubjects = 10_000

// benchWatcher watches benchSubjects keys on the real clock, with checks so
// rare that the benchmark measures only what it calls.
func benchWatcher(b *testing.B) (*Watcher, []string) {
	b.Helper()
	cfg := quiet(DefaultTestnetConfig())
	cfg.CheckInterval = time.Hour
	w, err := NewWatcher(clockwork.NewRealClock(), cfg, func(Suspicion) {})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Close)
	keys := make([]string, benchSubjects)
	for i := range keys {
		keys[i] = fmt.Sprintf("12D3KooWPeer%04d/wf-%06d/s%d", i%40, i, i%7)
		if err := w.Watch(keys[i]); err != nil {
			b.Fatal(err)
		}
	}
	// Fill every window so Beat runs the ring's steady-state path.
	for range DefaultTestnetConfig().MaxSamples {
		for _, k := range keys {
			w.Beat(k)
		}
	}
	return w, keys
}

// BenchmarkWatcherBeat is the cost of one Beat among 10,000 subjects.
func BenchmarkWatcherBeat(b *testing.B) {
	w, keys := benchWatcher(b)
	i := 0
	for b.Loop() {
		w.Beat(keys[i%len(keys)])
		i++
	}
}

// BenchmarkWatcherBeatParallel is Beat from many stream goroutines at once.
func BenchmarkWatcherBeatParallel(b *testing.B) {
	w, keys := benchWatcher(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			w.Beat(keys[i%len(keys)])
			i += 7
		}
	})
}

// BenchmarkWatcherCheck is the cost of one check tick over 10,000 live
// subjects (nobody overdue): the price of CheckInterval.
func BenchmarkWatcherCheck(b *testing.B) {
	w, _ := benchWatcher(b)
	now := time.Now()
	for b.Loop() {
		w.check(now)
	}
}

// BenchmarkWatcherForgive is the cost of a late tick over 10,000 subjects.
func BenchmarkWatcherForgive(b *testing.B) {
	w, _ := benchWatcher(b)
	now := time.Now()
	for b.Loop() {
		w.forgive(now, time.Second)
	}
}

// BenchmarkDetectorHeartbeat is one detector's share of a Beat.
func BenchmarkDetectorHeartbeat(b *testing.B) {
	d, err := NewDetector(DefaultTestnetConfig())
	if err != nil {
		b.Fatal(err)
	}
	at := time.Now()
	for b.Loop() {
		at = at.Add(250 * time.Millisecond)
		d.Heartbeat(at)
	}
}
