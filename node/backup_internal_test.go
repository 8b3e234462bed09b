package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// guardStoreHost is a real peer in zone that answers guard stores as
// answer says ("ok", "refuse", or "reset": no answer), counting them.
type guardStoreHost struct {
	h      host.Host
	zone   string
	stores atomic.Int32
}

func newGuardStoreHost(t *testing.T, zone, answer string) *guardStoreHost {
	g := &guardStoreHost{h: p2ptest.Host(t), zone: zone}
	g.h.SetStreamHandler(protocol.ID(api.ProtoGuardStore), func(s network.Stream) {
		g.stores.Add(1)
		if _, err := pack.ReadFrame(s, api.MaxControlFrame); err != nil || answer == "reset" {
			_ = s.Reset()
			return
		}
		_ = pack.WriteFrame(s, rpc.MustCBOR(api.GuardReply{OK: answer == "ok"}))
		_ = s.Close()
	})
	return g
}

func (g *guardStoreHost) ref() pack.Peer {
	p := pack.Peer{ID: g.h.ID().String(), Zone: g.zone}
	for _, a := range g.h.Addrs() {
		p.Addrs = append(p.Addrs, a.String())
	}
	return p
}

// The receiver of a hand-off names its backup guardian in its first
// journal write and then asks it to store a copy. A backup that
// refuses is taken off and another peer asked; a backup whose answer never
// came stays named (it may keep a copy) and another peer is
// asked too, so that a copy surely exists besides the sender's (I3). Real
// peers answer the stores; each case counts the stores they received.
func TestHolderBackupRecruitment(t *testing.T) {
	for _, tc := range []struct {
		first       string // how the named backup answers
		wantRefused bool
	}{
		{first: "refuse", wantRefused: true},
		{first: "reset", wantRefused: false},
	} {
		t.Run(tc.first, func(t *testing.T) {
			n, stop, _ := runInternalNode(t, t.TempDir(), "")
			defer stop()
			first := newGuardStoreHost(t, "z1", tc.first)
			keeper := newGuardStoreHost(t, "z2", "ok")
			for i, g := range []*guardStoreHost{first, keeper} {
				n.pres.observe(g.h.ID(), announcement{ID: g.h.ID().String(), Addrs: g.ref().Addrs, Zone: g.zone, Boot: int64(i + 1), Seq: 1})
			}
			w, err := grammar.Parse("t", []byte("S1"))
			if err != nil {
				t.Fatal(err)
			}
			grammar.AssignPaths(w)
			p := &pack.Pack{WorkflowID: "wf-backup", Workflow: w, Input: []byte("null")}
			rec := held.Record{Pack: p, PackRaw: []byte{0xa0}, Key: heldKey(p), GuardKey: guardKey(p), Guardians: []pack.Peer{first.ref()}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			more, refused := n.recruitHolderBackup(ctx, rec, first.ref())
			if refused != tc.wantRefused {
				t.Errorf("refused = %v, want %v", refused, tc.wantRefused)
			}
			if len(more) != 1 || more[0].ID != keeper.h.ID().String() {
				t.Errorf("more = %+v, want the peer that took the copy", more)
			}
			if got := first.stores.Load(); got != 1 {
				t.Errorf("the named backup was asked %d times, want 1", got)
			}
			if got := keeper.stores.Load(); got != 1 {
				t.Errorf("the other peer was asked %d times, want 1", got)
			}
		})
	}
}
