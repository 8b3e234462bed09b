package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/member"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/pack"
)

// countingService is an HTTP endpoint that http services of test nodes
// call: it keeps its own record of how many invocations run at once, per
// peer and per peer and service (the service's own count, not the node's
// report), and answers each after hold, or when release is closed if
// hold is 0.
type countingService struct {
	url     string
	hold    time.Duration
	release chan struct{}
	started chan service.Request // every invocation, if not nil (buffered)

	mu        sync.Mutex
	now, peak map[string]int // by peer, and by peer+"/"+service
	calls     map[string]int // by idempotency key
}

func newCountingService(t testing.TB, hold time.Duration) *countingService {
	t.Helper()
	c := &countingService{hold: hold, release: make(chan struct{}), now: map[string]int{}, peak: map[string]int{}, calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(c.open)
	c.url = srv.URL
	return c
}

// open releases every held invocation, now and later (idempotent).
func (c *countingService) open() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.release:
	default:
		close(c.release)
	}
}

func (c *countingService) serve(w http.ResponseWriter, r *http.Request) {
	var req service.Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	keys := []string{req.Peer, req.Peer + "/" + req.Service}
	c.mu.Lock()
	c.calls[req.IdempotencyKey]++
	for _, k := range keys {
		c.now[k]++
		c.peak[k] = max(c.peak[k], c.now[k])
	}
	c.mu.Unlock()
	if c.started != nil {
		c.started <- req
	}
	if c.hold > 0 {
		time.Sleep(c.hold) // the service's run time
	} else {
		select {
		case <-c.release:
		case <-r.Context().Done():
		}
	}
	c.mu.Lock()
	for _, k := range keys {
		c.now[k]--
	}
	c.mu.Unlock()
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// peaks returns a copy of the peak concurrency by key.
func (c *countingService) peaks() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.peak))
	for k, v := range c.peak {
		out[k] = v
	}
	return out
}

// invocations returns the number of distinct attempts and of repeated ones.
func (c *countingService) invocations() (distinct, repeated int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.calls {
		distinct++
		repeated += n - 1
	}
	return distinct, repeated
}

// capacityConfig is a test node with the given limits; submissions are
// not rate limited (the tests measure the bulkheads, not the limiter).
func capacityConfig(t testing.TB, base node.Config, services string, maxConcurrent, queue, maxWorkflows int) node.Config {
	cfg := testConfig(t, base, services)
	cfg.MaxConcurrent, cfg.QueueLength, cfg.MaxWorkflows = maxConcurrent, queue, maxWorkflows
	cfg.Limits = member.Limits{Handoffs: member.Rate{PerSecond: 10000, Burst: 10000}, Submits: member.Rate{PerSecond: 10000, Burst: 10000}}
	return cfg
}

// TestBulkheadLimitsConcurrentSteps floods one node with single-step
// workflows of two services, one declaring max_concurrent: 2, the node
// allowing 3 at once, and checks with the service's own count that
// neither limit was ever exceeded, and that both were reached.
func TestBulkheadLimitsConcurrentSteps(t *testing.T) {
	svc := newCountingService(t, 60*time.Millisecond)
	services := fmt.Sprintf("version: 1\nservices:\n  slow: {kind: http, url: %q, max_concurrent: 2}\n  other: {kind: http, url: %q}\n", svc.url, svc.url)
	nf, _ := runNode(t, capacityConfig(t, node.DefaultConfig(), services, 3, 64, 0))
	cl, err := client.Dial(context.Background(), nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var ids []string
	for i := range 24 {
		src := "slow"
		if i%2 == 1 {
			src = "other"
		}
		st, err := cl.Submit(ctx, "wf", src, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	for _, id := range ids {
		final, err := cl.Wait(ctx, id, 20*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final.State != api.StateSucceeded {
			t.Fatalf("workflow %s: %s %s", id, final.State, final.Error)
		}
	}
	peaks := svc.peaks()
	if got := peaks[nf.PeerID]; got != 3 {
		t.Errorf("at most %d steps ran at once on the node; want exactly its limit, 3", got)
	}
	if got := peaks[nf.PeerID+"/slow"]; got != 2 {
		t.Errorf("at most %d slow steps ran at once; want exactly max_concurrent, 2", got)
	}
	if d, r := svc.invocations(); d != 24 || r != 0 {
		t.Errorf("%d distinct invocations, %d repeated; want 24 and 0", d, r)
	}
}

// handoffPack encodes a pack of workflow id whose head is src's first
// service.
func handoffPack(t *testing.T, id, src string) []byte {
	t.Helper()
	w, err := grammar.Parse("t", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	grammar.AssignPaths(w)
	b, err := pack.Encode(&pack.Pack{WorkflowID: id, Origin: []pack.Peer{{ID: "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD"}}, Workflow: w, Input: []byte("null")})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHandoffRefusedBusyWhenQueueFull: with one slot and a queue of one,
// a third hand-off is refused as busy (nothing taken: the same pack is
// accepted once there is room again), and the same step handed again
// while it waits is answered as taken, not busy.
func TestHandoffRefusedBusyWhenQueueFull(t *testing.T) {
	svc := newCountingService(t, 0)
	svc.started = make(chan service.Request, 8)
	services := fmt.Sprintf("version: 1\nservices:\n  hold: {kind: http, url: %q}\n", svc.url)
	cfg := capacityConfig(t, node.DefaultConfig(), services, 1, 1, 0)
	cfg.HTTP = "127.0.0.1:0"
	nf, _ := runNode(t, cfg)
	h, id := rawHost(t, nf)
	mustAck := func(wf string, want string) {
		t.Helper()
		ack, err := handoff(t, h, id, handoffPack(t, wf, "hold"))
		if err != nil {
			t.Fatalf("hand-off of %s: %v", wf, err)
		}
		if got := ack.Code; ack.OK != (want == "") || got != want {
			t.Fatalf("hand-off of %s: %+v, want code %q", wf, ack, want)
		}
	}
	mustAck("wf-a", "") // runs (held by the service)
	if r := <-svc.started; r.WorkflowID != "wf-a" {
		t.Fatalf("started %s, want wf-a", r.WorkflowID)
	}
	mustAck("wf-b", "")           // waits for the slot
	mustAck("wf-b", "")           // the same step again: still taken
	mustAck("wf-c", api.CodeBusy) // the queue is full
	if m := scrape(t, nf.HTTP); m["bedwe_steps_queued"] != 1 || m["bedwe_step_slots_free"] != 0 {
		t.Errorf("metrics: %v steps queued, %v slots free; want 1 and 0", m["bedwe_steps_queued"], m["bedwe_step_slots_free"])
	}
	ack, _ := handoff(t, h, id, handoffPack(t, "wf-c", "hold"))
	if !strings.Contains(ack.Error, "busy") || !strings.Contains(ack.Error, "queue 1") {
		t.Errorf("busy refusal %q should say the peer is busy and name its queue", ack.Error)
	}
	svc.open()
	if r := <-svc.started; r.WorkflowID != "wf-b" {
		t.Fatalf("started %s, want wf-b", r.WorkflowID)
	}
	// The refused pack left nothing behind: handed again, it is taken and runs.
	deadline := time.After(30 * time.Second)
	for {
		ack, err := handoff(t, h, id, handoffPack(t, "wf-c", "hold"))
		if err != nil {
			t.Fatal(err)
		}
		if ack.OK {
			break
		}
		if ack.Code != api.CodeBusy {
			t.Fatalf("wf-c again: %+v", ack)
		}
		select { // wf-b may still hold the queue place for a moment
		case <-deadline:
			t.Fatal("wf-c still refused as busy after 30s")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if r := <-svc.started; r.WorkflowID != "wf-c" {
		t.Fatalf("started %s, want wf-c", r.WorkflowID)
	}
	if d, r := svc.invocations(); d != 3 || r != 0 {
		t.Errorf("%d distinct invocations, %d repeated; want 3 and 0", d, r)
	}
}

// TestSubmitRefusedBusyAtMaxWorkflows: an origin at its limit of running
// workflows refuses a submission with code busy and a message naming the
// limit, and takes submissions again once one ended.
func TestSubmitRefusedBusyAtMaxWorkflows(t *testing.T) {
	svc := newCountingService(t, 0)
	services := fmt.Sprintf("version: 1\nservices:\n  hold: {kind: http, url: %q}\n", svc.url)
	nf, _ := runNode(t, capacityConfig(t, node.DefaultConfig(), services, 4, 8, 2))
	cl, err := client.Dial(context.Background(), nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []string
	for range 2 {
		st, err := cl.Submit(ctx, "wf", "hold", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	_, err = cl.Submit(ctx, "wf", "hold", nil)
	if !client.IsBusy(err) || !strings.Contains(err.Error(), "--max-workflows") || !strings.Contains(err.Error(), "limit 2") {
		t.Fatalf("third submission: %v; want a busy refusal naming --max-workflows and the limit 2", err)
	}
	if list, err := cl.List(ctx); err != nil || len(list) != 2 {
		t.Fatalf("after the refusal the node lists %d workflows (%v); want 2: nothing recorded", len(list), err)
	}
	svc.open()
	for _, id := range ids {
		if final, err := cl.Wait(ctx, id, 20*time.Millisecond, nil); err != nil || final.State != api.StateSucceeded {
			t.Fatalf("workflow %s: %v %+v", id, err, final)
		}
	}
	st, err := cl.Submit(ctx, "wf", "hold", nil)
	if err != nil {
		t.Fatalf("submission after the running ones ended: %v", err)
	}
	if final, err := cl.Wait(ctx, st.ID, 20*time.Millisecond, nil); err != nil || final.State != api.StateSucceeded {
		t.Fatalf("workflow %s: %v %+v", st.ID, err, final)
	}
}

// providerMesh starts an origin (no services, 4 slots) and two providers
// of svc's "hold" service with one slot and a queue of one each, in zones
// p0 and p1, waits until all three see each other and dials the origin.
// It returns the origin, the providers, the origin's events file and the
// client (closed when the test ends).
func providerMesh(t *testing.T, base node.Config, svc *countingService) (api.NodeFile, []api.NodeFile, string, *client.Client) {
	t.Helper()
	evFile := t.TempDir() + "/events.jsonl"
	provider := fmt.Sprintf("version: 1\nservices:\n  hold: {kind: http, url: %q}\n", svc.url)
	ocfg := capacityConfig(t, base, "version: 1\n", 4, 8, 0)
	ocfg.EventsFile = evFile
	origin, _ := runNode(t, ocfg)
	var providers []api.NodeFile
	for i := range 2 {
		cfg := capacityConfig(t, base, provider, 1, 1, 0)
		cfg.Network, cfg.Zone, cfg.Bootstrap = ocfg.Network, fmt.Sprintf("p%d", i), origin.Addrs
		nf, _ := runNode(t, cfg)
		providers = append(providers, nf)
	}
	for _, nf := range append(providers, origin) {
		waitPeers(t, nf, 3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, origin.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return origin, providers, evFile, cl
}

// TestBusyPeersAreRetriedNotFailed: two providers with one slot and a
// queue of one each take four workflows; the origin's dispatch of the
// other two is refused as busy for several times its no-peer wait, and it
// neither gives up nor opens the providers' circuit breakers: once the
// service lets go, all six succeed, never more than one at once per peer.
func TestBusyPeersAreRetriedNotFailed(t *testing.T) {
	svc := newCountingService(t, 0)
	base := node.TestnetConfig()
	base.NoPeerWait = time.Second
	_, providers, evFile, cl := providerMesh(t, base, svc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []string
	for range 6 {
		st, err := cl.Submit(ctx, "wf", "hold", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	// Busy refusals for more than twice the no-peer wait.
	eventually(t, time.Minute, "busy refusals for 2.5 s", func() error {
		evs, err := events.Read(evFile)
		if err != nil {
			return err
		}
		var first, last time.Time
		for _, e := range evs {
			if e.Type == events.Handoff && e.Outcome == events.OutcomeRefused && e.Reason == api.CodeBusy {
				if first.IsZero() {
					first = e.At
				}
				last = e.At
			}
		}
		if first.IsZero() || last.Sub(first) < 2500*time.Millisecond {
			return fmt.Errorf("busy refusals from %s to %s", first.Format(time.StampMilli), last.Format(time.StampMilli))
		}
		return nil
	})
	list, err := cl.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range list {
		if st.State != api.StateRunning {
			t.Fatalf("workflow %s is %s (%s) while the providers were merely busy", st.ID, st.State, st.Error)
		}
	}
	peers, err := cl.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if !p.Self && p.Breaker != "" && p.Breaker != "closed" {
			t.Errorf("the origin's breaker for busy peer %s is %s; busy is not a failure", p.ID, p.Breaker)
		}
	}
	svc.open()
	for _, id := range ids {
		if final, err := cl.Wait(ctx, id, 20*time.Millisecond, nil); err != nil || final.State != api.StateSucceeded {
			t.Fatalf("workflow %s: %v %s %s", id, err, final.State, final.Error)
		}
	}
	peaks := svc.peaks()
	for _, nf := range providers {
		if peaks[nf.PeerID] > 1 {
			t.Errorf("peer %s ran %d steps at once; its limit is 1", nf.PeerID, peaks[nf.PeerID])
		}
	}
	if d, r := svc.invocations(); d != 6 || r != 0 {
		t.Errorf("%d distinct invocations, %d repeated; want 6 and 0", d, r)
	}
}

// TestPresenceCapacityAndPickPreferRoom: a provider announces its slots;
// filled up by hand, it announces itself full, and the origin then sends
// work to the provider with room without asking the full one first.
func TestPresenceCapacityAndPickPreferRoom(t *testing.T) {
	svc := newCountingService(t, 0)
	svc.started = make(chan service.Request, 8)
	_, providers, evFile, cl := providerMesh(t, node.TestnetConfig(), svc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := func(id string, want func(api.PeerInfo) bool) error {
		peers, err := cl.Peers(ctx)
		if err != nil {
			return err
		}
		for _, p := range peers {
			if p.ID == id {
				if !want(p) {
					return fmt.Errorf("origin sees %s with slots %d, free %d, room %d", id, p.Slots, p.Free, p.Room)
				}
				return nil
			}
		}
		return fmt.Errorf("origin does not see %s", id)
	}
	full, roomy := providers[0], providers[1]
	eventually(t, 30*time.Second, "the provider's capacity in presence", func() error {
		return seen(full.PeerID, func(p api.PeerInfo) bool { return p.Slots == 1 && p.Free == 1 && p.Room == 2 })
	})
	// Fill the first provider by hand: one step runs, then one waits.
	h, id := rawHost(t, full)
	for _, wf := range []string{"wf-x", "wf-y"} {
		if ack, err := handoff(t, h, id, handoffPack(t, wf, "hold")); err != nil || !ack.OK {
			t.Fatalf("hand-off of %s: %v %+v", wf, err, ack)
		}
		if wf == "wf-x" {
			<-svc.started
		}
	}
	eventually(t, 30*time.Second, "the full provider announced", func() error {
		return seen(full.PeerID, func(p api.PeerInfo) bool { return p.Slots == 1 && p.Free == 0 && p.Room == 0 })
	})
	var ids []string
	for range 2 {
		st, err := cl.Submit(ctx, "wf", "hold", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	if r := <-svc.started; r.Peer != roomy.PeerID {
		t.Errorf("the first submitted step ran on %s, want the provider with room %s", r.Peer, roomy.PeerID)
	}
	eventually(t, 30*time.Second, "both submitted steps handed off", func() error {
		evs, err := events.Read(evFile)
		if err != nil {
			return err
		}
		ok := 0
		for _, e := range evs {
			if e.Type != events.Handoff {
				continue
			}
			if e.To == full.PeerID {
				return fmt.Errorf("the origin offered %s to the full provider (%s %s)", e.Workflow, e.Outcome, e.Reason)
			}
			if e.Outcome == events.OutcomeOK {
				ok++
			}
		}
		if ok < 2 {
			return fmt.Errorf("%d hand-offs taken", ok)
		}
		return nil
	})
	svc.open()
	for _, id := range ids {
		if final, err := cl.Wait(ctx, id, 20*time.Millisecond, nil); err != nil || final.State != api.StateSucceeded {
			t.Fatalf("workflow %s: %v %s %s", id, err, final.State, final.Error)
		}
	}
}

// TestSubmitRateLimitRefusedBusy: a client over the submission rate limit
// is refused with code busy too (nothing recorded, submit again later).
func TestSubmitRateLimitRefusedBusy(t *testing.T) {
	cfg := capacityConfig(t, node.DefaultConfig(), echoServices, 4, 8, 0)
	cfg.Limits.Submits = member.Rate{PerSecond: 0.01, Burst: 1}
	nf, _ := runNode(t, cfg)
	cl, err := client.Dial(context.Background(), nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.Submit(ctx, "wf", "S1", nil); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Submit(ctx, "wf", "S1", nil)
	if !client.IsBusy(err) || !strings.Contains(err.Error(), "submits faster") {
		t.Fatalf("second submission: %v; want a busy refusal naming the rate limit", err)
	}
}

// TestForkWiderThanCapacity: a FORK of six branches on a node that runs
// one step at once and queues one more completes: the branches refused
// as busy are handed again as the slots free up.
func TestForkWiderThanCapacity(t *testing.T) {
	svc := newCountingService(t, 20*time.Millisecond)
	services := fmt.Sprintf("version: 1\npatterns:\n  - {match: \"S*\", kind: http, url: %q}\n", svc.url)
	nf, _ := runNode(t, capacityConfig(t, node.DefaultConfig(), services, 1, 1, 0))
	cl, err := client.Dial(context.Background(), nf.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := cl.Submit(ctx, "wf", "S1 FORK(S2, S3, S4, S5, S6, S7) SYNC S8", nil)
	if err != nil {
		t.Fatal(err)
	}
	final, err := cl.Wait(ctx, st.ID, 20*time.Millisecond, nil)
	if err != nil || final.State != api.StateSucceeded {
		t.Fatalf("workflow %s: %v %s %s", st.ID, err, final.State, final.Error)
	}
	if p := svc.peaks()[nf.PeerID]; p != 1 {
		t.Errorf("%d steps ran at once; the limit is 1", p)
	}
	if d, r := svc.invocations(); d != 8 || r != 0 {
		t.Errorf("%d distinct invocations, %d repeated; want 8 and 0", d, r)
	}
}
