package node

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

// TestPrimaryAnswersHandingWhileItHandsTheStepOn is the primary's side of
// node/guard G15: while this peer hands a step on (here: waiting for a
// peer that offers it), it keeps no guard copy of it, and a backup's
// status question about that step and attempt is answered Handing; about
// another attempt it is not. Once the hand-off has ended and
// handingLinger has passed, it is not either.
func TestPrimaryAnswersHandingWhileItHandsTheStepOn(t *testing.T) {
	n, stop, _ := runInternalNode(t, t.TempDir(), "")
	defer stop()
	w, err := grammar.Parse("t", []byte("NobodyOffersThis"))
	if err != nil {
		t.Fatal(err)
	}
	grammar.AssignPaths(w)
	p := &pack.Pack{WorkflowID: "wf-test", Origin: []pack.Peer{n.self()}, Workflow: w, Input: []byte("null")}
	key := guardKey(p)
	asker := peer.ID("asker")
	status := func(attempt int) api.GuardReply {
		return n.guardOp(asker, api.GuardStatus{Key: key, Holder: "h", Attempt: attempt})
	}
	if rep := status(0); rep.Known || rep.Handing {
		t.Fatalf("before any hand-off: %+v, want neither known nor handing", rep)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = n.handoffExcluding(ctx, p, nil, nil)
	}()
	// The hand-off registers itself before it looks for a peer.
	deadline := time.Now().Add(10 * time.Second)
	for !n.handing.has(key, 0) {
		if time.Now().After(deadline) {
			t.Fatal("the hand-off in flight was never recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rep := status(0); rep.Known || !rep.Handing {
		t.Fatalf("while handing attempt 0 on: %+v, want handing", rep)
	}
	if rep := status(1); rep.Handing {
		t.Fatalf("asked about attempt 1 while handing attempt 0 on: %+v, want not handing", rep)
	}
	cancel()
	<-ended
	if rep := status(0); !rep.Handing {
		t.Fatalf("just after the hand-off ended: %+v, want handing (the sender stores its copy after the ack)", rep)
	}
	// handingLinger passed.
	n.handing.mu.Lock()
	for _, e := range n.handing.m {
		e.until = time.Now().Add(-time.Millisecond)
	}
	n.handing.mu.Unlock()
	if rep := status(0); rep.Handing {
		t.Fatalf("after the linger: %+v, want not handing", rep)
	}
}
