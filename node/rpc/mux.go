package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multistream"
	"github.com/multiformats/go-varint"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

// ProtoMux carries many requests of the other protocols over one
// long-lived stream per pair of peers (Mux).
const ProtoMux = "/bedwe/rpc/1.0.0"

// Mux sends requests to a peer over one long-lived stream instead of a
// stream per request, and serves the requests peers send it that way
// (opening, negotiating and closing a stream per request costs a fifth of
// a node's CPU on a hop, in frames, TLS records and syscalls).
// Each request has its own deadline and answer as with Call; what changes
// is the framing:
//
//	request:  frame(uvarint id, uvarint len(protocol), protocol, payload)
//	response: frame(uvarint id, status byte, payload)
//
// A peer that does not speak ProtoMux (older, or a test's bare host) is
// called with Call, one stream per request. Payloads over MaxMuxPayload
// take their own stream too, so a large pack never holds up the small
// requests behind it. A session unused for Linger is closed; a broken one
// fails the requests in flight (their outcome is unknown, as with a reset
// stream) and the next request opens another.
type Mux struct {
	h host.Host
	// clock times sessions (idle linger, the last answer read), the
	// peers called plain and the streams' deadlines.
	clock  clockwork.Clock
	linger time.Duration
	// Admit, if set, is asked for every request a peer sends on a session
	// (the node's membership check and hand-off rate limit); false
	// refuses it as a reset stream would.
	admit func(proto string, from peer.ID) bool

	mu       sync.Mutex
	handlers map[string]muxHandler
	sessions map[peer.ID]*muxSession
	plain    map[peer.ID]time.Time // peers that refused ProtoMux, until then
	closed   bool
}

// MaxMuxPayload is the largest request a session carries; a larger one
// takes its own stream. Answers may be as large as on a stream. A pack
// grows by its trace along a sequence (~40 KiB after 200 steps), and its
// hand-off and guard copy should still share the session; a frame this
// large holds the session's later frames up no longer than the
// connection's bytes would anyway.
const MaxMuxPayload = 1 << 20

// muxMaxConcurrent bounds the requests of one session a server runs at
// once; more wait unread (the sender's flow control holds them back).
const muxMaxConcurrent = 64

// muxOpenTimeout bounds opening a session (a dial included), whatever the
// deadline of the request that asked for it.
const muxOpenTimeout = 15 * time.Second

// muxWriteTimeout bounds writing one frame on a session: a request's own
// deadline is not used, so a caller that gives up never cuts a frame in
// half under the requests around it. The caller does not wait for it
// past its own deadline, though (muxSession.send).
const muxWriteTimeout = 10 * time.Second

// plainFor is how long a peer that refused ProtoMux is called with a
// stream per request before it is asked again.
const plainFor = time.Minute

type muxHandler struct {
	maxReq  int
	timeout time.Duration
	fn      HandlerFunc
}

// Response status bytes.
const (
	muxOK    byte = 0
	muxReset byte = 1 // refused, unknown protocol or no answer: as a reset stream
)

// errNotSent: the session closed before the request was written, so it
// can go on another.
var errNotSent = errors.New("session closed before the request was sent")

// NewMux serves ProtoMux on h (register it before peers connect) and
// returns the mux for h's requests, timed on clock (nil: the wall clock).
// admit may be nil. Close stops it.
func NewMux(h host.Host, clock clockwork.Clock, linger time.Duration, admit func(proto string, from peer.ID) bool) *Mux {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	m := &Mux{h: h, clock: clock, linger: linger, admit: admit, handlers: map[string]muxHandler{},
		sessions: map[peer.ID]*muxSession{}, plain: map[peer.ID]time.Time{}}
	h.SetStreamHandler(protocol.ID(ProtoMux), m.serveSession)
	return m
}

// Serve registers fn for proto, both on a stream of its own (Serve) and on
// sessions.
func (m *Mux) Serve(proto string, maxReq int, timeout time.Duration, fn HandlerFunc) {
	m.mu.Lock()
	m.handlers[proto] = muxHandler{maxReq: maxReq, timeout: timeout, fn: fn}
	m.mu.Unlock()
	Serve(m.h, m.clock, proto, maxReq, timeout, fn)
}

// longestTimeout is the longest deadline of the served protocols: a
// session with a request in flight is not given up before it.
func (m *Mux) longestTimeout() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for _, h := range m.handlers {
		d = max(d, h.timeout)
	}
	return d
}

// Close ends every session.
func (m *Mux) Close() {
	m.mu.Lock()
	m.closed = true
	ss := make([]*muxSession, 0, len(m.sessions))
	for _, s := range m.sessions {
		ss = append(ss, s)
	}
	m.mu.Unlock()
	for _, s := range ss {
		s.fail(errors.New("rpc mux closed"))
	}
}

// Call sends payload to p on proto and returns the answer, as Call does:
// on the session with p when p speaks ProtoMux, else on a stream of its
// own.
func (m *Mux) Call(ctx context.Context, p peer.ID, proto string, payload []byte, maxResp int, timeout time.Duration) ([]byte, error) {
	if len(payload) > MaxMuxPayload || m.callsPlain(p) {
		return Call(ctx, m.h, p, proto, payload, maxResp, timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		s, err := m.session(ctx, p)
		if err == nil {
			var resp []byte
			resp, err = s.call(ctx, proto, payload, maxResp)
			if errors.Is(err, errNotSent) && ctx.Err() == nil {
				continue // the session closed (idle or broken) before this request was sent
			}
			if err == nil {
				return resp, nil
			}
		}
		if errors.Is(err, multistream.ErrNotSupported[protocol.ID]{}) {
			// Nothing reached a handler: the peer refused the protocol.
			m.mu.Lock()
			m.plain[p] = m.clock.Now().Add(plainFor)
			m.mu.Unlock()
			return Call(ctx, m.h, p, proto, payload, maxResp, timeout)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s to %s: no answer within %s: %w", proto, ShortID(p), timeout, ctx.Err())
		}
		return nil, fmt.Errorf("%s to %s on %s: %w", proto, ShortID(p), ProtoMux, err)
	}
}

// CallCBOR is Call with CBOR-encoded request and response values.
func (m *Mux) CallCBOR(ctx context.Context, p peer.ID, proto string, req, resp any, timeout time.Duration) error {
	payload, err := Enc.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", proto, err)
	}
	raw, err := m.Call(ctx, p, proto, payload, api.MaxControlFrame, timeout)
	if err != nil {
		return err
	}
	if err := Dec.Unmarshal(raw, resp); err != nil {
		return fmt.Errorf("decode %s answer from %s: %w", proto, ShortID(p), err)
	}
	return nil
}

func (m *Mux) callsPlain(p peer.ID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.plain[p]
	if ok && m.clock.Now().After(until) {
		delete(m.plain, p)
		return false
	}
	return ok
}

// session returns the open session with p, opening one if there is none;
// requests that find it opening wait for it (one stream, not one each).
func (m *Mux) session(ctx context.Context, p peer.ID) (*muxSession, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("rpc mux closed")
	}
	s := m.sessions[p]
	if s != nil && s.closedConn() {
		delete(m.sessions, p)
		m.mu.Unlock()
		s.fail(fmt.Errorf("connection to %s closed", ShortID(p)))
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, errors.New("rpc mux closed")
		}
		s = m.sessions[p]
	}
	if s == nil {
		s = &muxSession{m: m, peer: p, ready: make(chan struct{}), wsem: make(chan struct{}, 1), pending: map[uint64]chan muxAnswer{}, lastUsed: m.clock.Now()}
		m.sessions[p] = s
		m.mu.Unlock()
		// The session is every waiting request's, not only this one's:
		// its open has a bound of its own, so a short deadline here does
		// not fail a longer request that waits for it.
		openCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), muxOpenTimeout)
		go func() {
			defer cancel()
			s.open(openCtx)
		}()
	} else {
		m.mu.Unlock()
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.openErr != nil {
		return nil, s.openErr
	}
	return s, nil
}

// closedConn reports whether the session's stream is open on a connection
// that has closed since.
func (s *muxSession) closedConn() bool {
	select {
	case <-s.ready:
	default:
		return false // opening
	}
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	return st != nil && st.Conn().IsClosed()
}

// open opens the session's stream (within muxOpenTimeout, whatever the
// deadlines of the requests waiting for it) and starts its loops, or
// drops the session if it cannot.
func (s *muxSession) open(ctx context.Context) {
	defer close(s.ready)
	st, err := s.m.h.NewStream(network.WithAllowLimitedConn(ctx, ProtoMux), s.peer, protocol.ID(ProtoMux))
	s.mu.Lock()
	if err != nil {
		s.openErr, s.err = err, errNotSent
	} else if s.err != nil {
		resetStream(st) // the mux closed while it opened
		s.openErr = s.err
		err = s.err
	}
	s.st = st
	s.mu.Unlock()
	if err != nil {
		s.m.drop(s)
		return
	}
	go s.readLoop()
	go s.idleLoop()
}

func (m *Mux) drop(s *muxSession) {
	m.mu.Lock()
	if m.sessions[s.peer] == s {
		delete(m.sessions, s.peer)
	}
	m.mu.Unlock()
}

// muxSession is the calling side of one session.
type muxSession struct {
	m    *Mux
	peer peer.ID
	// ready is closed once the stream is open (st set) or could not be
	// (openErr set); neither changes after.
	ready   chan struct{}
	st      network.Stream
	openErr error

	wsem chan struct{} // one request frame at a time (a slot, so a caller can give up waiting)

	mu       sync.Mutex
	next     uint64
	pending  map[uint64]chan muxAnswer
	lastUsed time.Time
	lastRead time.Time // the last answer read
	retired  bool      // out of use; closes once nothing is in flight
	err      error     // set once broken or closed
}

type muxAnswer struct {
	payload []byte
	err     error
}

func (s *muxSession) call(ctx context.Context, proto string, payload []byte, maxResp int) ([]byte, error) {
	ch := make(chan muxAnswer, 1)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, errNotSent
	}
	s.next++
	id := s.next
	s.pending[id] = ch
	s.lastUsed = s.m.clock.Now()
	s.mu.Unlock()
	defer s.forget(id)

	frame := pack.FrameBytes(varint.ToUvarint(id), varint.ToUvarint(uint64(len(proto))), []byte(proto), payload)
	select {
	case s.wsem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err() // nothing sent
	}
	if err := ctx.Err(); err != nil {
		<-s.wsem
		return nil, err
	}
	sent := s.m.clock.Now()
	wrote := make(chan error, 1)
	go func() { wrote <- s.send(frame, sent, ch) }()
	select {
	case err := <-wrote:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		// The frame is still being written: the connection is stuck (a
		// link cut while the connection looks open). The write goes on
		// under the session's own timeout, and this caller gives up at
		// its deadline as it would with a stream of its own: waiting for
		// a stuck write would hold a submission past its client's
		// deadline. Later requests open
		// another stream, as below for a silent one.
		s.retire()
		return nil, ctx.Err()
	}
	select {
	case a := <-ch:
		if a.err == nil && len(a.payload) > maxResp {
			return nil, fmt.Errorf("read answer: %w: %d bytes, over the maximum of %d", pack.ErrFrameTooLarge, len(a.payload), maxResp)
		}
		return a.payload, a.err
	case <-ctx.Done():
		s.mu.Lock()
		silent := s.lastRead.Before(sent)
		s.mu.Unlock()
		if silent {
			// Nothing came back on the session since this request went
			// out: its connection may be dead while the peer is reachable
			// on another (a flapping link). The next request opens a new
			// stream, on the peer's best connection, as a stream per
			// request would; the requests still in flight here keep
			// their own deadlines (a slow handler is not a dead link).
			s.retire()
		}
		return nil, ctx.Err()
	}
}

// send writes one request frame, holding the write slot, and releases the
// slot. A failed write breaks the session (a frame may be half written, or
// the stream was stuck for the whole write timeout), unless the peer
// refused the protocol before anything reached a handler; the error is
// returned either way. ch is the request's answer channel: a session that
// failed first has put its error there.
func (s *muxSession) send(frame []byte, sent time.Time, ch chan muxAnswer) error {
	_ = s.st.SetWriteDeadline(sent.Add(muxWriteTimeout))
	n, err := s.st.Write(frame)
	<-s.wsem
	if err == nil {
		return nil
	}
	select {
	case a := <-ch:
		if a.err != nil {
			// The session failed first: the peer refused the protocol
			// (Call falls back) or the stream broke.
			return a.err
		}
	default:
	}
	err = fmt.Errorf("send on %s session: %w", ProtoMux, notSupported(err))
	if n == 0 && errors.Is(err, multistream.ErrNotSupported[protocol.ID]{}) {
		return err // the peer refused the protocol: nothing reached a handler
	}
	s.fail(err)
	return err
}

func (s *muxSession) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.lastUsed = s.m.clock.Now()
	s.closeIfDrained()
}

// retire takes the session out of use: later requests open another, and
// it closes once the requests in flight on it ended.
func (s *muxSession) retire() {
	s.m.drop(s)
	s.mu.Lock()
	s.retired = true
	s.closeIfDrained()
}

// closeIfDrained closes a retired session with nothing in flight. It is
// called with s.mu held and releases it.
func (s *muxSession) closeIfDrained() {
	drained := s.retired && len(s.pending) == 0 && s.err == nil
	if drained {
		s.err = errors.New(ProtoMux + " session retired")
	}
	st := s.st
	s.mu.Unlock()
	if drained {
		closeStream(st)
	}
}

// fail breaks the session: every request in flight gets err, and the next
// request opens another session.
func (s *muxSession) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	pending := s.pending
	s.pending = map[uint64]chan muxAnswer{}
	st := s.st
	s.mu.Unlock()
	s.m.drop(s)
	if st != nil {
		resetStream(st)
	}
	for _, ch := range pending {
		ch <- muxAnswer{err: err}
	}
}

func (s *muxSession) readLoop() {
	r := bufio.NewReader(s.st)
	for {
		frame, err := pack.ReadFrame(r, api.MaxControlFrame+varint.MaxLenUvarint63+1)
		if err != nil {
			err = notSupported(err)
			switch {
			case errors.Is(err, multistream.ErrNotSupported[protocol.ID]{}):
				// Kept as it is: Call falls back to a stream per request.
			case errors.Is(err, io.EOF):
				err = fmt.Errorf("%s session closed by %s: %w", ProtoMux, ShortID(s.peer), io.ErrUnexpectedEOF)
			default:
				err = fmt.Errorf("read on %s session: %w", ProtoMux, err)
			}
			s.fail(err)
			return
		}
		id, n, err := varint.FromUvarint(frame)
		if err != nil || n >= len(frame) {
			s.fail(fmt.Errorf("bad answer frame on %s session from %s", ProtoMux, ShortID(s.peer)))
			return
		}
		status, payload := frame[n], frame[n+1:]
		a := muxAnswer{payload: payload}
		if status != muxOK {
			a = muxAnswer{err: fmt.Errorf("refused or reset by %s", ShortID(s.peer))}
		}
		s.mu.Lock()
		ch := s.pending[id]
		delete(s.pending, id)
		s.lastRead = s.m.clock.Now()
		s.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
}

// idleLoop closes the session once no request used it for the mux's
// linger.
func (s *muxSession) idleLoop() {
	t := s.m.clock.NewTicker(max(s.m.linger/3, time.Millisecond))
	defer t.Stop()
	for range t.Chan() {
		s.mu.Lock()
		idle := len(s.pending) == 0 && s.m.clock.Since(s.lastUsed) >= s.m.linger
		broken := s.err != nil
		if idle && !broken {
			s.err = errors.New(ProtoMux + " session closed after it went idle")
		}
		s.mu.Unlock()
		if broken {
			return
		}
		if idle {
			s.m.drop(s)
			closeStream(s.st)
			return
		}
	}
}

// notSupported returns err as multistream's ErrNotSupported when the peer
// reset the stream for a failed protocol negotiation: a lazily negotiated
// stream (the peerstore said the peer speaks ProtoMux) that it refused.
// That reset is sent only while negotiating, so no handler saw a request.
func notSupported(err error) error {
	var se *network.StreamError
	if errors.As(err, &se) && se.Remote && se.ErrorCode == network.StreamProtocolNegotiationFailed {
		return fmt.Errorf("%w: %w", multistream.ErrNotSupported[protocol.ID]{Protos: []protocol.ID{ProtoMux}}, err)
	}
	return err
}

// serveSession answers the requests of one session, each in its own
// goroutine under its handler's deadline, at most muxMaxConcurrent at once.
func (m *Mux) serveSession(st network.Stream) {
	from := st.Conn().RemotePeer()
	r := bufio.NewReader(st)
	var wmu sync.Mutex
	answer := func(id uint64, status byte, payload []byte) {
		frame := pack.FrameBytes(varint.ToUvarint(id), []byte{status}, payload)
		wmu.Lock()
		defer wmu.Unlock()
		_ = st.SetWriteDeadline(m.clock.Now().Add(10 * time.Second))
		if _, err := st.Write(frame); err != nil {
			resetStream(st)
		}
	}
	slots := make(chan struct{}, muxMaxConcurrent)
	var running sync.WaitGroup
	defer func() {
		running.Wait()
		closeStream(st)
	}()
	for {
		// A session the caller no longer uses is closed by it (linger);
		// one that sends nothing for far longer is given up here.
		_ = st.SetReadDeadline(m.clock.Now().Add(4*m.linger + m.longestTimeout() + time.Minute))
		frame, err := pack.ReadFrame(r, MaxMuxPayload+2*varint.MaxLenUvarint63+256)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				resetStream(st)
			}
			return
		}
		id, n, err := varint.FromUvarint(frame)
		if err != nil {
			resetStream(st)
			return
		}
		plen, k, err := varint.FromUvarint(frame[n:])
		if err != nil || uint64(len(frame)-n-k) < plen {
			resetStream(st)
			return
		}
		proto := string(frame[n+k : n+k+int(plen)])
		req := frame[n+k+int(plen):]
		m.mu.Lock()
		h, ok := m.handlers[proto]
		m.mu.Unlock()
		if !ok || len(req) > h.maxReq || (m.admit != nil && !m.admit(proto, from)) {
			answer(id, muxReset, nil)
			continue
		}
		slots <- struct{}{}
		running.Add(1)
		go func() {
			defer func() { <-slots; running.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
			defer cancel()
			resp := h.fn(ctx, from, req)
			if resp == nil || len(resp) > api.MaxControlFrame {
				answer(id, muxReset, nil)
				return
			}
			answer(id, muxOK, resp)
		}()
	}
}

// closeStream and resetStream end a session's stream without waiting: on
// a connection stuck by a cut link (it looks open while TCP backs off),
// yamux makes a close or a reset wait for room in the connection's send
// queue with no deadline, and neither a caller nor a server's answer may
// wait for that.
func closeStream(st network.Stream) { go st.Close() }

func resetStream(st network.Stream) { go st.Reset() }
