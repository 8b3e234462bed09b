package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/service"
)

// TestJoinCopiesPlacement runs FORKs on six real peers in six zones and
// checks invariant I3's placement from what the peers did (their events
// and the services' invocation record): every join has k = 2 replicas, in
// zones distinct from each other and from the primary's, and no step of
// any branch ran on a peer holding a copy of that branch's join. Each step
// ran exactly once (no faults).
func TestJoinCopiesPlacement(t *testing.T) {
	dir := t.TempDir()
	evFile := filepath.Join(dir, "events.jsonl")
	recFile := filepath.Join(dir, "invocations.jsonl")
	services := fmt.Sprintf("version: 1\nrecord: %s\npatterns:\n  - {match: \"*\", kind: echo}\n", recFile)
	network := "join-" + filepath.Base(dir)
	zoneOf := map[string]string{}
	var nodes []api.NodeFile
	for i := range 6 {
		cfg := testConfig(t, node.TestnetConfig(), services)
		cfg.Network = network
		cfg.Zone = fmt.Sprintf("z%d", i)
		cfg.EventsFile = evFile
		if i > 0 {
			cfg.Bootstrap = nodes[0].Addrs
		}
		nf, _ := runNode(t, cfg)
		nodes = append(nodes, nf)
		zoneOf[nf.PeerID] = cfg.Zone
	}
	for _, nf := range nodes {
		waitPeers(t, nf, len(nodes))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, nodes[0].Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const runs = 4
	var ids []string
	for range runs {
		st, err := cl.Submit(ctx, "fork.bedwe", "S1 FORK(S2 S3, S4 S5) SYNC S6", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	for _, id := range ids {
		final, err := cl.Wait(ctx, id, 50*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final.State != api.StateSucceeded {
			t.Fatalf("workflow %s: %s %s", id, final.State, final.Error)
		}
	}

	evs, err := events.Read(evFile)
	if err != nil {
		t.Fatal(err)
	}
	type joinCopies struct {
		workflow string
		primary  string
		replicas []string
	}
	joins := map[string]*joinCopies{}
	for _, e := range evs {
		if e.Type != events.JoinCopy {
			continue
		}
		j := joins[e.Join]
		if j == nil {
			j = &joinCopies{workflow: e.Workflow, primary: e.Peer}
			joins[e.Join] = j
		}
		j.replicas = append(j.replicas, e.Node)
	}
	if len(joins) != runs {
		t.Fatalf("%d joins with copies, want %d (one per workflow)", len(joins), runs)
	}
	for id, j := range joins {
		if len(j.replicas) != 2 {
			t.Errorf("join %s has %d replicas, want 2", id, len(j.replicas))
		}
		zones := map[string]bool{zoneOf[j.primary]: true}
		holders := map[string]bool{j.primary: true}
		for _, r := range j.replicas {
			if zones[zoneOf[r]] {
				t.Errorf("join %s: replica in zone %s shares it with another copy", id, zoneOf[r])
			}
			zones[zoneOf[r]] = true
			holders[r] = true
		}
		for _, e := range evs {
			if e.Type == events.Accepted && e.Workflow == j.workflow && strings.HasPrefix(e.Step, "1.") && holders[e.Node] {
				t.Errorf("join %s: branch step %s ran on %s, which holds a copy of the join", id, e.Step, e.Node)
			}
		}
	}

	recs, err := service.ReadRecords(recFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Peer == "" {
			t.Errorf("invocation of %s %s does not name its peer", r.Workflow, r.Step)
		}
	}
	runsOf := runsPerStep(t, recFile)
	if len(runsOf) != runs*6 {
		t.Errorf("%d distinct steps executed, want %d", len(runsOf), runs*6)
	}
	for k, n := range runsOf {
		if n != 1 {
			t.Errorf("step %s executed %d times without any fault", k, n)
		}
	}
}
