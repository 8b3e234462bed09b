package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/events"
)

// floodSize is the size of TestFlood: BEDWE_FLOOD=full runs the full
// flood (16 nodes, 8 clients, 2,000 workflows); the default is small
// enough for CI on a 2-core machine.
func floodSize() (nodes, clients, workflows int) {
	if os.Getenv("BEDWE_FLOOD") == "full" {
		return 16, 8, 2000
	}
	return 6, 4, 200
}

// floodInflight is how many submissions each client keeps going at once.
const floodInflight = 4

// floodLimits are the limits of every flood node: small, so the flood hits
// them (fb is max_concurrent of service fb). BEDWE_FLOOD_LIMITS=off lifts
// them (as good as no bulkheads), for a comparison.
func floodLimits() (maxConcurrent, queue, maxWorkflows, fb int) {
	if os.Getenv("BEDWE_FLOOD_LIMITS") == "off" {
		return 1 << 20, 1 << 20, 1 << 20, 1 << 16
	}
	return 4, 4, 8, 2
}

// TestFlood floods a mesh of real nodes (real libp2p hosts on loopback)
// with two-step workflows from concurrent clients, each submitting as fast
// as it can (floodInflight at once) to its own node and submitting again
// after a busy refusal. It
// checks that every submission was accepted (and then succeeded) or
// refused as busy, that none was lost, and, from the service's own count,
// that no node ever ran more steps at once than its limits allow. It logs
// throughput, latency percentiles and the refusals (figures, not
// assertions; docs/benchmarks.md keeps them).
//
//	go test ./node -run TestFlood -v                    # 6 nodes, 4 clients, 200 workflows
//	BEDWE_FLOOD=full go test ./node -run TestFlood -v -timeout 30m
//	BEDWE_FLOOD=full BEDWE_FLOOD_LIMITS=off go test ./node -run TestFlood -v -timeout 30m   # limits lifted
//	BEDWE_FLOOD_STEP=200ms go test ./node -run TestFlood -v    # slower services (default 10ms)
func TestFlood(t *testing.T) {
	nNodes, nClients, nWorkflows := floodSize()
	floodMaxConcurrent, floodQueue, floodMaxWorkflows, floodFbLimit := floodLimits()
	step := 10 * time.Millisecond
	if v := os.Getenv("BEDWE_FLOOD_STEP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("BEDWE_FLOOD_STEP=%q: want a duration like 200ms", v)
		}
		step = d
	}
	svc := newCountingService(t, step)
	dir := t.TempDir()
	evFile := filepath.Join(dir, "events.jsonl")
	services := fmt.Sprintf("version: 1\nservices:\n  fa: {kind: http, url: %q}\n  fb: {kind: http, url: %q, max_concurrent: %d}\n", svc.url, svc.url, floodFbLimit)
	network := "flood-" + filepath.Base(dir)
	var nodes []api.NodeFile
	for i := range nNodes {
		cfg := capacityConfig(t, node.TestnetConfig(), services, floodMaxConcurrent, floodQueue, floodMaxWorkflows)
		cfg.Network, cfg.Zone, cfg.EventsFile = network, fmt.Sprintf("z%d", i%4), evFile
		if i > 0 {
			cfg.Bootstrap = nodes[0].Addrs
		}
		nf, _ := runNode(t, cfg)
		nodes = append(nodes, nf)
	}
	for _, nf := range nodes {
		waitPeers(t, nf, nNodes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	type accepted struct {
		id      string
		node    int
		firstAt time.Time // the first submission attempt (refusals included)
	}
	var (
		mu        sync.Mutex
		taken     []accepted
		refusedAt int // submissions refused as busy
		wg        sync.WaitGroup
	)
	began := time.Now()
	for c := range nClients {
		share := nWorkflows / nClients
		if c < nWorkflows%nClients {
			share++
		}
		target := c % nNodes
		cl, err := client.Dial(ctx, nodes[target].Addrs...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		jobs := make(chan struct{}, share)
		for range share {
			jobs <- struct{}{}
		}
		close(jobs)
		// Each client keeps floodInflight submissions going at once.
		for range floodInflight {
			wg.Go(func() {
				for range jobs {
					first := time.Now()
					for {
						st, err := cl.Submit(ctx, "flood.bedwe", "fa fb", nil)
						if err == nil {
							mu.Lock()
							taken = append(taken, accepted{id: st.ID, node: target, firstAt: first})
							mu.Unlock()
							break
						}
						if !client.IsBusy(err) {
							t.Errorf("client %d: a submission neither accepted nor refused as busy: %v", c, err)
							return
						}
						mu.Lock()
						refusedAt++
						mu.Unlock()
						select { // the client's own pace after a refusal
						case <-ctx.Done():
							t.Errorf("client %d: %v", c, ctx.Err())
							return
						case <-time.After(20*time.Millisecond + rand.N(30*time.Millisecond)):
						}
					}
				}
			})
		}
	}
	wg.Wait()
	submitted := time.Now()
	if t.Failed() {
		return
	}
	if len(taken) != nWorkflows {
		t.Fatalf("%d submissions accepted, want %d", len(taken), nWorkflows)
	}

	// Wait for every accepted workflow at its origin.
	var clients []*client.Client
	for _, nf := range nodes {
		cl, err := client.Dial(ctx, nf.Addrs...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients = append(clients, cl)
	}
	final := map[string]api.Status{}
	for len(final) < len(taken) {
		for i, cl := range clients {
			list, err := cl.List(ctx)
			if err != nil {
				t.Fatalf("list at node %d: %v", i, err)
			}
			for _, st := range list {
				if st.State != api.StateRunning {
					final[st.ID] = st
				}
			}
		}
		if len(final) < len(taken) {
			select {
			case <-ctx.Done():
				t.Fatalf("%d of %d workflows ended before the deadline", len(final), len(taken))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	ended := time.Now()

	var lat, e2e []time.Duration
	lastEnd := began
	for _, a := range taken {
		st, ok := final[a.id]
		if !ok {
			t.Errorf("workflow %s (origin node %d) lost", a.id, a.node)
			continue
		}
		if st.State != api.StateSucceeded {
			t.Errorf("workflow %s: %s %s", a.id, st.State, st.Error)
			continue
		}
		lat = append(lat, st.Finished.Sub(st.Submitted))
		e2e = append(e2e, st.Finished.Sub(a.firstAt))
		lastEnd = later(lastEnd, st.Finished)
	}
	peaks := svc.peaks()
	for _, nf := range nodes {
		if p := peaks[nf.PeerID]; p > floodMaxConcurrent {
			t.Errorf("node %s ran %d steps at once; its limit is %d", nf.PeerID, p, floodMaxConcurrent)
		}
		if p := peaks[nf.PeerID+"/fb"]; p > floodFbLimit {
			t.Errorf("node %s ran %d fb steps at once; max_concurrent is %d", nf.PeerID, p, floodFbLimit)
		}
	}
	distinct, repeated := svc.invocations()
	if distinct < 2*nWorkflows {
		t.Errorf("%d distinct step attempts ran, want at least %d (2 steps each)", distinct, 2*nWorkflows)
	}

	busyHandoffs, handoffs := 0, 0
	if evs, err := events.Read(evFile); err == nil {
		for _, e := range evs {
			if e.Type == events.Handoff {
				handoffs++
				if e.Reason == api.CodeBusy {
					busyHandoffs++
				}
			}
		}
	}
	peakNode, peakFb := 0, 0
	for _, nf := range nodes {
		peakNode, peakFb = max(peakNode, peaks[nf.PeerID]), max(peakFb, peaks[nf.PeerID+"/fb"])
	}
	span := lastEnd.Sub(began)
	t.Logf("flood: %d nodes, %d clients × %d submissions at once, %d two-step workflows (%s steps); limits per node: %d at once (fb %d), queue %d, %d running workflows per origin",
		nNodes, nClients, floodInflight, nWorkflows, step, floodMaxConcurrent, floodFbLimit, floodQueue, floodMaxWorkflows)
	t.Logf("flood: all submitted in %s, all ended in %s: %.1f workflows/s", submitted.Sub(began).Round(time.Millisecond), span.Round(time.Millisecond), float64(nWorkflows)/span.Seconds())
	t.Logf("flood: latency submit→end p50 %s p90 %s p99 %s max %s; from the first attempt (busy refusals included) p50 %s p99 %s",
		pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100), pct(e2e, 50), pct(e2e, 99))
	t.Logf("flood: submissions refused busy %d (then accepted on a later try); hand-offs %d, refused busy %d; peak concurrency per node %d (limit %d), fb %d (limit %d); step attempts %d, repeated %d; test wall time %s",
		refusedAt, handoffs, busyHandoffs, peakNode, floodMaxConcurrent, peakFb, floodFbLimit, distinct, repeated, ended.Sub(began).Round(time.Millisecond))
}

// pct is the p-th percentile of ds (p = 100: the maximum).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(0, i)].Round(time.Millisecond)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
