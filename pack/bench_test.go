package pack

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

// benchPacks are the residual shapes measured by the codec benchmarks.
var benchPacks = []struct {
	name string
	pack func() *Pack
}{
	{"residual10", func() *Pack { return residualPack(10, 0) }},
	{"residual1000_outputs100", func() *Pack { return residualPack(1000, 100) }},
}

func BenchmarkEncode(b *testing.B) {
	for _, bp := range benchPacks {
		b.Run(bp.name, func(b *testing.B) {
			p := bp.pack()
			enc, err := Encode(p)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	benchReading(b, func(enc []byte, lim Limits) error {
		_, err := Decode(enc, lim)
		return err
	})
}

// BenchmarkCheck is what a guardian pays to take a copy (Check), against
// BenchmarkDecode's full decode.
func BenchmarkCheck(b *testing.B) { benchReading(b, Check) }

// benchReading measures read on every encoded bench pack.
func benchReading(b *testing.B, read func(enc []byte, lim Limits) error) {
	lim := DefaultLimits()
	for _, bp := range benchPacks {
		b.Run(bp.name, func(b *testing.B) {
			enc, err := Encode(bp.pack())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if err := read(enc, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	lim := DefaultLimits()
	for _, bp := range benchPacks {
		b.Run(bp.name, func(b *testing.B) {
			p := bp.pack()
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Validate(lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// growthPack is the pack of a sequential workflow of total services after
// done of them ran: the residual shrinks while each finished step has left
// a small output and one trace entry.
func growthPack(total, done int) *Pack {
	p := &Pack{
		WorkflowID: "01JGROWTH00000000000000000",
		Origin:     []Peer{peerA, peerB},
		Workflow:   &grammar.Workflow{},
		Input:      json.RawMessage(`{"n":42}`),
		Hops:       done,
		Sender:     peerB,
	}
	for i := done; i < total; i++ {
		p.Workflow.Steps = append(p.Workflow.Steps, svc(fmt.Sprintf("step%03d", i), strconv.Itoa(i)))
	}
	if done > 0 {
		p.Outputs = make(map[string]json.RawMessage, done)
	}
	for i := range done {
		name := fmt.Sprintf("step%03d", i)
		p.Outputs[name] = json.RawMessage(fmt.Sprintf(`{"value":%d,"ok":true}`, i))
		start := t0.Add(time.Duration(i) * time.Second)
		p.Trace = append(p.Trace, TraceEntry{Path: strconv.Itoa(i), Service: name, Peer: "12D3KooWPeer" + strconv.Itoa(i%7),
			Zone: "z" + strconv.Itoa(i%3), Start: start, End: start.Add(250 * time.Millisecond), Outcome: OutcomeOK})
	}
	return p
}

// BenchmarkPackGrowth reports the encoded size of a pack after 1, 10, 100
// and 200 steps of a 201-step sequential workflow (metric bytes/pack), and
// the cost of encoding it.
func BenchmarkPackGrowth(b *testing.B) {
	const total = 201
	for _, done := range []int{1, 10, 100, 200} {
		b.Run(fmt.Sprintf("steps=%d", done), func(b *testing.B) {
			p := growthPack(total, done)
			if err := p.Validate(DefaultLimits()); err != nil {
				b.Fatal(err)
			}
			var n int
			for b.Loop() {
				enc, err := Encode(p)
				if err != nil {
					b.Fatal(err)
				}
				n = len(enc)
			}
			b.ReportMetric(float64(n), "bytes/pack")
		})
	}
}
