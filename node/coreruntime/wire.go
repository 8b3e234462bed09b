package coreruntime

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/fxamacker/cbor/v2"

	"github.com/bedwe/bedwe/node/core"
	"github.com/bedwe/bedwe/node/sim"
)

// maxFrame bounds one message on the wire: a pack carries a workflow and
// its outputs so far, far below this.
const maxFrame = 1 << 20

// A frame's body is a one-byte type tag followed by the CBOR of the
// message (pointers, such as a Pack's workflow, are encoded by value).
// The tags are part of the protocol: never renumber one.
var messages = [...]func() sim.Message{
	1:  func() sim.Message { return new(core.Accept) },
	2:  func() sim.Message { return new(core.Accepted) },
	3:  func() sim.Message { return new(core.Reject) },
	4:  func() sim.Message { return new(core.Take) },
	5:  func() sim.Message { return new(core.Took) },
	6:  func() sim.Message { return new(core.Prepare) },
	7:  func() sim.Message { return new(core.Promise) },
	8:  func() sim.Message { return new(core.Beat) },
	9:  func() sim.Message { return new(core.Query) },
	10: func() sim.Message { return new(core.State) },
}

var messageTags = func() map[reflect.Type]byte {
	tags := map[reflect.Type]byte{}
	for tag, mk := range messages {
		if mk != nil {
			tags[reflect.TypeOf(mk())] = byte(tag)
		}
	}
	return tags
}()

// Journal record tags, in the same form.
const (
	tagRecord byte = iota + 1
	tagStartRecord
)

var decMode = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		MaxNestedLevels:  16,
		MaxArrayElements: 1 << 16,
		MaxMapPairs:      64,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

func tagged(tag byte, v any) ([]byte, error) {
	body, err := cbor.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append([]byte{tag}, body...), nil
}

// encodeMessage encodes one of the core's messages with its tag.
func encodeMessage(m sim.Message) ([]byte, error) {
	tag, ok := messageTags[reflect.TypeOf(m)]
	if !ok {
		return nil, fmt.Errorf("encode message: unknown type %T", m)
	}
	b, err := tagged(tag, m)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", m, err)
	}
	return b, nil
}

// decodeMessage decodes a frame body from a peer of a mesh of n nodes and
// checks what the core would otherwise index blindly, so that a malformed
// frame is refused rather than crashing the loop.
func decodeMessage(b []byte, n int) (sim.Message, error) {
	if len(b) == 0 || int(b[0]) >= len(messages) || messages[b[0]] == nil {
		return nil, fmt.Errorf("decode message: bad tag in %d bytes", len(b))
	}
	m := messages[b[0]]()
	if err := decMode.Unmarshal(b[1:], m); err != nil {
		return nil, fmt.Errorf("decode %T: %w", m, err)
	}
	if err := validate(m, n); err != nil {
		return nil, fmt.Errorf("decode %T: %w", m, err)
	}
	return m, nil
}

func validate(m sim.Message, n int) error {
	switch m := m.(type) {
	case *core.Accept:
		if err := validGroup(m.Group, n); err != nil {
			return err
		}
		return validValue(m.Value, n)
	case *core.Prepare:
		return validGroup(m.Group, n)
	case *core.Promise:
		if m.Has {
			return validValue(m.Value, n)
		}
	case *core.State:
		if m.Has {
			return validValue(m.Value, n)
		}
	case *core.Take:
		if err := validGroup(m.Group, n); err != nil {
			return err
		}
		steps, err := chainSteps(m.Pack)
		if err != nil {
			return err
		}
		if m.Token.Pos < 0 || m.Token.Pos >= len(steps) {
			return fmt.Errorf("take of position %d out of range", m.Token.Pos)
		}
	}
	return nil
}

// chainSteps is the steps of a pack's chain, or an error when the pack has
// no workflow or its chain is not one of the workflow's.
func chainSteps(p *core.Pack) ([]core.Step, error) {
	if p == nil || p.Workflow == nil {
		return nil, errors.New("no pack")
	}
	w := p.Workflow
	if p.Chain == core.RootChain(w.ID) {
		return w.Steps, nil
	}
	for pos, s := range w.Steps {
		for b := range s.Branches {
			if core.BranchChain(w.ID, pos, b) == p.Chain {
				return s.Branches[b], nil
			}
		}
	}
	return nil, fmt.Errorf("chain %x is not in workflow %d", p.Chain, w.ID)
}

func validGroup(g []sim.NodeID, n int) error {
	if len(g) == 0 {
		return errors.New("empty group")
	}
	for _, id := range g {
		if id < 0 || int(id) >= n {
			return fmt.Errorf("group member %d out of range", id)
		}
	}
	return nil
}

func validValue(v core.Value, n int) error {
	chain, err := chainSteps(v.Pack)
	if err != nil {
		return err
	}
	steps := len(chain)
	if v.Token.Pos < 0 || v.Token.Pos > steps || v.End == core.Running && v.Token.Pos == steps {
		return fmt.Errorf("value of position %d out of range", v.Token.Pos)
	}
	if v.Holder < -1 || int(v.Holder) >= n {
		return fmt.Errorf("holder %d out of range", v.Holder)
	}
	return nil
}

// encodeRecord encodes a journal record with its tag.
func encodeRecord(rec any) ([]byte, error) {
	var tag byte
	switch rec.(type) {
	case core.Record:
		tag = tagRecord
	case core.StartRecord:
		tag = tagStartRecord
	default:
		return nil, fmt.Errorf("encode record: unknown type %T", rec)
	}
	b, err := tagged(tag, rec)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", rec, err)
	}
	return b, nil
}

func decodeRecord(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, errors.New("decode record: empty")
	}
	switch b[0] {
	case tagRecord:
		var r core.Record
		if err := decMode.Unmarshal(b[1:], &r); err != nil {
			return nil, fmt.Errorf("decode record: %w", err)
		}
		return r, nil
	case tagStartRecord:
		var r core.StartRecord
		if err := decMode.Unmarshal(b[1:], &r); err != nil {
			return nil, fmt.Errorf("decode start record: %w", err)
		}
		return r, nil
	}
	return nil, fmt.Errorf("decode record: unknown tag %d", b[0])
}
