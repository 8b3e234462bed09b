package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

// A holder beats to a guardian on api.ProtoBeatHeld, whose frames say what
// it holds and let go of (node/guard G17), where the guardian speaks it;
// on api.ProtoBeatKeys, whose frames list the held work, where it speaks
// only that; and on api.ProtoBeat with one-byte frames where it speaks
// neither: a guardian from
// before G17 reads frames of at most 16 bytes and resets a stream that
// carries a list. Real libp2p hosts; the guardians record what they read.
func TestBeatFramesListKeysOnlyWhereSpoken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		speaks []string
		want   byte
	}{
		{"guardian from before G17", []string{api.ProtoBeat}, beatPlain},
		{"guardian with G17", []string{api.ProtoBeat, api.ProtoBeatKeys}, beatKeys},
		{"guardian that reads let-go words", []string{api.ProtoBeat, api.ProtoBeatKeys, api.ProtoBeatHeld}, beatHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := choiceNode(t, 0)
			n.helds = newHeldTable()
			g, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			var mu sync.Mutex
			var frames [][]byte
			var protos []protocol.ID
			got := make(chan struct{}, 16)
			for _, p := range tc.speaks {
				g.SetStreamHandler(protocol.ID(p), func(s network.Stream) {
					defer s.Reset()
					for {
						f, err := pack.ReadFrame(s, 16) // as a guardian before G17 reads
						if err != nil {
							return
						}
						mu.Lock()
						frames, protos = append(frames, f), append(protos, s.Protocol())
						mu.Unlock()
						got <- struct{}{}
					}
				})
			}
			n.host.Peerstore().AddAddrs(g.ID(), g.Addrs(), peerstore.PermanentAddrTTL)
			ctx, cancel := context.WithCancel(n.ctx)
			defer cancel()
			c := &beatConn{id: g.ID(), done: closedChan}
			n.startBeating(ctx, c)
			for range 2 {
				select {
				case <-got:
				case <-time.After(10 * time.Second):
					t.Fatalf("the guardian got %d beat frames in 10 s, want 2", len(frames))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for i, f := range frames {
				if len(f) == 0 || f[0] != tc.want {
					t.Errorf("frame %d on %s is %x, want it to start with %d", i, protos[i], f, tc.want)
				}
			}
			if want := protocol.ID(tc.speaks[len(tc.speaks)-1]); protos[0] != want {
				t.Errorf("beats on %s, want %s", protos[0], want)
			}
		})
	}
}
