package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Floor is what one hop cannot go below on this machine, measured in the
// same run as the hops it bounds (issue 14's target is a hop gap of at
// most three floors): a 4 KiB write and fsync on the file system the
// nodes journal to, and a libp2p stream round trip to a node on an open
// connection.
type Floor struct {
	// Fsync4K is the median of FloorSamples 4 KiB write+fsync calls.
	Fsync4K time.Duration
	// StreamRTT is the median of FloorSamples ping round trips.
	StreamRTT time.Duration
}

// FloorSamples is how many of each a floor measurement takes.
const FloorSamples = 50

// Hop is one fsync plus one stream round trip.
func (f Floor) Hop() time.Duration { return f.Fsync4K + f.StreamRTT }

// MeasureFloor measures the floor beside the testnet: fsyncs in its
// directory, pings to node 0.
func (r *Runner) MeasureFloor(ctx context.Context) (Floor, error) {
	var f Floor
	path := filepath.Join(r.Net.Dir, "bench-floor.tmp")
	file, err := os.Create(path)
	if err != nil {
		return f, fmt.Errorf("floor: %w", err)
	}
	defer os.Remove(path)
	defer file.Close()
	block := make([]byte, 4096)
	var syncs, rtts []time.Duration
	for i := range FloorSamples {
		start := time.Now()
		if _, err := file.WriteAt(block, int64(i%16)*4096); err != nil {
			return f, fmt.Errorf("floor: %w", err)
		}
		if err := file.Sync(); err != nil {
			return f, fmt.Errorf("floor: %w", err)
		}
		syncs = append(syncs, time.Since(start))
	}
	for range FloorSamples {
		rtt, err := r.cl.Ping(ctx)
		if err != nil {
			return f, fmt.Errorf("floor: %w", err)
		}
		rtts = append(rtts, rtt)
	}
	f.Fsync4K, f.StreamRTT = Quantile(syncs, 0.5), Quantile(rtts, 0.5)
	return f, nil
}
