package node

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/rpc"
)

// TestSubmitOutlivesAReplicaThatStopsAnswering: of the two replicas a
// submission picks (real libp2p hosts), one stores the workflow record
// and then never answers the first pack's guard copy (cut off between
// the two). The client still gets its answer on the client stream, with
// the workflow recorded: the guard copies are asked all at once within
// replicateTimeout. Asked one after the other within the stream timeout,
// the silent replica would hold the submission past the client stream's
// deadline and the client would get a reset stream. The silent replica
// stays named as a guardian of the first pack (it may keep a copy).
func TestSubmitOutlivesAReplicaThatStopsAnswering(t *testing.T) {
	n, stop, _ := runInternalNode(t, t.TempDir(), "")
	defer stop()
	stall := make(chan struct{})
	defer close(stall)
	replica := func(zone string, silentGuard bool) host.Host {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		ok := rpc.MustCBOR(api.GuardReply{OK: true})
		rpc.Serve(h, nil, api.OriginReplica{}.Protocol(), api.MaxControlFrame, time.Minute, func(context.Context, peer.ID, []byte) []byte { return ok })
		rpc.Serve(h, nil, api.GuardStore{}.Protocol(), 1<<20, time.Minute, func(ctx context.Context, _ peer.ID, _ []byte) []byte {
			if silentGuard {
				select {
				case <-stall:
				case <-ctx.Done():
				}
				return nil
			}
			return ok
		})
		var addrs []string
		for _, a := range h.Addrs() {
			addrs = append(addrs, a.String())
		}
		n.pres.observe(h.ID(), announcement{ID: h.ID().String(), Addrs: addrs, Zone: zone, Seq: 1, Boot: 1})
		return h
	}
	silent, answering := replica("z-silent", true), replica("z-answering", false)

	client, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.Peerstore().AddAddrs(n.host.ID(), n.host.Addrs(), time.Hour)
	var resp api.ClientResponse
	req := api.ClientRequest{Op: api.OpSubmit, Source: "NobodyOffersThis", FileName: "t"}
	if err := rpc.CallCBOR(context.Background(), client, n.host.ID(), api.ProtoClient, req, &resp, 30*time.Second); err != nil {
		t.Fatalf("submit with a replica that stops answering: %v, want an answer", err)
	}
	if resp.Error != "" || resp.Status == nil {
		t.Fatalf("submit answered %+v, want the workflow's status", resp)
	}
	id := resp.Status.ID
	var s *heldSlot
	for _, c := range n.helds.all() {
		if c.view().Record().Key == journal.PackKey(id, submitStep, 0) {
			s = c
		}
	}
	if s == nil {
		t.Fatalf("no first pack held for %s", id)
	}
	named := map[string]bool{}
	for _, g := range s.view().Record().Guardians {
		named[g.ID] = true
	}
	if !named[answering.ID().String()] || !named[silent.ID().String()] {
		t.Fatalf("first pack guardians %v, want both replicas (the silent one may keep a copy)", s.view().Record().Guardians)
	}
}
