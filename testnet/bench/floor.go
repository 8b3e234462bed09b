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
	// A ping now and then is reset on a loaded machine (the resource
	// manager); the floor is a median, so failed ones are left out, and a
	// floor without any is reported as unknown (0), never as an error.
	for tries := 0; len(rtts) < FloorSamples && tries < 2*FloorSamples; tries++ {
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
		if rtt, err := r.cl.Ping(ctx); err == nil {
			rtts = append(rtts, rtt)
		}
	}
	f.Fsync4K = Quantile(syncs, 0.5)
	if len(rtts) > 0 {
		f.StreamRTT = Quantile(rtts, 0.5)
	}
	return f, nil
}
