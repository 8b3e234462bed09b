package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node/rpc"
)

// countingHost counts the streams its handlers are given, by protocol.
type countingHost struct {
	host.Host
	mu      sync.Mutex
	streams map[protocol.ID]int
}

func (h *countingHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, func(s network.Stream) {
		h.mu.Lock()
		h.streams[pid]++
		h.mu.Unlock()
		handler(s)
	})
}

func (h *countingHost) count(pid string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streams[protocol.ID(pid)]
}

// pair is a client host connected to a counting server host.
func pair(t testing.TB) (client host.Host, server *countingHost) {
	t.Helper()
	server = &countingHost{Host: p2ptest.Host(t), streams: map[protocol.ID]int{}}
	client = p2ptest.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Connect(ctx, peer.AddrInfo{ID: server.ID(), Addrs: server.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return client, server
}

const echo = "/test/echo/1.0.0"

func serveEcho(m *rpc.Mux, calls *atomic.Int64) {
	m.Serve(echo, 4<<20, 10*time.Second, func(_ context.Context, _ peer.ID, req []byte) []byte {
		calls.Add(1)
		return append([]byte("echo:"), req...)
	})
}

// servePlainEcho serves echo on streams of their own only (no mux): an
// older node, or a bare host. Answers are the request as it came.
func servePlainEcho(h host.Host, calls *atomic.Int64) {
	rpc.Serve(h, nil, echo, 1<<20, 10*time.Second, func(_ context.Context, _ peer.ID, req []byte) []byte {
		calls.Add(1)
		return req
	})
}

// TestMuxCallsOnOneStream sends many concurrent requests to a peer that
// speaks the mux: every answer belongs to its request, the server's
// handler ran once per request, and the requests shared one stream.
func TestMuxCallsOnOneStream(t *testing.T) {
	client, server := pair(t)
	var calls atomic.Int64
	serveEcho(rpc.NewMux(server, nil, 15*time.Second, nil), &calls)
	m := rpc.NewMux(client, nil, 15*time.Second, nil)
	defer m.Close()

	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := []byte(fmt.Sprintf("request %d", i))
			resp, err := m.Call(context.Background(), server.ID(), echo, req, 1<<20, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			if want := "echo:" + string(req); string(resp) != want {
				errs <- fmt.Errorf("answer %q to %q", resp, req)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := calls.Load(); got != n {
		t.Errorf("handler ran %d times for %d requests", got, n)
	}
	if got := server.count(rpc.ProtoMux); got != 1 {
		t.Errorf("%d %s streams for %d requests, want 1", got, rpc.ProtoMux, n)
	}
	if got := server.count(echo); got != 0 {
		t.Errorf("%d %s streams of their own, want none", got, echo)
	}
}

// TestMuxFallsBackToStreams calls a peer that serves the protocol only on
// streams of its own (an older node, or a bare host): every request is
// answered, one stream each.
func TestMuxFallsBackToStreams(t *testing.T) {
	client, server := pair(t)
	var calls atomic.Int64
	servePlainEcho(server, &calls)
	m := rpc.NewMux(client, nil, 15*time.Second, nil)
	defer m.Close()
	for i := range 3 {
		resp, err := m.Call(context.Background(), server.ID(), echo, []byte{byte(i)}, 16, 10*time.Second)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !bytes.Equal(resp, []byte{byte(i)}) {
			t.Fatalf("call %d: answer %v", i, resp)
		}
	}
	if got, want := server.count(echo), 3; got != want || calls.Load() != 3 {
		t.Errorf("%d streams and %d handler runs for 3 requests, want %d each", got, calls.Load(), want)
	}
}

// TestMuxRequestOutlivesItsDeadline: a request whose handler does not
// answer in time fails at its deadline; the session goes on serving other
// requests if answers still come back on it, and is replaced if nothing
// did (its connection may be dead). A refused request (nil answer, or not
// admitted) fails as a reset stream would; a payload over MaxMuxPayload
// takes a stream of its own.
func TestMuxRequestOutlivesItsDeadline(t *testing.T) {
	client, server := pair(t)
	var calls atomic.Int64
	const slow, refused, closed, wait = "/test/slow/1.0.0", "/test/refused/1.0.0", "/test/closed/1.0.0", "/test/wait/1.0.0"
	sm := rpc.NewMux(server, nil, 15*time.Second, func(proto string, _ peer.ID) bool { return proto != closed })
	serveEcho(sm, &calls)
	release := make(chan struct{})
	defer close(release)
	slowStarted := make(chan struct{}, 8)
	sm.Serve(slow, 1<<20, 10*time.Second, func(ctx context.Context, _ peer.ID, req []byte) []byte {
		slowStarted <- struct{}{}
		<-release
		return req
	})
	sm.Serve(refused, 1<<20, 10*time.Second, func(context.Context, peer.ID, []byte) []byte { return nil })
	sm.Serve(wait, 1<<20, 10*time.Second, func(ctx context.Context, _ peer.ID, req []byte) []byte {
		d, _ := time.ParseDuration(string(req))
		select {
		case <-time.After(d): // the handler's own work, not a test's wait
		case <-ctx.Done():
		}
		return req
	})
	sm.Serve(closed, 1<<20, 10*time.Second, func(context.Context, peer.ID, []byte) []byte { return []byte("x") })
	m := rpc.NewMux(client, nil, 15*time.Second, nil)
	defer m.Close()
	ctx := context.Background()

	// Alone on the session, the slow request hears nothing back: it fails
	// at its deadline and the session is replaced.
	start := time.Now()
	_, err := m.Call(ctx, server.ID(), slow, []byte("x"), 16, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("slow request: %v, want no answer within its deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("slow request failed after %s, its deadline was 300ms", took)
	}
	<-slowStarted
	if _, err := m.Call(ctx, server.ID(), echo, []byte("after"), 64, 10*time.Second); err != nil {
		t.Fatalf("request after a timed-out one: %v", err)
	}
	if got := server.count(rpc.ProtoMux); got != 2 {
		t.Errorf("%d sessions after a request that heard nothing back, want 2 (it was replaced)", got)
	}

	// A request sent just after one that hears nothing back keeps its own
	// deadline: the silent session is taken out of use, not broken.
	sessions := server.count(rpc.ProtoMux)
	quietDone := make(chan error, 1)
	go func() {
		_, err := m.Call(ctx, server.ID(), slow, []byte("x"), 16, 300*time.Millisecond)
		quietDone <- err
	}()
	<-slowStarted // the silent request reached its handler first
	resp, err := m.Call(ctx, server.ID(), wait, []byte("600ms"), 16, 10*time.Second)
	if err != nil || string(resp) != "600ms" {
		t.Fatalf("request sent after a silent one: %q, %v (the silent one's timeout broke it)", resp, err)
	}
	if err := <-quietDone; err == nil {
		t.Fatal("slow request answered")
	}
	if _, err := m.Call(ctx, server.ID(), echo, []byte("next"), 64, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := server.count(rpc.ProtoMux); got != sessions+1 {
		t.Errorf("%d sessions, want %d: the silent session was not replaced", got, sessions+1)
	}

	// Beside requests that are answered, a slow one leaves the session be.
	slowDone := make(chan error, 1)
	go func() {
		_, err := m.Call(ctx, server.ID(), slow, []byte("x"), 16, time.Second)
		slowDone <- err
	}()
	for {
		if _, err := m.Call(ctx, server.ID(), echo, []byte("beside"), 64, 10*time.Second); err != nil {
			t.Fatalf("request beside a slow one: %v", err)
		}
		select {
		case err := <-slowDone:
			if err == nil {
				t.Fatal("slow request answered")
			}
		default:
			continue
		}
		break
	}
	if _, err := m.Call(ctx, server.ID(), refused, []byte("x"), 64, 10*time.Second); err == nil {
		t.Error("a request its handler answered with nil succeeded")
	}
	if _, err := m.Call(ctx, server.ID(), closed, []byte("x"), 64, 10*time.Second); err == nil {
		t.Error("a request the server does not admit succeeded")
	}
	if _, err := m.Call(ctx, server.ID(), echo, []byte("still"), 64, 10*time.Second); err != nil {
		t.Fatalf("request after refused ones: %v", err)
	}
	if got := server.count(rpc.ProtoMux); got != sessions+1 {
		t.Errorf("%d sessions, want %d: a slow request with answers around it, or a refused one, broke the session", got, sessions+1)
	}
	big := bytes.Repeat([]byte("b"), rpc.MaxMuxPayload+1)
	resp, err = m.Call(ctx, server.ID(), echo, big, 2*len(big), 10*time.Second)
	if err != nil || len(resp) != len(big)+len("echo:") {
		t.Fatalf("large request: %d bytes, %v", len(resp), err)
	}
	if got := server.count(echo); got != 1 {
		t.Errorf("%d %s streams of their own after one large request, want 1", got, echo)
	}
}

// TestMuxSessionEndsWhenIdle: a session nobody used for the linger is
// closed, and the next request opens another.
func TestMuxSessionEndsWhenIdle(t *testing.T) {
	client, server := pair(t)
	var calls atomic.Int64
	serveEcho(rpc.NewMux(server, nil, time.Hour, nil), &calls)
	const linger = 300 * time.Millisecond
	m := rpc.NewMux(client, nil, linger, nil)
	defer m.Close()
	ctx := context.Background()
	if _, err := m.Call(ctx, server.ID(), echo, []byte("1"), 64, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The server's end of the session closes once the client closed its
	// own (idle): await that instead of sleeping a guessed time.
	deadline := time.Now().Add(10 * time.Second)
	for len(server.Network().ConnsToPeer(client.ID())) > 0 && streamsOf(server, client.ID(), rpc.ProtoMux) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("session still open after %s idle (linger %s)", 10*time.Second, linger)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := m.Call(ctx, server.ID(), echo, []byte("2"), 64, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := server.count(rpc.ProtoMux); got != 2 {
		t.Errorf("%d sessions, want 2 (the idle one closed, then a new one)", got)
	}
}

// TestMuxSessionOutlivesNoConnection: a request after the connection the
// session ran on closed goes on a new session over the peer's new
// connection.
func TestMuxSessionOutlivesNoConnection(t *testing.T) {
	client, server := pair(t)
	var calls atomic.Int64
	serveEcho(rpc.NewMux(server, nil, time.Hour, nil), &calls)
	m := rpc.NewMux(client, nil, time.Hour, nil)
	defer m.Close()
	ctx := context.Background()
	if _, err := m.Call(ctx, server.ID(), echo, []byte("1"), 64, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The client must have seen its connection go (a stream per request
	// would fail on it just the same until then).
	sub, err := client.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := server.Network().ClosePeer(client.ID()); err != nil {
		t.Fatal(err)
	}
	for gone := false; !gone; {
		select {
		case e := <-sub.Out():
			ev := e.(event.EvtPeerConnectednessChanged)
			gone = ev.Peer == server.ID() && ev.Connectedness != network.Connected
		case <-time.After(10 * time.Second):
			t.Fatal("the client never saw its connection close")
		}
	}
	if err := client.Connect(ctx, peer.AddrInfo{ID: server.ID(), Addrs: server.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Call(ctx, server.ID(), echo, []byte("2"), 64, 10*time.Second); err != nil {
		t.Fatalf("request after the connection closed: %v", err)
	}
	if got := server.count(rpc.ProtoMux); got != 2 {
		t.Errorf("%d sessions, want 2", got)
	}
}

// streamsOf counts h's open streams of proto with p.
func streamsOf(h host.Host, p peer.ID, proto string) int {
	n := 0
	for _, c := range h.Network().ConnsToPeer(p) {
		for _, s := range c.GetStreams() {
			if s.Protocol() == protocol.ID(proto) {
				n++
			}
		}
	}
	return n
}

// sessionHost hooks the request sessions its client opens: opening, if
// set, runs before each is opened (it may hold the open up), and wrap, if
// set, wraps the stream.
type sessionHost struct {
	host.Host
	opening func(ctx context.Context) error
	wrap    func(network.Stream) network.Stream
}

func (h *sessionHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	session := len(pids) == 1 && pids[0] == rpc.ProtoMux
	if session && h.opening != nil {
		if err := h.opening(ctx); err != nil {
			return nil, err
		}
	}
	st, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil || !session || h.wrap == nil {
		return st, err
	}
	return h.wrap(st), nil
}

// TestMuxOpenOutlivesTheFirstDeadline: a request that waits for a session
// another request is opening keeps its own deadline, not the opener's.
func TestMuxOpenOutlivesTheFirstDeadline(t *testing.T) {
	client, server := pair(t)
	var calls atomic.Int64
	serveEcho(rpc.NewMux(server, nil, 15*time.Second, nil), &calls)
	opening, open := make(chan struct{}, 4), make(chan struct{})
	slowHost := &sessionHost{Host: client, opening: func(ctx context.Context) error {
		opening <- struct{}{}
		select {
		case <-open:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	m := rpc.NewMux(slowHost, nil, 15*time.Second, nil)
	defer m.Close()
	short := make(chan error, 1)
	go func() {
		_, err := m.Call(context.Background(), server.ID(), echo, []byte("short"), 64, 100*time.Millisecond)
		short <- err
	}()
	<-opening
	long := make(chan error, 1)
	go func() {
		_, err := m.Call(context.Background(), server.ID(), echo, []byte("long"), 64, 10*time.Second)
		long <- err
	}()
	if err := <-short; err == nil {
		t.Fatal("the short request was answered before its session opened")
	}
	close(open)
	if err := <-long; err != nil {
		t.Fatalf("a request waiting for a session failed with the opener's deadline: %v", err)
	}
}

// stallStream blocks its next write once armed, until unstall is closed
// (a link whose send window is full).
type stallStream struct {
	network.Stream
	armed   *atomic.Bool
	stalled chan struct{}
	unstall chan struct{}
}

func (s *stallStream) Write(b []byte) (int, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.stalled <- struct{}{}
		<-s.unstall
	}
	return s.Stream.Write(b)
}

// stallingMux is a mux to an echo server over a session whose next write
// stalls once armed (until unstall is closed), with the session open.
func stallingMux(t *testing.T) (*rpc.Mux, *countingHost, *stallStream) {
	t.Helper()
	client, server := pair(t)
	var calls atomic.Int64
	serveEcho(rpc.NewMux(server, nil, 15*time.Second, nil), &calls)
	sh := &stallStream{armed: new(atomic.Bool), stalled: make(chan struct{}, 1), unstall: make(chan struct{})}
	m := rpc.NewMux(&sessionHost{Host: client, wrap: func(st network.Stream) network.Stream {
		return &stallStream{Stream: st, armed: sh.armed, stalled: sh.stalled, unstall: sh.unstall}
	}}, nil, 15*time.Second, nil)
	t.Cleanup(func() { m.Close() })
	if _, err := m.Call(context.Background(), server.ID(), echo, []byte("open"), 64, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return m, server, sh
}

// TestMuxLateWriterLeavesTheSession: a request whose deadline passes
// while another request's frame is being written gives up at its deadline
// and leaves the session (and the frame being written) alone.
func TestMuxLateWriterLeavesTheSession(t *testing.T) {
	m, server, sh := stallingMux(t)
	ctx := context.Background()
	sh.armed.Store(true)
	first := make(chan error, 1)
	go func() {
		_, err := m.Call(ctx, server.ID(), echo, []byte("stalled"), 64, 10*time.Second)
		first <- err
	}()
	<-sh.stalled
	// The stall ends by itself after 5 s, so that a late request that
	// waits for the stalled write fails this test instead of hanging it.
	var unstall sync.Once
	stop := time.AfterFunc(5*time.Second, func() { unstall.Do(func() { close(sh.unstall) }) })
	defer stop.Stop()
	start := time.Now()
	_, err := m.Call(ctx, server.ID(), echo, []byte("late"), 64, 200*time.Millisecond)
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("the late request returned after %s, its deadline was 200ms: it waited for the stalled write", took)
	}
	if err == nil {
		t.Fatal("a request behind a stalled write was answered")
	}
	unstall.Do(func() { close(sh.unstall) })
	if err := <-first; err != nil {
		t.Fatalf("the stalled request failed: %v (the late one broke the session)", err)
	}
	if got := server.count(rpc.ProtoMux); got != 1 {
		t.Errorf("%d sessions, want 1", got)
	}
}

// TestMuxCallerLeavesItsStuckWrite: a request whose own frame cannot be
// written (a connection stuck by a cut link while it looks open) gives up
// at its deadline instead of waiting for the session's write timeout, and
// the next request opens another session. Waiting would hold a submission
// past its client's deadline while the origin asks a replica across a
// flapping link.
func TestMuxCallerLeavesItsStuckWrite(t *testing.T) {
	m, server, sh := stallingMux(t)
	ctx := context.Background()
	sh.armed.Store(true)
	// The stall ends by itself after 5 s, so that a request that waits
	// for its stuck write fails this test instead of hanging it.
	var unstall sync.Once
	stop := time.AfterFunc(5*time.Second, func() { unstall.Do(func() { close(sh.unstall) }) })
	defer stop.Stop()
	start := time.Now()
	_, err := m.Call(ctx, server.ID(), echo, []byte("stuck"), 64, 200*time.Millisecond)
	took := time.Since(start)
	unstall.Do(func() { close(sh.unstall) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request whose write stuck: %v, want its deadline exceeded", err)
	}
	if took > 4*time.Second {
		t.Fatalf("the request returned after %s, its deadline was 200ms: it waited for its stuck write", took)
	}
	if _, err := m.Call(ctx, server.ID(), echo, []byte("after"), 64, 10*time.Second); err != nil {
		t.Fatalf("the request after the stuck one: %v", err)
	}
	if got := server.count(rpc.ProtoMux); got != 2 {
		t.Errorf("%d sessions, want 2 (the stuck one is left for a new one)", got)
	}
}

// TestMuxFallsBackWhenNegotiatedLazily: a peer the peerstore says speaks
// the mux, but does not, gets its requests on streams of their own (the
// lazily negotiated session is reset, not refused with "na").
func TestMuxFallsBackWhenNegotiatedLazily(t *testing.T) {
	client, server := pair(t)
	var calls atomic.Int64
	servePlainEcho(server, &calls)
	if err := client.Peerstore().AddProtocols(server.ID(), rpc.ProtoMux); err != nil {
		t.Fatal(err)
	}
	m := rpc.NewMux(client, nil, 15*time.Second, nil)
	defer m.Close()
	for i := range 5 {
		if _, err := m.Call(context.Background(), server.ID(), echo, []byte{byte(i)}, 16, 5*time.Second); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := calls.Load(); got != 5 {
		t.Errorf("handler ran %d times for 5 requests", got)
	}
}
