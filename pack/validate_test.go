package pack

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

func TestValidateRejects(t *testing.T) {
	small := Limits{MaxBranches: 3, MaxHops: 5, MaxFrames: 1, MaxTrace: 2, MaxServices: 4, MaxDataBytes: 64, MaxDepth: 2}
	tests := []struct {
		name  string
		lim   Limits
		mod   func(p *Pack)
		field string
		limit string
		text  string
	}{
		{"empty workflow id", Limits{}, func(p *Pack) { p.WorkflowID = "" }, "workflow_id", "", "empty"},
		{"long workflow id", Limits{}, func(p *Pack) { p.WorkflowID = strings.Repeat("w", MaxIDLen+1) }, "workflow_id", "MaxIDLen", "129 bytes"},
		{"unknown settle kind", Limits{}, func(p *Pack) { p.Settle = []Settle{{Kind: 9, Key: "k"}} }, "settle[0]", "", "unknown settle kind"},
		{"settle without key", Limits{}, func(p *Pack) { p.Settle = []Settle{{Kind: SettleGuard}} }, "settle[0]", "", "settle key"},
		{"slash in workflow id", Limits{}, func(p *Pack) { p.WorkflowID = "a/b" }, "workflow_id", "", `'/'`},
		{"no origin", Limits{}, func(p *Pack) { p.Origin = nil }, "origin", "", "no peers"},
		{"origin without id", Limits{}, func(p *Pack) { p.Origin = []Peer{{Zone: "z"}} }, "origin[0].id", "", "empty"},
		{"too many origins", Limits{}, func(p *Pack) { p.Origin = make([]Peer, MaxPeers+1) }, "origin", "MaxPeers", "33 peers"},
		{"empty workflow", Limits{}, func(p *Pack) { p.Workflow = &grammar.Workflow{} }, "workflow", "", "empty workflow"},
		{"nil workflow", Limits{}, func(p *Pack) { p.Workflow = nil }, "workflow", "", "empty workflow"},
		{"empty service name", Limits{}, func(p *Pack) { p.Workflow = seq(svc("", "0")) }, "workflow[0].name", "", "service name is empty"},
		{"long service name", Limits{}, func(p *Pack) { p.Workflow = seq(svc(strings.Repeat("s", 300), "0")) }, "workflow[0].name", "MaxNameLen", "300 bytes, over MaxNameLen=256"},
		{"space in service name", Limits{}, func(p *Pack) { p.Workflow = seq(svc("rm -rf", "0")) }, "workflow[0].name", "", `' ' at byte 2`},
		{"missing path", Limits{}, func(p *Pack) { p.Workflow = seq(svc("S", "")) }, "workflow[0].path", "", "path is empty"},
		{"bad attribute key", Limits{}, func(p *Pack) { p.Workflow = seq(svc("S", "0", "a=b", "1")) }, "workflow[0].attrs[0].key", "", "attribute key"},
		{"control char in attribute", Limits{}, func(p *Pack) { p.Workflow = seq(svc("S", "0", "out", "x\x00")) }, "workflow[0].attrs[0].value", "", "control character"},
		{"one-branch fork", Limits{}, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), fork(seq(svc("A", "1.0/0"))))
		}, "workflow[1]", "", "FORK has 1 branches, needs at least 2"},
		{"one-arm choice", Limits{}, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), choice(plain(seq(svc("A", "1.0/0")))))
		}, "workflow[1]", "", "CHOICE has 1 branches"},
		{"empty branch", Limits{}, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), first(seq(svc("A", "1.0/0")), seq()))
		}, "workflow[1].branches[1]", "", "empty branch"},
		{"nested bad name", Limits{}, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), failover(seq(svc("A", "1.0/0")), seq(svc("B", "1.1/0"), choice(plain(seq(svc("C", "x"))), plain(seq(svc("", "y")))))))
		}, "workflow[1].branches[1][1].arms[1][0].name", "", "service name is empty"},
		{"too many branches", small, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), fork(seq(svc("A", "a")), seq(svc("B", "b")), seq(svc("C", "c")), seq(svc("D", "d"))))
		}, "workflow[1]", "MaxBranches", "4 branches, over MaxBranches=3"},
		{"too deep", small, func(p *Pack) { p.Workflow = nestedForks(3) }, "workflow[1].branches[0][0].branches[0][0]", "MaxDepth", "nested 3 deep, over MaxDepth=2"},
		{"too many services", small, func(p *Pack) {
			p.Workflow = seq(svc("A", "0"), svc("B", "1"), fork(seq(svc("C", "2")), seq(svc("D", "3"), svc("E", "4"))))
		}, "workflow[2].branches[1][1]", "MaxServices", "more than MaxServices=4"},
		{"if arm without guard", Limits{}, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), choice(ifArm("", seq(svc("A", "a"))), elseArm(seq(svc("B", "b")))))
		}, "workflow[1].arms[0].guard", "", "IF arm without a guard"},
		{"guard on else", Limits{}, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), choice(ifArm("x", seq(svc("A", "a"))), &grammar.Arm{Kind: grammar.ArmElse, Guard: "y", Body: seq(svc("B", "b"))}))
		}, "workflow[1].arms[1].guard", "", "only IF arms"},
		{"unknown arm kind", Limits{}, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), choice(plain(seq(svc("A", "a"))), &grammar.Arm{Kind: 7, Body: seq(svc("B", "b"))}))
		}, "workflow[1].arms[1].kind", "", "unknown arm kind 7"},
		{"long guard", Limits{}, func(p *Pack) {
			p.Workflow = seq(svc("S", "0"), choice(ifArm(strings.Repeat("x", MaxGuardLen+1), seq(svc("A", "a"))), elseArm(seq(svc("B", "b")))))
		}, "workflow[1].arms[0].guard", "MaxGuardLen", "over MaxGuardLen=4096"},
		{"input not json", Limits{}, func(p *Pack) { p.Input = json.RawMessage(`{"a":`) }, "input", "", "not valid JSON"},
		{"output not an object", Limits{}, func(p *Pack) {
			p.Outputs = map[string]json.RawMessage{"b": json.RawMessage(`{}`), "a": json.RawMessage(`[1]`)}
		}, `outputs["a"]`, "", "not a JSON object"},
		{"output not json", Limits{}, func(p *Pack) { p.Outputs = map[string]json.RawMessage{"a": json.RawMessage(`{"x"}`)} }, `outputs["a"]`, "", "not a JSON object"},
		{"output empty", Limits{}, func(p *Pack) { p.Outputs = map[string]json.RawMessage{"a": nil} }, `outputs["a"]`, "", "not a JSON object"},
		{"smallest bad output reported", Limits{}, func(p *Pack) {
			p.Outputs = map[string]json.RawMessage{"z": nil, "m": nil, "c": nil, "q": nil, "ok": json.RawMessage(`{}`)}
		}, `outputs["c"]`, "", "not a JSON object"},
		{"bad output label", Limits{}, func(p *Pack) { p.Outputs = map[string]json.RawMessage{"a b": json.RawMessage(`{}`)} }, `outputs["a b"]`, "", "output label"},
		{"too much data", small, func(p *Pack) {
			p.Input = json.RawMessage(`{"pad":"` + strings.Repeat("x", 40) + `"}`)
			p.Outputs = map[string]json.RawMessage{"a": json.RawMessage(`{"pad":"xxxxxxxxxxxxx"}`)}
		}, "outputs", "MaxDataBytes", "over MaxDataBytes=64"},
		{"too many frames", small, func(p *Pack) {
			f := Frame{JoinID: "j", Kind: FrameFork, Holders: []Peer{peerA}}
			p.Frames = []Frame{f, f}
		}, "frames", "MaxFrames", "2 frames, over MaxFrames=1"},
		{"frame kind", Limits{}, func(p *Pack) { p.Frames = []Frame{{JoinID: "j", Kind: 0, Holders: []Peer{peerA}}} }, "frames[0].kind", "", "unknown frame kind 0"},
		{"frame without holders", Limits{}, func(p *Pack) { p.Frames = []Frame{{JoinID: "j", Kind: FrameFirst}} }, "frames[0].holders", "", "no peers"},
		{"frame without join id", Limits{}, func(p *Pack) { p.Frames = []Frame{{Kind: FrameFirst, Holders: []Peer{peerA}}} }, "frames[0].join_id", "", "empty"},
		{"frame branch negative", Limits{}, func(p *Pack) {
			p.Frames = []Frame{{JoinID: "j", Kind: FrameFork, Branch: -1, Holders: []Peer{peerA}}}
		}, "frames[0].branch", "MaxBranches", "branch index -1"},
		{"holder address too long", Limits{}, func(p *Pack) {
			p.Frames = []Frame{{JoinID: "j", Kind: FrameFork, Holders: []Peer{peerA, {ID: "x", Addrs: []string{strings.Repeat("a", MaxAddrLen+1)}}}}}
		}, "frames[0].holders[1].addrs[0]", "MaxAddrLen", "over MaxAddrLen=512"},
		{"negative attempt", Limits{}, func(p *Pack) { p.Attempt = -1 }, "attempt", "", "negative attempt"},
		{"negative hops", Limits{}, func(p *Pack) { p.Hops = -3 }, "hops", "", "negative hop count"},
		{"too many hops", small, func(p *Pack) { p.Hops = 6 }, "hops", "MaxHops", "6 hops, over MaxHops=5"},
		{"sender without id", Limits{}, func(p *Pack) { p.Sender = Peer{Zone: "z1"} }, "sender.id", "", "empty"},
		{"too much trace", small, func(p *Pack) { p.Trace = make([]TraceEntry, 3) }, "trace", "MaxTrace", "3 entries, over MaxTrace=2"},
		{"trace negative attempt", Limits{}, func(p *Pack) { p.Trace = []TraceEntry{{Attempt: -1}} }, "trace[0].attempt", "", "negative"},
		{"trace long note", Limits{}, func(p *Pack) {
			p.Trace = []TraceEntry{{}, {Note: strings.Repeat("n", MaxNoteLen+1)}}
		}, "trace[1].note", "MaxNoteLen", "over MaxNoteLen"},
		{"trace bad utf8", Limits{}, func(p *Pack) { p.Trace = []TraceEntry{{Peer: "\xff"}} }, "trace[0].peer", "", "UTF-8"},
		{"trace time range", Limits{}, func(p *Pack) { p.Trace = []TraceEntry{{Start: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}} }, "trace[0].start", "", "out of range"},
		{"deadline range", Limits{}, func(p *Pack) { p.Deadline = time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC) }, "deadline", "", "out of range"},
	}
	// Packs whose bytes are already malformed CBOR fail in the decoder
	// itself, with its own message.
	wireErrors := map[string]string{"trace bad utf8": "invalid UTF-8"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := minimalPack()
			tt.mod(p)
			err := p.Validate(tt.lim)
			checkValidationError(t, "Validate", err, tt.field, tt.limit, tt.text)

			// Decode must reject the same pack the same way when it can
			// be put on the wire at all.
			b, encErr := Encode(p)
			if encErr != nil {
				return
			}
			_, err = Decode(b, tt.lim)
			if want, ok := wireErrors[tt.name]; ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Decode error = %v, want %q", err, want)
				}
				return
			}
			checkValidationError(t, "Decode", err, tt.field, tt.limit, tt.text)
		})
	}
}

func checkValidationError(t *testing.T, op string, err error, field, limit, text string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%s error = %v, want a *ValidationError", op, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%s: errors.Is(err, ErrInvalid) is false", op)
	}
	if ve.Field != field || ve.Limit != limit || !strings.Contains(ve.Reason, text) {
		t.Errorf("%s error = %q (field %q, limit %q), want field %q, limit %q, reason containing %q",
			op, err, ve.Field, ve.Limit, field, limit, text)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("%s error %q does not name field %q", op, err, field)
	}
}

func TestValidateAcceptsFullPack(t *testing.T) {
	for _, p := range []*Pack{minimalPack(), fullPack(), residualPack(1000, 100)} {
		if err := p.Validate(DefaultLimits()); err != nil {
			t.Errorf("Validate(%s): %v", p.WorkflowID, err)
		}
	}
	var nilPack *Pack
	if err := nilPack.Validate(Limits{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Validate(nil) = %v, want ErrInvalid", err)
	}
}

func TestDecodeRejectsOversized(t *testing.T) {
	p := residualPack(100, 0)
	b := mustEncode(t, p)
	_, err := Decode(b, Limits{MaxBytes: len(b) - 1})
	checkValidationError(t, "Decode", err, "pack", "MaxBytes", "over MaxBytes")
	if _, err := Decode(b, Limits{MaxBytes: len(b)}); err != nil {
		t.Errorf("Decode at exactly MaxBytes: %v", err)
	}
}

func TestDecodeRejectsDeepNestingBeforeBuildingIt(t *testing.T) {
	// 1,000 nested FORKs exceed the decoder's nesting bound long before the
	// tree is built; the error still names MaxDepth.
	p := minimalPack()
	p.Workflow = nestedForks(1000)
	b := mustEncode(t, p)
	_, err := Decode(b, Limits{})
	checkValidationError(t, "Decode", err, "workflow", "MaxDepth", "nested too deeply")
}

func TestDecodeRejectsLongLists(t *testing.T) {
	// A trace list longer than every list limit is refused by the decoder.
	p := minimalPack()
	p.Trace = make([]TraceEntry, 40)
	b := mustEncode(t, p)
	lim := Limits{MaxServices: 16, MaxTrace: 16, MaxBranches: 16, MaxFrames: 16}
	_, err := Decode(b, lim)
	checkValidationError(t, "Decode", err, "pack", "MaxServices", "a list is longer")
	// A trace between the list limit and MaxTrace is refused by Validate.
	p.Trace = make([]TraceEntry, 20)
	lim.MaxServices = 32
	_, err = Decode(mustEncode(t, p), lim)
	checkValidationError(t, "Decode", err, "trace", "MaxTrace", "20 entries")
}

func TestLimitsZeroMeansDefault(t *testing.T) {
	if got := (Limits{}).withDefaults(); got != DefaultLimits() {
		t.Errorf("Limits{}.withDefaults() = %+v, want %+v", got, DefaultLimits())
	}
	got := Limits{MaxHops: 3}.withDefaults()
	want := DefaultLimits()
	want.MaxHops = 3
	if got != want {
		t.Errorf("partial limits = %+v, want %+v", got, want)
	}
}

func TestDecodeRefusesMemoryBlowUpBeforeAllocating(t *testing.T) {
	// 2 MB of empty maps in the branches of one FORK: each would decode
	// into a step struct of over 100 bytes, about 240 MB in all.
	const arrays, perArray = 20, 100_000
	b := []byte{'B', 'P', 1,
		0xa1, 0x03, // {3: workflow
		0x81,                   // [ one step
		0xa2, 0x01, 0x02, 0x05, // {1: FORK, 5: branches
		0x80 | arrays, // [ 20 branches (count in the initial byte)
	}
	for range arrays {
		b = binary.BigEndian.AppendUint32(append(b, 0x9a), perArray)
		b = append(b, bytes.Repeat([]byte{0xa0}, perArray)...)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Decode(b, Limits{})
	runtime.ReadMemStats(&after)
	checkValidationError(t, "Decode", err, "pack", "MaxBytes", "would take over")
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("Decode allocated %d MB before refusing", got>>20)
	}
}

func TestPrescanPassesHonestPacksAtTheLimits(t *testing.T) {
	// The largest honest shapes the default limits allow must pass the
	// memory bound: MaxServices services with attributes and MaxTrace
	// trace entries. The estimate grows linearly with the count, so a
	// pack of 1/100 of that size, scaled up, stands for the full one
	// (which is slow to build under -race).
	lim := DefaultLimits()
	const scale = 100
	p := residualPack(lim.MaxServices/scale, 0)
	p.Trace = make([]TraceEntry, lim.MaxTrace/scale)
	for i := range p.Trace {
		p.Trace[i] = TraceEntry{Path: "0", Service: "S", Peer: "p", Outcome: OutcomeOK}
	}
	b := mustEncode(t, p)
	mem, err := prescan(b[headerLen:], maxNestedLevels(lim), math.MaxInt, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("estimate for the full pack: %d MB of a %d MB budget", mem*scale>>20, decodeMemBudget(lim)>>20)
	if full := mem * scale; full > decodeMemBudget(lim) {
		t.Errorf("a full-size honest pack would be estimated at %d bytes, over the budget of %d", full, decodeMemBudget(lim))
	}
	if mem < len(b) {
		t.Errorf("estimate %d is below the body size %d", mem, len(b))
	}
}
