package coreruntime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-varint"

	"github.com/bedwe/bedwe/node/sim"
)

// ProtocolID is the core's message stream: one varint-length-delimited
// frame per message, each a tagged CBOR message (wire.go). A peer keeps
// one outbound stream to each other peer; streams carry one direction.
const ProtocolID protocol.ID = "/bedwe/core/0.1.0"

// Bounds on the writer: a dial or a write that takes longer fails, and
// its message is dropped (the protocol resends).
const (
	dialTimeout  = 2 * time.Second
	writeTimeout = 2 * time.Second
)

// encodeFrame encodes m with its length prefix.
func encodeFrame(m sim.Message) ([]byte, error) {
	body, err := encodeMessage(m)
	if err != nil {
		return nil, err
	}
	return append(varint.ToUvarint(uint64(len(body))), body...), nil
}

// outbox is one peer's outbound queue, drained by its own writer.
type outbox struct {
	to peer.ID
	q  chan []byte
}

// write drains o onto one stream, opened on the first frame and opened
// again after an error; a frame that cannot be written is dropped.
func (r *Runtime) write(o *outbox) {
	defer r.wg.Done()
	var s network.Stream
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	for {
		var frame []byte
		select {
		case frame = <-o.q:
		case <-r.ctx.Done():
			return
		}
		if s == nil {
			ctx, cancel := context.WithTimeout(r.ctx, dialTimeout)
			var err error
			s, err = r.cfg.Host.NewStream(ctx, o.to, ProtocolID)
			cancel()
			if err != nil {
				r.log.Debug("open stream: message dropped", "to", o.to, "err", err)
				s = nil
				continue
			}
		}
		err := s.SetWriteDeadline(r.clock.Now().Add(writeTimeout))
		if err == nil {
			_, err = s.Write(frame)
		}
		if err != nil {
			r.log.Debug("write: message dropped, stream reset", "to", o.to, "err", err)
			s.Reset()
			s = nil
		}
	}
}

// inStream is an accepted stream, tracked so Close can reset it.
type inStream struct{ s network.Stream }

// handleStream reads frames from a mesh peer and posts them to the loop.
// A frame that is too large or does not decode resets the stream (the
// peer opens another on its next message).
func (r *Runtime) handleStream(s network.Stream) {
	from, ok := r.index[s.Conn().RemotePeer()]
	if !ok || from == r.self {
		r.log.Debug("stream from outside the mesh", "peer", s.Conn().RemotePeer())
		s.Reset()
		return
	}
	in := &inStream{s}
	r.inMu.Lock()
	if r.inClosed {
		r.inMu.Unlock()
		s.Reset()
		return
	}
	r.inbound[in] = true
	r.inMu.Unlock()
	defer func() {
		r.inMu.Lock()
		delete(r.inbound, in)
		r.inMu.Unlock()
	}()

	br := bufio.NewReader(s)
	for {
		m, err := readFrame(br, len(r.cfg.Peers))
		if err != nil {
			if errors.Is(err, io.EOF) {
				s.Close()
				return
			}
			r.log.Debug("inbound stream reset", "from", int(from), "err", err)
			s.Reset()
			return
		}
		if !r.post(func() { r.node.Receive(r, from, m) }) {
			s.Reset()
			return
		}
	}
}

// readFrame reads and decodes one frame; io.EOF only at a frame boundary.
func readFrame(br *bufio.Reader, nodes int) (sim.Message, error) {
	n, err := varint.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("read frame length: %w", err)
	}
	if n == 0 || n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read frame: %w", err)
	}
	return decodeMessage(buf, nodes)
}
