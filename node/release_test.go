package node_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
)

// TestSuccessorReleasesGuardiansOnce is held H6 at a real node: the
// receiver of a hand-off names in its ack the guardians of the step before
// that its settle released (api.Ack.Released), and a holder whose
// successor named every guardian does not release them a second time
// (otherwise every hop would send each guardian two releases: the
// successor's and the holder's own, two streams and a journal lookup each
// for nothing).
//
// A raw libp2p host h is the sender and the only guardian of the node's
// step S1 (and the origin); it records every release it gets. The node
// runs S1, hands S2 to itself (the only peer offering it), whose settle
// releases h; once the node holds nothing (bedwe_held_packs 0, scraped
// from its /metrics: the holder's own release, if any, comes before its
// record is dropped) h must have been released exactly once for S1, by
// the successor.
func TestSuccessorReleasesGuardiansOnce(t *testing.T) {
	nf, _, evFile := recordingNodeWith(t, "", func(cfg *node.Config) { cfg.HTTP = "127.0.0.1:0" })
	h, id := rawHost(t, nf)
	releases, _ := serveRecording[api.GuardRelease](h, api.GuardRelease{}.Protocol(), 0)
	rpc.Serve(h, nil, api.ProtoOrigin, api.MaxControlFrame, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
		return rpc.MustCBOR(api.Ack{OK: true})
	})
	prev := pack.Settle{Kind: pack.SettleGuard, Key: "wf-test|prev", Attempt: 0, Peers: []pack.Peer{peerRef(h)}}
	raw := editPack(t, packFor(t, "S1 S2"), func(p *pack.Pack) {
		p.Origin = []pack.Peer{peerRef(h)}
		p.Sender = peerRef(h)
		p.Settle = []pack.Settle{prev}
	})
	ack, err := handoff(t, h, id, raw)
	if err != nil || !ack.OK {
		t.Fatalf("hand-off: %v %+v, want OK", err, ack)
	}
	if !slices.Equal(ack.Released, []string{h.ID().String()}) {
		t.Fatalf("ack names released %v, want the guardian it released, %s", ack.Released, h.ID())
	}
	waitEvents(t, evFile, events.HandedOn, "0", 1)
	eventually(t, 30*time.Second, "the node holds nothing", func() error {
		if held := scrape(t, nf.HTTP)["bedwe_held_packs"]; held != 0 {
			return fmt.Errorf("%v packs held", held)
		}
		return nil
	})
	s1 := journal.StepKey("wf-test", "0")
	var got []api.GuardRelease
	for {
		select {
		case m := <-releases:
			if m.Key == s1 {
				got = append(got, m)
			}
			continue
		default:
		}
		break
	}
	if len(got) != 1 || got[0].By != nf.PeerID {
		t.Fatalf("releases of S1's guardian: %+v, want exactly one, by the successor %s", got, nf.PeerID)
	}
}
