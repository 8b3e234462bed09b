package rpc_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bedwe/bedwe/internal/cputime"
	"github.com/bedwe/bedwe/node/rpc"
)

// benchPayloads are a control message (a release, a status question) and
// a pack of the size a 200-step sequence hands on (docs/benchmarks.md).
var benchPayloads = []struct {
	name string
	size int
}{{"100B", 100}, {"10KiB", 10 << 10}}

// BenchmarkMuxCall is one request and its answer between two real libp2p
// hosts of this process (TCP on loopback, TLS, yamux), on the shared
// session the node's reliability requests use. cpu-ns/op is the CPU of
// both ends: the floor under what a hop's requests cost.
func BenchmarkMuxCall(b *testing.B) {
	for _, p := range benchPayloads {
		b.Run(p.name, func(b *testing.B) {
			client, server := pair(b)
			var calls atomic.Int64
			serveEcho(rpc.NewMux(server, nil, 15*time.Second, nil), &calls)
			m := rpc.NewMux(client, nil, 15*time.Second, nil)
			b.Cleanup(m.Close)
			benchCalls(b, p.size, func(req []byte) ([]byte, error) {
				return m.Call(context.Background(), server.ID(), echo, req, 1<<20, 10*time.Second)
			})
		})
	}
}

// BenchmarkStreamCall is BenchmarkMuxCall with a stream of its own per
// request (what a peer without the mux gets): the stream's opening and
// protocol negotiation on top of the request.
func BenchmarkStreamCall(b *testing.B) {
	for _, p := range benchPayloads {
		b.Run(p.name, func(b *testing.B) {
			client, server := pair(b)
			var calls atomic.Int64
			servePlainEcho(server, &calls)
			benchCalls(b, p.size, func(req []byte) ([]byte, error) {
				return rpc.Call(context.Background(), client, server.ID(), echo, req, 1<<20, 10*time.Second)
			})
		})
	}
}

// benchCalls runs call one request at a time with a payload of size bytes
// and checks every answer carries the request.
func benchCalls(b *testing.B, size int, call func(req []byte) ([]byte, error)) {
	req := bytes.Repeat([]byte("x"), size)
	if _, err := call(req); err != nil { // the session or connection is made outside the loop
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	start := cputime.Used()
	for b.Loop() {
		resp, err := call(req)
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.HasSuffix(resp, req) {
			b.Fatalf("answer of %d bytes does not carry the request", len(resp))
		}
	}
	cputime.ReportPerOp(b, start)
}
