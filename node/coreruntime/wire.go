package coreruntime

import (
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/bedwe/bedwe/node/core"
	"github.com/bedwe/bedwe/node/sim"
)

// maxFrame bounds one message on the wire: a pack carries a workflow and
// its outputs so far, far below this.
const maxFrame = 1 << 20

// A frame's body is a one-byte type tag followed by the CBOR of the
// message (pointers, such as a Pack's workflow, are encoded by value).
// Tags are part of the protocol: never renumber one.
const (
	tagAccept byte = iota + 1
	tagAccepted
	tagReject
	tagTake
	tagTook
	tagPrepare
	tagPromise
	tagBeat
)

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
	var tag byte
	switch m.(type) {
	case *core.Accept:
		tag = tagAccept
	case *core.Accepted:
		tag = tagAccepted
	case *core.Reject:
		tag = tagReject
	case *core.Take:
		tag = tagTake
	case *core.Took:
		tag = tagTook
	case *core.Prepare:
		tag = tagPrepare
	case *core.Promise:
		tag = tagPromise
	case *core.Beat:
		tag = tagBeat
	default:
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
	if len(b) == 0 {
		return nil, errors.New("decode message: empty frame")
	}
	var m sim.Message
	switch b[0] {
	case tagAccept:
		m = new(core.Accept)
	case tagAccepted:
		m = new(core.Accepted)
	case tagReject:
		m = new(core.Reject)
	case tagTake:
		m = new(core.Take)
	case tagTook:
		m = new(core.Took)
	case tagPrepare:
		m = new(core.Prepare)
	case tagPromise:
		m = new(core.Promise)
	case tagBeat:
		m = new(core.Beat)
	default:
		return nil, fmt.Errorf("decode message: unknown tag %d", b[0])
	}
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
	case *core.Take:
		if err := validGroup(m.Group, n); err != nil {
			return err
		}
		if m.Pack == nil || m.Pack.Workflow == nil {
			return errors.New("take without a pack")
		}
		if m.Token.Pos < 0 || m.Token.Pos >= len(m.Pack.Workflow.Steps) {
			return fmt.Errorf("take of position %d out of range", m.Token.Pos)
		}
	}
	return nil
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
	if v.Pack == nil || v.Pack.Workflow == nil {
		return errors.New("value without a pack")
	}
	steps := len(v.Pack.Workflow.Steps)
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
