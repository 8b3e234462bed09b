package node

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/internal/p2ptest"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// TestRideComesBeforeEveryRelease is the order settleRiding keeps, on a
// real node and real peers: the receiver of a hand-off whose step before
// has two guardians (the sender a, the sender's backup x) takes x as its
// backup and sends it the copy with x's release (api.GuardStoreRelease);
// a is released only after x answered, so no guardian of the step before
// is released before the copy of the step taken is stored (I3). When x
// never answers, nothing is released until another peer, k, has stored
// the copy; x stays named (it may hold the copy) and the settle goes on
// without the ride. Every request the peers get is numbered in arrival
// order.
func TestRideComesBeforeEveryRelease(t *testing.T) {
	for _, tc := range []struct {
		name     string
		xAnswers bool
	}{{"answered", true}, {"unanswered", false}} {
		t.Run(tc.name, func(t *testing.T) {
			svc := filepath.Join(t.TempDir(), "services.yaml")
			if err := os.WriteFile(svc, []byte("version: 1\npatterns:\n  - {match: \"S*\", kind: echo}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			n, stop, _ := runInternalNode(t, t.TempDir(), svc)
			defer stop()

			var mu sync.Mutex
			var got []string // "peer request", in arrival order
			// The receiver's own copy must be durable before the ride
			// releases anything (I3, I4): the ride follows its commit,
			// which is why a hand-over's floor holds three commits in a
			// row (testnet/bench Floor.HandOver).
			var heldKeyOfPack string
			rideSeen, journaledAtRide := false, false
			serve := func(h host.Host, name, proto string, answer bool) {
				rpc.Serve(h, nil, proto, api.MaxControlFrame, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
					mu.Lock()
					got = append(got, name+" "+proto)
					if proto == api.ProtoGuardStoreRelease && !rideSeen { // the first ride
						_, ok, err := n.journal.Get(journal.BucketPacks, heldKeyOfPack)
						rideSeen, journaledAtRide = true, ok && err == nil
					}
					mu.Unlock()
					if !answer {
						return nil // no answer: the stream is reset
					}
					return rpc.MustCBOR(api.GuardReply{OK: true})
				})
			}
			a, x, k := p2ptest.Host(t), p2ptest.Host(t), p2ptest.Host(t)
			serve(a, "a", api.ProtoGuardRelease, true)
			serve(x, "x", api.ProtoGuardStoreRelease, tc.xAnswers)
			serve(k, "k", api.ProtoGuardStore, true)
			ref := func(h host.Host, zone string) pack.Peer {
				p := pack.Peer{ID: h.ID().String(), Zone: zone}
				for _, addr := range h.Addrs() {
					p.Addrs = append(p.Addrs, addr.String())
				}
				return p
			}
			aRef, xRef, kRef := ref(a, "z1"), ref(x, "z2"), ref(k, "z3")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The receiver sends a copy with a release only to a peer that
			// announced the protocol: identify, after the connection.
			identified, err := n.host.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
			if err != nil {
				t.Fatal(err)
			}
			defer identified.Close()
			for i, g := range []struct {
				h host.Host
				p pack.Peer
			}{{a, aRef}, {x, xRef}, {k, kRef}} {
				if err := g.h.Connect(ctx, peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()}); err != nil {
					t.Fatal(err)
				}
				n.pres.observe(g.h.ID(), announcement{ID: g.p.ID, Addrs: g.p.Addrs, Zone: g.p.Zone, Boot: int64(i + 1), Seq: 1})
			}
			for !n.speaks(x.ID(), api.ProtoGuardStoreRelease) {
				select {
				case <-ctx.Done():
					t.Fatal("the node never learnt that x speaks " + api.ProtoGuardStoreRelease)
				case <-identified.Out():
				}
			}

			w, err := grammar.Parse("t", []byte("S1"))
			if err != nil {
				t.Fatal(err)
			}
			grammar.AssignPaths(w)
			p := &pack.Pack{WorkflowID: "wf-ride", Workflow: w, Input: []byte("null"), Origin: []pack.Peer{aRef}, Sender: aRef,
				Settle: []pack.Settle{{Kind: pack.SettleGuard, Key: "wf-ride|before", Peers: []pack.Peer{aRef, xRef}}}}
			raw, err := pack.Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			heldKeyOfPack = heldKey(p)
			mu.Unlock()
			ack := n.accept(ctx, p, raw)
			if !ack.OK {
				t.Fatalf("hand-off refused: %+v", ack)
			}
			mu.Lock()
			order, journaled := slices.Clone(got), journaledAtRide
			mu.Unlock()
			if !journaled {
				t.Errorf("x was sent the copy with its release before the receiver had journaled the step")
			}
			t.Logf("requests in arrival order: %q", order)
			at := func(what string) int { return slices.Index(order, what) }
			ride, released, stored := at("x "+api.ProtoGuardStoreRelease), at("a "+api.ProtoGuardRelease), at("k "+api.ProtoGuardStore)
			if ride < 0 || released < 0 {
				t.Fatalf("want x sent the copy with its release and a released: %q", order)
			}
			if released < ride {
				t.Errorf("a was released before x was sent the copy: %q", order)
			}
			if tc.xAnswers {
				if stored >= 0 {
					t.Errorf("k was asked for a copy although x took it: %q", order)
				}
				return
			}
			if stored < 0 || released < stored {
				t.Errorf("x never answered, and a was released before another peer stored the copy: %q", order)
			}
			names := func(gs []pack.Peer) []string {
				var out []string
				for _, g := range gs {
					out = append(out, g.ID)
				}
				return out
			}
			rec := n.helds.find(guardKey(p), 0)
			if rec == nil {
				t.Fatal("the node does not hold the step it acknowledged")
			}
			if gs := names(rec.view().Record().Guardians); !slices.Contains(gs, xRef.ID) || !slices.Contains(gs, kRef.ID) {
				t.Errorf("guardians named %v, want x (it may hold the copy) and k", gs)
			}
		})
	}
}
