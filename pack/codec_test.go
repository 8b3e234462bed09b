package pack

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/fxamacker/cbor/v2"
)

var update = flag.Bool("update", false, "rewrite testdata/pack-v1.golden and the FuzzDecode seed corpus")

func mustEncode(t testing.TB, p *Pack) []byte {
	t.Helper()
	b, err := Encode(p)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		pack func() *Pack
	}{
		{"minimal", minimalPack},
		{"full", fullPack},
		{"service attributes", func() *Pack {
			p := minimalPack()
			p.Workflow = seq(svc("S1", "0", "timeout", "30s", "retries", "3", "backoff", "500ms..10s", "once", "true", "out", "tiles", "expect", "2m"))
			return p
		}},
		{"fork", func() *Pack {
			p := minimalPack()
			p.Workflow = seq(svc("S1", "0"), fork(seq(svc("A", "1.0/0")), seq(svc("B", "1.1/0")), seq(svc("C", "1.2/0"), svc("D", "1.2/1"))))
			return p
		}},
		{"first", func() *Pack {
			p := minimalPack()
			p.Workflow = seq(svc("S1", "0"), first(seq(svc("A", "1.0/0")), seq(svc("B", "1.1/0"))), svc("Z", "2"))
			return p
		}},
		{"failover", func() *Pack {
			p := minimalPack()
			p.Workflow = seq(svc("S1", "0"), failover(seq(svc("A", "1.0/0")), seq(svc("B", "1.1/0"))))
			return p
		}},
		{"guarded choice", func() *Pack {
			p := minimalPack()
			p.Workflow = seq(svc("S1", "0"), choice(
				ifArm("S1.size > 10", seq(svc("big", "1.0/0"))),
				ifArm(`S1.kind == "x"`, seq(svc("x", "1.1/0"))),
				elseArm(seq(svc("small", "1.2/0")))))
			return p
		}},
		{"plain choice", func() *Pack {
			p := minimalPack()
			p.Workflow = seq(svc("S1", "0"), choice(plain(seq(svc("A", "1.0/0"))), plain(seq(svc("B", "1.1/0")))))
			return p
		}},
		{"settle items", func() *Pack {
			p := minimalPack()
			p.Settle = []Settle{
				{Kind: SettleGuard, Key: "wf-1|0", Attempt: 2, Peers: []Peer{{ID: "12D3KooWA", Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, Zone: "z1"}}},
				{Kind: SettleBranchStarted, Key: "j-1", Branch: 3, Peers: []Peer{{ID: "12D3KooWB"}, {ID: "12D3KooWC"}}},
				{Kind: SettleJoinForwarded, Key: "j-2", Peers: []Peer{{ID: "12D3KooWD"}}, Epoch: 2, Actor: "12D3KooWE", Lenient: true},
			}
			return p
		}},
		{"nesting at MaxDepth", func() *Pack {
			p := minimalPack()
			p.Workflow = nestedForks(DefaultLimits().MaxDepth)
			return p
		}},
		{"null input and data", func() *Pack {
			p := minimalPack()
			p.Input = json.RawMessage("null")
			p.Outputs = map[string]json.RawMessage{"S0": json.RawMessage(` { "a" : 1 } `)}
			return p
		}},
		{"frames of every kind", func() *Pack {
			p := minimalPack()
			p.Frames = []Frame{
				{JoinID: "j1", Kind: FrameFork, Branch: 0, Holders: []Peer{peerA}},
				{JoinID: "j2", Kind: FrameFirst, Branch: 255, Holders: holders2},
				{JoinID: "j3", Kind: FrameFailover, Branch: 2, Holders: []Peer{peerC, peerB, peerA}},
			}
			return p
		}},
		{"trace with times and a zero time", func() *Pack {
			p := minimalPack()
			p.Trace = []TraceEntry{
				{Path: "0", Service: "S0", Peer: "p", Start: t0, End: t0.Add(time.Nanosecond), Outcome: OutcomeOK},
				{Path: "0", Service: "S0", Peer: "q", Start: time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC), Attempt: 3, Outcome: OutcomeSuperseded, Note: "re-routed:\n holder silent"},
				{Path: "1", Service: "S1", Peer: "r", Start: t0, Outcome: OutcomeCancelled},
			}
			return p
		}},
		{"sender without addresses", func() *Pack {
			p := minimalPack()
			p.Sender = Peer{ID: "12D3KooWS", Zone: "z9"}
			return p
		}},
		{"large residual", func() *Pack { return residualPack(1000, 100) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.pack()
			if err := in.Validate(Limits{}); err != nil {
				t.Fatalf("test pack is invalid: %v", err)
			}
			b := mustEncode(t, in)
			out, err := Decode(b, DefaultLimits())
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(out, in) {
				t.Errorf("round trip changed the pack\n got: %+v\nwant: %+v", out, in)
			}
			if got, want := out.Workflow.String(), in.Workflow.String(); got != want {
				t.Errorf("workflow text = %s, want %s", got, want)
			}
			if b2 := mustEncode(t, out); !bytes.Equal(b2, b) {
				t.Errorf("re-encoding the decoded pack changed the bytes")
			}
		})
	}
}

func TestRoundTripDropsPositionsAndNormalises(t *testing.T) {
	in := minimalPack()
	s := in.Workflow.Steps[0].(*grammar.Service)
	s.Pos = grammar.Pos{Offset: 10, Line: 2, Col: 3}
	s.Attrs = []grammar.Attr{}
	in.Input = json.RawMessage{}
	in.Outputs = map[string]json.RawMessage{}
	in.Trace = []TraceEntry{}
	in.Sender = Peer{Addrs: []string{}}
	local := time.FixedZone("UTC+2", 2*3600)
	in.Deadline = t0.In(local)

	out, err := Decode(mustEncode(t, in), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := minimalPack()
	want.Deadline = t0
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got %+v\nwant %+v", out, want)
	}
	if !out.Deadline.Equal(in.Deadline) || out.Deadline.Location() != time.UTC {
		t.Errorf("deadline = %v, want the same instant in UTC", out.Deadline)
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	// Maps iterate in random order; many outputs make a lucky pass unlikely.
	want := mustEncode(t, residualPack(10, 200))
	for range 20 {
		if got := mustEncode(t, residualPack(10, 200)); !bytes.Equal(got, want) {
			t.Fatal("two encodings of equal packs differ")
		}
	}
}

func TestEncodeHeader(t *testing.T) {
	b := mustEncode(t, minimalPack())
	if !bytes.HasPrefix(b, []byte{'B', 'P', 1}) {
		t.Fatalf("pack starts with % x, want 42 50 01", b[:3])
	}
}

func TestEncodeRejectsUnrepresentable(t *testing.T) {
	tests := []struct {
		name string
		mod  func(p *Pack)
		want string
	}{
		{"nil workflow", func(p *Pack) { p.Workflow = nil }, "workflow is nil"},
		{"nil step", func(p *Pack) { p.Workflow.Steps = append(p.Workflow.Steps, nil) }, "workflow[1]: nil step"},
		{"nil arm", func(p *Pack) {
			p.Workflow.Steps = append(p.Workflow.Steps, choice(nil, plain(seq(svc("A", "1")))))
		}, "workflow[1].arms[0]: nil arm"},
		{"nil branch", func(p *Pack) {
			p.Workflow.Steps = append(p.Workflow.Steps, fork(seq(svc("A", "1")), nil))
		}, "workflow[1].branches[1]: nil workflow"},
		{"deadline out of range", func(p *Pack) { p.Deadline = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }, "deadline: time out of range"},
		{"trace time out of range", func(p *Pack) {
			p.Trace = []TraceEntry{{Start: t0, End: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}}
		}, "trace[0].end: time out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := minimalPack()
			tt.mod(p)
			_, err := Encode(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Encode error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := Encode(nil); err == nil {
		t.Error("Encode(nil) succeeded")
	}
}

func TestDecodeRejectsHeader(t *testing.T) {
	good := mustEncode(t, minimalPack())
	v2 := append([]byte{'B', 'P', 2}, good[3:]...)
	tests := []struct {
		name string
		in   []byte
		is   error
		want string
	}{
		{"empty", nil, ErrNotPack, "not a bedwe pack"},
		{"magic only", []byte("BP"), ErrNotPack, "not a bedwe pack"},
		{"json", []byte(`{"workflow_id":"x"}`), ErrNotPack, `starts with "{\""`},
		{"newer version", v2, ErrVersion, "unsupported pack wire version 2 (this peer speaks version 1"},
		{"version zero", append([]byte{'B', 'P', 0}, good[3:]...), ErrVersion, "version 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.in, Limits{})
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode error = %v, want %v containing %q", err, tt.is, tt.want)
			}
		})
	}
}

func TestDecodeRejectsMalformedCBOR(t *testing.T) {
	good := mustEncode(t, fullPack())
	tests := []struct {
		name string
		in   []byte
	}{
		{"truncated", good[:len(good)/2]},
		{"trailing bytes", append(append([]byte{}, good...), 0x00)},
		{"not a map", []byte{'B', 'P', 1, 0x01}},
		{"indefinite length", []byte{'B', 'P', 1, 0xbf, 0x01, 0x61, 'x', 0xff}},
		{"duplicate key", []byte{'B', 'P', 1, 0xa2, 0x01, 0x61, 'x', 0x01, 0x61, 'y'}},
		{"tag", []byte{'B', 'P', 1, 0xc1, 0x01}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode(tt.in, Limits{})
			if err == nil {
				t.Fatalf("Decode succeeded: %+v", p)
			}
			if !strings.HasPrefix(err.Error(), "decode pack") {
				t.Errorf("error %q lacks context", err)
			}
		})
	}
}

// encodeWire encodes an arbitrary value behind the version-1 header, to
// build packs this package's own encoder would never write.
func encodeWire(t *testing.T, v any) []byte {
	t.Helper()
	body, err := cbor.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{'B', 'P', 1}, body...)
}

func TestDecodeIgnoresUnknownFields(t *testing.T) {
	// A newer peer adds key 99 to the pack and key 42 to a step.
	type futureStep struct {
		K     stepKind `cbor:"1,keyasint"`
		Name  string   `cbor:"2,keyasint"`
		Path  string   `cbor:"4,keyasint"`
		Extra string   `cbor:"42,keyasint"`
	}
	type futurePack struct {
		WorkflowID string       `cbor:"1,keyasint"`
		Origin     []wirePeer   `cbor:"2,keyasint"`
		Workflow   []futureStep `cbor:"3,keyasint"`
		Priority   int          `cbor:"99,keyasint"`
	}
	b := encodeWire(t, futurePack{
		WorkflowID: "wf-1",
		Origin:     []wirePeer{{ID: peerA.ID, Addrs: peerA.Addrs, Zone: peerA.Zone}},
		Workflow:   []futureStep{{K: kindService, Name: "S1", Path: "0", Extra: "new"}},
		Priority:   5,
	})
	p, err := Decode(b, Limits{})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !reflect.DeepEqual(p, minimalPack()) {
		t.Errorf("got %+v, want %+v", p, minimalPack())
	}
}

func TestDecodeRejectsUnknownStepKind(t *testing.T) {
	w := &wirePack{WorkflowID: "wf-1", Origin: []wirePeer{{ID: "p"}},
		Workflow: []wireStep{{K: kindService, Name: "S1", Path: "0"}, {K: 9}}}
	_, err := Decode(encodeWire(t, w), Limits{})
	if err == nil || !strings.Contains(err.Error(), "workflow[1]: unknown step kind 9") {
		t.Fatalf("error = %v, want unknown step kind at workflow[1]", err)
	}
}

func TestGolden(t *testing.T) {
	p := &Pack{
		WorkflowID: "wf-golden",
		Origin:     []Peer{{ID: "12D3KooWOrigin", Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, Zone: "z1"}},
		Workflow: seq(
			svc("fetch", "0", "timeout", "30s"),
			fork(seq(svc("left", "1.0/0")), seq(svc("right", "1.1/0", "out", "r"))),
			choice(ifArm("r.ok", seq(svc("yes", "2.0/0"))), elseArm(seq(svc("no", "2.1/0")))),
		),
		Input:   json.RawMessage(`{"n":1}`),
		Outputs: map[string]json.RawMessage{"prep": json.RawMessage(`{"ok":true}`)},
		Frames:  []Frame{{JoinID: "j1", Kind: FrameFirst, Branch: 1, Holders: []Peer{{ID: "12D3KooWJoin"}}}},
		Attempt: 1,
		Hops:    2,
		Sender:  Peer{ID: "12D3KooWSender", Zone: "z2"},
		Trace: []TraceEntry{{Path: "p", Service: "prep", Peer: "12D3KooWOrigin", Zone: "z1",
			Start: t0, End: t0.Add(time.Second), Outcome: OutcomeOK}},
		Deadline: t0.Add(time.Hour),
	}
	got := mustEncode(t, p)
	path := filepath.Join("testdata", "pack-v1.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pack -run TestGolden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("wire format changed; if this is intended, bump WireVersion or add fields compatibly, then -update\n got:\n%s\nwant:\n%s",
			hex.Dump(got), hex.Dump(want))
	}
	// Bytes written by this version must keep decoding to the same pack.
	dec, err := Decode(want, Limits{})
	if err != nil {
		t.Fatalf("Decode(golden): %v", err)
	}
	if !reflect.DeepEqual(dec, p) {
		t.Errorf("Decode(golden) = %+v, want %+v", dec, p)
	}
}

func TestDecodedPackDoesNotAliasInput(t *testing.T) {
	// Stream readers reuse their buffers: a decoded pack must own its bytes.
	b := mustEncode(t, fullPack())
	p, err := Decode(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	clear(b)
	if want := fullPack(); !reflect.DeepEqual(p, want) {
		t.Errorf("pack changed when the input buffer was overwritten:\n got %+v\nwant %+v", p, want)
	}
}

// TestCheck: Check accepts what Encode writes and refuses, like Decode,
// a wrong header, a newer version, an oversized pack and bytes that are
// not one well-formed CBOR item.
func TestCheck(t *testing.T) {
	good := mustEncode(t, fullPack())
	if err := Check(good, Limits{}); err != nil {
		t.Fatalf("Check of an encoded pack: %v", err)
	}
	tests := []struct {
		name string
		in   []byte
		lim  Limits
	}{
		{"empty", nil, Limits{}},
		{"json", []byte(`{"workflow_id":"x"}`), Limits{}},
		{"newer version", append([]byte{'B', 'P', 2}, good[3:]...), Limits{}},
		{"over MaxBytes", good, Limits{MaxBytes: len(good) - 1}},
		{"truncated", good[:len(good)/2], Limits{}},
		{"trailing bytes", append(append([]byte{}, good...), 0x00), Limits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Check(tt.in, tt.lim); err == nil || !strings.HasPrefix(err.Error(), "decode pack") {
				t.Fatalf("Check error = %v, want a refusal starting with \"decode pack\"", err)
			}
		})
	}
}
