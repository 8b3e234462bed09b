package node_test

import (
	"fmt"
	"testing"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/pack"
)

// BenchmarkHandoff measures one hand-off as a sender sees it: open a stream
// to a real node over loopback TCP, send the pack, wait for the ack that
// follows the fsync'd journal write. The node then runs the (echo) step
// and tries to forward the residual; that work overlaps the next hand-off.
func BenchmarkHandoff(b *testing.B) {
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprintf("residual-%d", size), func(b *testing.B) {
			nf := startNodeB(b, echoServices)
			h, id := rawHostB(b, nf)
			src := "S0"
			for i := 1; i < size; i++ {
				src += fmt.Sprintf(" S%d", i)
			}
			w, err := grammar.Parse("b", []byte(src))
			if err != nil {
				b.Fatal(err)
			}
			grammar.AssignPaths(w)
			b.ResetTimer()
			for i := range b.N {
				p := &pack.Pack{
					WorkflowID: fmt.Sprintf("wf-bench-%d", i),
					Origin:     []pack.Peer{{ID: "12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD"}},
					Workflow:   w,
					Input:      []byte("null"),
				}
				raw, err := pack.Encode(p)
				if err != nil {
					b.Fatal(err)
				}
				ack, err := handoffB(b, h, id, raw)
				if err != nil || !ack.OK {
					b.Fatalf("hand-off: %v %+v", err, ack)
				}
			}
		})
	}
}
