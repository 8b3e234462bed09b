package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/pack"
)

// stashNode is a node with a real journal and only the origin table
// (journal.BucketWorkflows, journal.BucketStash).
func stashNode(t testing.TB, path string) *Node {
	t.Helper()
	j, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	n, _ := bareNode(t)
	n.journal = j
	n.origins = newOriginTable(n.saveWorkflow, n.deleteWorkflow)
	return n
}

func stashOf(i int) origin.Stashed {
	v := json.RawMessage(fmt.Sprintf(`{"step":%d,"pad":%q}`, i, bytes.Repeat([]byte("x"), 2000)))
	label := fmt.Sprintf("S%d", i)
	run := []pack.TraceEntry{{Path: fmt.Sprint(i), Service: label, Outcome: pack.OutcomeOK, Stash: pack.Digest(v)}}
	return origin.Stashed{Outputs: []pack.StashedOutput{{Label: label, Digest: pack.Digest(v), Value: v}},
		Trace: &pack.StashedTrace{Digest: pack.TraceDigest(run), Entries: run}}
}

// BenchmarkStashWrites is what the stashes of one workflow write to its
// origin copy's journal: a workflow
// whose steps each stash a 2 KB output and a one-entry trace run (origin
// O6), stepped on a real journal. wchar-bytes/stash is what the process
// wrote per stash (/proc/self/io, Linux: pages, freelist and meta, all
// fsync'd), which stays flat when a stash writes only what it adds and
// grows with the stash when the record, stash inside, is rewritten.
//
//	go test ./node -run XXX -bench StashWrites
func BenchmarkStashWrites(b *testing.B) {
	if _, err := wchar(); err != nil {
		b.Skipf("no /proc/self/io: %v", err)
	}
	for _, stashes := range []int{50, 200} {
		b.Run(fmt.Sprintf("stashes=%d", stashes), func(b *testing.B) {
			var wrote int64
			ops := 0
			for b.Loop() {
				n := stashNode(b, filepath.Join(b.TempDir(), "journal.db"))
				const id = "wf-1"
				if _, err := n.stepOrigin(id, origin.Submitted{Source: "S", StepsTotal: stashes, Origin: "self", At: time.Now().UTC()}); err != nil {
					b.Fatal(err)
				}
				before, _ := wchar()
				for i := 1; i <= stashes; i++ {
					if _, err := n.stepOrigin(id, stashOf(i)); err != nil {
						b.Fatal(err)
					}
				}
				after, _ := wchar()
				wrote += after - before
				ops++
			}
			b.ReportMetric(float64(wrote)/float64(ops*stashes), "wchar-bytes/stash")
		})
	}
}

// wchar is the bytes this process has written so far (/proc/self/io).
func wchar() (int64, error) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no wchar in /proc/self/io")
}
