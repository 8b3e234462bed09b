// Package rpc is bedwe's one-request/one-response stream pattern over
// libp2p: a deadline on every stream, one varint-delimited frame each way,
// CloseWrite after the request, Reset on protocol errors.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

// Dec bounds what a control message may contain.
var Dec, _ = cbor.DecOptions{
	MaxNestedLevels:  64,
	MaxArrayElements: 1 << 20,
	MaxMapPairs:      1 << 20,
}.DecMode()

// Enc encodes deterministically.
var Enc, _ = func() (cbor.EncMode, error) {
	opts := cbor.CoreDetEncOptions()
	opts.Time = cbor.TimeRFC3339Nano // traces need sub-second times
	return opts.EncMode()
}()

// Call opens a stream to p on proto, writes req as one frame, half-closes,
// and reads one response frame into resp. The whole exchange is bounded by
// timeout (and ctx).
func Call(ctx context.Context, h host.Host, p peer.ID, proto string, payload []byte, maxResp int, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := h.NewStream(network.WithAllowLimitedConn(ctx, proto), p, protocol.ID(proto))
	if err != nil {
		return nil, fmt.Errorf("open %s stream to %s: %w", proto, ShortID(p), err)
	}
	deadline, _ := ctx.Deadline()
	_ = s.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := pack.WriteFrame(s, payload); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("send %s to %s: %w", proto, ShortID(p), err)
	}
	// The request is written whole. A half-close that fails does not lose
	// it: over QUIC a peer that read it and answered already may have
	// stopped this side's sending before a slow caller got to close it
	// ("close called for canceled stream", a busy race run of
	// TestMeshOverQUIC). Read the answer all the same; the half-close's
	// error counts only when no answer comes.
	closeErr := s.CloseWrite()
	resp, err := pack.ReadFrame(s, maxResp)
	if err != nil {
		_ = s.Reset()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s to %s: no answer within %s: %w", proto, ShortID(p), timeout, ctx.Err())
		}
		if closeErr != nil {
			return nil, fmt.Errorf("send %s to %s: %w", proto, ShortID(p), closeErr)
		}
		return nil, fmt.Errorf("read %s answer from %s: %w", proto, ShortID(p), err)
	}
	_ = s.Close()
	return resp, nil
}

// CallCBOR is Call with CBOR-encoded request and response values.
func CallCBOR(ctx context.Context, h host.Host, p peer.ID, proto string, req, resp any, timeout time.Duration) error {
	payload, err := Enc.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", proto, err)
	}
	raw, err := Call(ctx, h, p, proto, payload, api.MaxControlFrame, timeout)
	if err != nil {
		return err
	}
	if err := Dec.Unmarshal(raw, resp); err != nil {
		return fmt.Errorf("decode %s answer from %s: %w", proto, ShortID(p), err)
	}
	return nil
}

// HandlerFunc answers one request frame. Returning a nil response resets the
// stream (protocol error).
type HandlerFunc func(ctx context.Context, from peer.ID, req []byte) []byte

// Serve registers fn for proto with a deadline on every stream (timeout
// after it opened, on clock; nil: the wall clock), one request frame of at
// most maxReq bytes and one response frame.
func Serve(h host.Host, clock clockwork.Clock, proto string, maxReq int, timeout time.Duration, fn HandlerFunc) {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	h.SetStreamHandler(protocol.ID(proto), func(s network.Stream) {
		_ = s.SetDeadline(clock.Now().Add(timeout))
		req, err := pack.ReadFrame(s, maxReq)
		if err != nil && !errors.Is(err, io.EOF) {
			_ = s.Reset()
			return
		}
		if err != nil {
			_ = s.Reset()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp := fn(ctx, s.Conn().RemotePeer(), req)
		if resp == nil {
			_ = s.Reset()
			return
		}
		if err := pack.WriteFrame(s, resp); err != nil {
			_ = s.Reset()
			return
		}
		_ = s.Close()
	})
}

// MustCBOR encodes v; the types passed are ours and always encodable.
func MustCBOR(v any) []byte {
	b, err := Enc.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err))
	}
	return b
}

// AckBytes encodes an Ack: OK when code is empty, else a refusal.
func AckBytes(code, msg string) []byte {
	if code == "" {
		return MustCBOR(api.Ack{OK: true})
	}
	return MustCBOR(api.Ack{Code: code, Error: msg})
}

// ShortID abbreviates a peer ID for messages and logs.
func ShortID(p peer.ID) string {
	s := p.String()
	if len(s) > 12 {
		return s[len(s)-8:]
	}
	return s
}

// ShortIDString is ShortID for a peer ID in string form.
func ShortIDString(s string) string {
	if len(s) > 12 {
		return s[len(s)-8:]
	}
	return s
}
