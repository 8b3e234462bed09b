package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bedwe/bedwe/node/journal"
)

// Floor is what one hop cannot go below on this machine, measured in the
// same run as the hops it bounds (the target is a hop gap of at most
// three floors, docs/benchmarks.md): a 4 KiB write and fsync on the file
// system the nodes journal to, and a libp2p stream round trip to a node on
// an open connection.
type Floor struct {
	// Fsync4K is the median of FloorSamples 4 KiB write+fsync calls.
	Fsync4K time.Duration
	// StreamRTT is the median of FloorSamples ping round trips.
	StreamRTT time.Duration
	// Commit4K is the median of FloorSamples journal commits of one
	// 4 KiB value (bbolt: the pages, then the meta page, each fsynced),
	// the durable write a hop actually makes.
	Commit4K time.Duration
}

// FloorSamples is how many of each a floor measurement takes.
const FloorSamples = 50

// Hop is one fsync plus one stream round trip.
func (f Floor) Hop() time.Duration { return f.Fsync4K + f.StreamRTT }

// HandOver is a hop's critical path at its floor, from the end of one
// step to the start of the next on another peer: the hand-off's one way
// (half a round trip), then three journal commits one after the other —
// the receiver's; the backup's copy with its release of the step before
// (the ride, a round trip); the other guardian's release (a round trip).
// The receiver's copy is durable before the ride releases anything, and
// the ride is answered before any other guardian is released (node I3,
// settleRiding); the step starts once the settle ended, while the ack
// travels back. No gap between steps on two different nodes can be
// shorter while the reliability core keeps that order
// (docs/benchmarks.md). It is three commits, not two, because the
// backup's copy rides the release of the step before rather than being
// written beside the receiver's.
func (f Floor) HandOver() time.Duration { return 3*f.Commit4K + 2*f.StreamRTT + f.StreamRTT/2 }

// MeasureFloor measures the floor beside the testnet: fsyncs and journal
// commits in its directory, pings to node 0.
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
	commits, err := measureCommits(r.Net.Dir, FloorSamples)
	if err != nil {
		return f, fmt.Errorf("floor: %w", err)
	}
	f.Fsync4K = Quantile(syncs, 0.5)
	f.Commit4K = Quantile(commits, 0.5)
	if len(rtts) > 0 {
		f.StreamRTT = Quantile(rtts, 0.5)
	}
	return f, nil
}

// measureCommits times n journal commits of one 4 KiB value each, in a
// journal of its own in dir that it removes.
func measureCommits(dir string, n int) ([]time.Duration, error) {
	path := filepath.Join(dir, "bench-floor-journal.db")
	j, err := journal.Open(path)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	defer j.Close()
	block := make([]byte, 4096)
	out := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		if err := j.Put(journal.BucketMeta, "bench-floor-"+strconv.Itoa(i%16), block); err != nil {
			return nil, fmt.Errorf("journal commit: %w", err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}
