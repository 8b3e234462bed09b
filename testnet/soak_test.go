package testnet_test

import (
	"context"
	"encoding/json"
	"flag"
	"github.com/bedwe/bedwe/internal/tier"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/testnet"
)

var (
	soak        = flag.Bool("soak", false, "run TestSoak, the long no-fault soak (minutes; not part of the normal suite)")
	soakNodes   = flag.Int("soak.nodes", 40, "TestSoak: testnet size")
	soakFor     = flag.Duration("soak.for", 10*time.Minute, "TestSoak: how long to keep workflows running")
	soakPerNode = flag.Int("soak.per-node", 2, "TestSoak: workflows each node keeps in flight")
	soakOut     = flag.String("soak.out", "", "TestSoak: write the JSON summary to this file")
)

// TestSoak keeps workflows running on a testnet with the testnet timing
// profile and kills nothing; every suspicion is then false. It asserts that
// none was raised and no workflow was lost. It runs only with -soak:
//
//	go test ./testnet -run TestSoak -soak -soak.nodes 40 -soak.for 10m -timeout 30m -v
func TestSoak(t *testing.T) {
	tier.Faults(t)
	if !*soak {
		t.Skip("a soak takes minutes: run it with -soak (e.g. go test ./testnet -run TestSoak -soak -soak.nodes 40 -soak.for 10m -timeout 30m)")
	}
	m := up(t, testnet.Options{Nodes: *soakNodes, Zones: 4, Announce: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), *soakFor+5*time.Minute)
	defer cancel()
	sum, err := m.Soak(ctx, testnet.SoakOptions{For: *soakFor, PerNode: *soakPerNode, Progress: logWriter{t}})
	if err != nil {
		t.Fatalf("soak: %v", err)
	}
	out, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("soak summary:\n%s", out)
	if *soakOut != "" {
		if err := os.WriteFile(*soakOut, append(out, '\n'), 0o644); err != nil {
			t.Errorf("write %s: %v", *soakOut, err)
		}
	}
	if sum.Submitted == 0 {
		t.Fatal("no workflow was submitted")
	}
	if sum.FalseSuspicions != 0 {
		t.Errorf("%d false suspicions (no node was killed); first: %+v", sum.FalseSuspicions, sum.Suspicions)
	}
	if sum.Lost != 0 {
		t.Errorf("%d of %d workflows lost: %v", sum.Lost, sum.Submitted, sum.WorkflowErrors)
	}
}

// logWriter sends progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
