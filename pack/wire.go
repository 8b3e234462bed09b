package pack

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

// The wire types below are the CBOR shape of a pack, version 1. Every map
// uses small integer keys (keyasint): a key, once given a meaning, keeps it
// forever; new fields take new keys, and decoders ignore keys they do not
// know, so older peers keep working when a field is added. The numbers of
// Peer, Frame and TraceEntry match the cbor tags on those types.
//
// Positions (grammar.Pos) are not sent: they describe the submitter's source
// text and mean nothing to other peers. Times travel as Unix nanoseconds,
// 0 meaning the zero time.

// stepKind tags the union in wireStep. Values are part of the wire format.
type stepKind uint8

const (
	kindService  stepKind = 1
	kindFork     stepKind = 2
	kindChoice   stepKind = 3
	kindFirst    stepKind = 4
	kindFailover stepKind = 5
)

type wirePack struct {
	WorkflowID string            `cbor:"1,keyasint"`
	Origin     []wirePeer        `cbor:"2,keyasint,omitempty"`
	Workflow   []wireStep        `cbor:"3,keyasint"`
	Input      []byte            `cbor:"4,keyasint,omitempty"`
	Outputs    map[string][]byte `cbor:"5,keyasint,omitempty"`
	Frames     []wireFrame       `cbor:"6,keyasint,omitempty"`
	Attempt    int               `cbor:"7,keyasint,omitempty"`
	Hops       int               `cbor:"8,keyasint,omitempty"`
	Sender     *wirePeer         `cbor:"9,keyasint,omitempty"`
	Trace      []wireTrace       `cbor:"10,keyasint,omitempty"`
	Deadline   int64             `cbor:"11,keyasint,omitempty"`
	Settle     []wireSettle      `cbor:"12,keyasint,omitempty"`
}

type wireSettle struct {
	Kind    SettleKind `cbor:"1,keyasint"`
	Key     string     `cbor:"2,keyasint"`
	Attempt int        `cbor:"3,keyasint,omitempty"`
	Branch  int        `cbor:"4,keyasint,omitempty"`
	Peers   []wirePeer `cbor:"5,keyasint,omitempty"`
	Epoch   int        `cbor:"6,keyasint,omitempty"`
	Actor   string     `cbor:"7,keyasint,omitempty"`
	Lenient bool       `cbor:"8,keyasint,omitempty"`
}

type wirePeer struct {
	ID    string   `cbor:"1,keyasint"`
	Addrs []string `cbor:"2,keyasint,omitempty"`
	Zone  string   `cbor:"3,keyasint,omitempty"`
}

type wireFrame struct {
	JoinID  string     `cbor:"1,keyasint"`
	Kind    FrameKind  `cbor:"2,keyasint"`
	Branch  int        `cbor:"3,keyasint"`
	Holders []wirePeer `cbor:"4,keyasint"`
}

type wireTrace struct {
	Path    string  `cbor:"1,keyasint"`
	Service string  `cbor:"2,keyasint"`
	Peer    string  `cbor:"3,keyasint"`
	Zone    string  `cbor:"4,keyasint,omitempty"`
	Start   int64   `cbor:"5,keyasint"`
	End     int64   `cbor:"6,keyasint"`
	Attempt int     `cbor:"7,keyasint"`
	Outcome Outcome `cbor:"8,keyasint"`
	Note    string  `cbor:"9,keyasint,omitempty"`
	Label   string  `cbor:"10,keyasint,omitempty"`
	Stash   string  `cbor:"11,keyasint,omitempty"`
}

// wireStep is the tagged union of grammar steps: K says which fields apply.
// Services use Name, Attrs and Path; FORK, FIRST and FAILOVER use Branches;
// CHOICE uses Arms.
type wireStep struct {
	K        stepKind     `cbor:"1,keyasint"`
	Name     string       `cbor:"2,keyasint,omitempty"`
	Attrs    []wireAttr   `cbor:"3,keyasint,omitempty"`
	Path     string       `cbor:"4,keyasint,omitempty"`
	Branches [][]wireStep `cbor:"5,keyasint,omitempty"`
	Arms     []wireArm    `cbor:"6,keyasint,omitempty"`
}

// wireAttr is a KEY=VALUE pair sent as a two-element array: attributes
// never grow more parts, so they can skip the map overhead.
type wireAttr struct {
	_ struct{} `cbor:",toarray"`
	K string
	V string
}

type wireArm struct {
	Kind  grammar.ArmKind `cbor:"1,keyasint,omitempty"`
	Guard string          `cbor:"2,keyasint,omitempty"`
	Body  []wireStep      `cbor:"3,keyasint"`
}

// errTimeRange is returned for times that Unix nanoseconds cannot hold
// (before 1678 or after 2262).
var errTimeRange = errors.New("time out of range (years 1678-2262)")

func timeToWire(t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	// UnixNano is undefined outside the int64 range; check via seconds.
	const maxSec = math.MaxInt64 / int64(time.Second)
	if s := t.Unix(); s <= -maxSec || s >= maxSec {
		return 0, errTimeRange
	}
	return t.UnixNano(), nil
}

func timeFromWire(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// toWire converts p. It fails only on trees Validate would also reject and
// that cannot be represented at all (nil steps, out-of-range times).
func toWire(p *Pack) (*wirePack, error) {
	if p.Workflow == nil {
		return nil, errors.New("workflow is nil")
	}
	steps, err := stepsToWire(p.Workflow)
	if err != nil {
		return nil, fmt.Errorf("workflow%w", err)
	}
	w := &wirePack{
		WorkflowID: p.WorkflowID,
		Origin:     peersToWire(p.Origin),
		Workflow:   steps,
		Input:      p.Input,
		Attempt:    p.Attempt,
		Hops:       p.Hops,
	}
	if len(p.Outputs) > 0 {
		w.Outputs = make(map[string][]byte, len(p.Outputs))
		for k, v := range p.Outputs {
			w.Outputs[k] = v
		}
	}
	for _, f := range p.Frames {
		w.Frames = append(w.Frames, wireFrame{JoinID: f.JoinID, Kind: f.Kind, Branch: f.Branch, Holders: peersToWire(f.Holders)})
	}
	if !peerIsZero(p.Sender) {
		s := peerToWire(p.Sender)
		w.Sender = &s
	}
	if len(p.Trace) > 0 {
		w.Trace = make([]wireTrace, len(p.Trace))
		for i, e := range p.Trace {
			start, err := timeToWire(e.Start)
			if err != nil {
				return nil, fmt.Errorf("trace[%d].start: %w", i, err)
			}
			end, err := timeToWire(e.End)
			if err != nil {
				return nil, fmt.Errorf("trace[%d].end: %w", i, err)
			}
			w.Trace[i] = wireTrace{Path: e.Path, Service: e.Service, Peer: e.Peer, Zone: e.Zone,
				Start: start, End: end, Attempt: e.Attempt, Outcome: e.Outcome, Note: e.Note, Label: e.Label, Stash: e.Stash}
		}
	}
	if w.Deadline, err = timeToWire(p.Deadline); err != nil {
		return nil, fmt.Errorf("deadline: %w", err)
	}
	for _, s := range p.Settle {
		w.Settle = append(w.Settle, wireSettle{Kind: s.Kind, Key: s.Key, Attempt: s.Attempt, Branch: s.Branch, Peers: peersToWire(s.Peers), Epoch: s.Epoch, Actor: s.Actor, Lenient: s.Lenient})
	}
	return w, nil
}

func peerIsZero(p Peer) bool { return p.ID == "" && len(p.Addrs) == 0 && p.Zone == "" }

func peerToWire(p Peer) wirePeer { return wirePeer{ID: p.ID, Addrs: p.Addrs, Zone: p.Zone} }

func peersToWire(ps []Peer) []wirePeer {
	if len(ps) == 0 {
		return nil
	}
	out := make([]wirePeer, len(ps))
	for i, p := range ps {
		out[i] = peerToWire(p)
	}
	return out
}

// stepsToWire converts a workflow; its errors start with the index of the
// failing step ("[2].branches[0][1]: ...") so callers can prefix a field.
func stepsToWire(w *grammar.Workflow) ([]wireStep, error) {
	if w == nil {
		return nil, errors.New(": nil workflow")
	}
	out := make([]wireStep, len(w.Steps))
	for i, s := range w.Steps {
		ws, err := stepToWire(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]%w", i, err)
		}
		out[i] = ws
	}
	return out, nil
}

func stepToWire(s grammar.Step) (wireStep, error) {
	switch s := s.(type) {
	case *grammar.Service:
		if s == nil {
			return wireStep{}, errors.New(": nil service")
		}
		ws := wireStep{K: kindService, Name: s.Name, Path: s.Path}
		if len(s.Attrs) > 0 {
			ws.Attrs = make([]wireAttr, len(s.Attrs))
			for i, a := range s.Attrs {
				ws.Attrs[i] = wireAttr{K: a.Key, V: a.Value}
			}
		}
		return ws, nil
	case *grammar.Fork:
		if s == nil {
			return wireStep{}, errors.New(": nil FORK")
		}
		return branchesToWire(kindFork, s.Branches)
	case *grammar.First:
		if s == nil {
			return wireStep{}, errors.New(": nil FIRST")
		}
		return branchesToWire(kindFirst, s.Branches)
	case *grammar.Failover:
		if s == nil {
			return wireStep{}, errors.New(": nil FAILOVER")
		}
		return branchesToWire(kindFailover, s.Branches)
	case *grammar.Choice:
		if s == nil {
			return wireStep{}, errors.New(": nil CHOICE")
		}
		ws := wireStep{K: kindChoice, Arms: make([]wireArm, len(s.Arms))}
		for i, a := range s.Arms {
			if a == nil {
				return wireStep{}, fmt.Errorf(".arms[%d]: nil arm", i)
			}
			body, err := stepsToWire(a.Body)
			if err != nil {
				return wireStep{}, fmt.Errorf(".arms[%d]%w", i, err)
			}
			ws.Arms[i] = wireArm{Kind: a.Kind, Guard: a.Guard, Body: body}
		}
		return ws, nil
	case nil:
		return wireStep{}, errors.New(": nil step")
	default:
		return wireStep{}, fmt.Errorf(": unknown step type %T", s)
	}
}

func branchesToWire(k stepKind, branches []*grammar.Workflow) (wireStep, error) {
	ws := wireStep{K: k, Branches: make([][]wireStep, len(branches))}
	for i, b := range branches {
		steps, err := stepsToWire(b)
		if err != nil {
			return wireStep{}, fmt.Errorf(".branches[%d]%w", i, err)
		}
		ws.Branches[i] = steps
	}
	return ws, nil
}

// fromWire converts a decoded pack. Empty lists and maps become nil so that
// a decoded pack always has one representation. It fails on step kinds this
// peer does not know.
func fromWire(w *wirePack) (*Pack, error) {
	wf, err := stepsFromWire(w.Workflow)
	if err != nil {
		return nil, fmt.Errorf("workflow%w", err)
	}
	p := &Pack{
		WorkflowID: w.WorkflowID,
		Origin:     peersFromWire(w.Origin),
		Workflow:   wf,
		Attempt:    w.Attempt,
		Hops:       w.Hops,
		Deadline:   timeFromWire(w.Deadline),
	}
	if len(w.Input) > 0 {
		p.Input = w.Input
	}
	if len(w.Outputs) > 0 {
		p.Outputs = make(map[string]json.RawMessage, len(w.Outputs))
		for k, v := range w.Outputs {
			if len(v) == 0 {
				v = nil
			}
			p.Outputs[k] = v
		}
	}
	if len(w.Frames) > 0 {
		p.Frames = make([]Frame, len(w.Frames))
		for i, f := range w.Frames {
			p.Frames[i] = Frame{JoinID: f.JoinID, Kind: f.Kind, Branch: f.Branch, Holders: peersFromWire(f.Holders)}
		}
	}
	for _, s := range w.Settle {
		p.Settle = append(p.Settle, Settle{Kind: s.Kind, Key: s.Key, Attempt: s.Attempt, Branch: s.Branch, Peers: peersFromWire(s.Peers), Epoch: s.Epoch, Actor: s.Actor, Lenient: s.Lenient})
	}
	if w.Sender != nil {
		p.Sender = peerFromWire(*w.Sender)
	}
	if len(w.Trace) > 0 {
		p.Trace = make([]TraceEntry, len(w.Trace))
		for i, e := range w.Trace {
			p.Trace[i] = TraceEntry{Path: e.Path, Service: e.Service, Peer: e.Peer, Zone: e.Zone,
				Start: timeFromWire(e.Start), End: timeFromWire(e.End), Attempt: e.Attempt,
				Outcome: e.Outcome, Note: e.Note, Label: e.Label, Stash: e.Stash}
		}
	}
	return p, nil
}

func peerFromWire(w wirePeer) Peer {
	p := Peer{ID: w.ID, Zone: w.Zone}
	if len(w.Addrs) > 0 {
		p.Addrs = w.Addrs
	}
	return p
}

func peersFromWire(ws []wirePeer) []Peer {
	if len(ws) == 0 {
		return nil
	}
	out := make([]Peer, len(ws))
	for i, w := range ws {
		out[i] = peerFromWire(w)
	}
	return out
}

func stepsFromWire(ws []wireStep) (*grammar.Workflow, error) {
	w := &grammar.Workflow{}
	if len(ws) == 0 {
		return w, nil
	}
	w.Steps = make([]grammar.Step, len(ws))
	for i := range ws {
		s, err := stepFromWire(&ws[i])
		if err != nil {
			return nil, fmt.Errorf("[%d]%w", i, err)
		}
		w.Steps[i] = s
	}
	return w, nil
}

func stepFromWire(ws *wireStep) (grammar.Step, error) {
	switch ws.K {
	case kindService:
		s := &grammar.Service{Name: ws.Name, Path: ws.Path}
		if len(ws.Attrs) > 0 {
			s.Attrs = make([]grammar.Attr, len(ws.Attrs))
			for i, a := range ws.Attrs {
				s.Attrs[i] = grammar.Attr{Key: a.K, Value: a.V}
			}
		}
		return s, nil
	case kindFork:
		b, err := branchesFromWire(ws.Branches)
		if err != nil {
			return nil, err
		}
		return &grammar.Fork{Branches: b}, nil
	case kindFirst:
		b, err := branchesFromWire(ws.Branches)
		if err != nil {
			return nil, err
		}
		return &grammar.First{Branches: b}, nil
	case kindFailover:
		b, err := branchesFromWire(ws.Branches)
		if err != nil {
			return nil, err
		}
		return &grammar.Failover{Branches: b}, nil
	case kindChoice:
		c := &grammar.Choice{Arms: make([]*grammar.Arm, len(ws.Arms))}
		for i := range ws.Arms {
			a := &ws.Arms[i]
			body, err := stepsFromWire(a.Body)
			if err != nil {
				return nil, fmt.Errorf(".arms[%d]%w", i, err)
			}
			c.Arms[i] = &grammar.Arm{Kind: a.Kind, Guard: a.Guard, Body: body}
		}
		if len(c.Arms) == 0 {
			c.Arms = nil
		}
		return c, nil
	default:
		return nil, fmt.Errorf(": unknown step kind %d (sent by a newer bedwe?)", ws.K)
	}
}

func branchesFromWire(bs [][]wireStep) ([]*grammar.Workflow, error) {
	if len(bs) == 0 {
		return nil, nil
	}
	out := make([]*grammar.Workflow, len(bs))
	for i, b := range bs {
		w, err := stepsFromWire(b)
		if err != nil {
			return nil, fmt.Errorf(".branches[%d]%w", i, err)
		}
		out[i] = w
	}
	return out, nil
}
