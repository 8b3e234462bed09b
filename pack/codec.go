package pack

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/fxamacker/cbor/v2"
)

// WireVersion is the version of the pack wire format this package writes.
// Decode accepts exactly this version.
const WireVersion = 1

// magic opens every encoded pack; the version byte follows it.
var magic = [2]byte{'B', 'P'}

// headerLen is the length of magic plus version.
const headerLen = len(magic) + 1

var (
	// ErrNotPack is returned by Decode for bytes that do not start with the
	// pack magic.
	ErrNotPack = errors.New("not a bedwe pack")
	// ErrVersion is returned by Decode for a pack of a wire version this
	// peer does not speak.
	ErrVersion = errors.New("unsupported pack wire version")
)

// encMode is the deterministic CBOR encoding (RFC 8949 core deterministic:
// sorted map keys, shortest forms, no indefinite lengths), so equal packs
// encode to equal bytes.
var encMode = func() cbor.UserBufferEncMode {
	m, err := cbor.CoreDetEncOptions().UserBufferEncMode()
	if err != nil {
		panic(fmt.Sprintf("pack: cbor encoding options: %v", err))
	}
	return m
}()

// Encode returns the wire form of p: "BP", the wire version byte, then the
// pack as deterministic CBOR. Encode checks only what it needs to build the
// bytes; call Validate first to learn whether a peer will accept them.
func Encode(p *Pack) ([]byte, error) {
	if p == nil {
		return nil, errors.New("encode pack: nil pack")
	}
	w, err := toWire(p)
	if err != nil {
		return nil, fmt.Errorf("encode pack %q: %w", p.WorkflowID, err)
	}
	buf := encodeBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBuffer {
			encodeBuffers.Put(buf)
		}
	}()
	buf.Reset()
	buf.Write(magic[:])
	buf.WriteByte(WireVersion)
	if err := encMode.MarshalToBuffer(w, buf); err != nil {
		return nil, fmt.Errorf("encode pack %q: %w", p.WorkflowID, err)
	}
	return bytes.Clone(buf.Bytes()), nil
}

// encodeBuffers hold Encode's work: a pack is built in one of them and
// copied out once, at its final size. Buffers grown past maxPooledBuffer
// by a large pack are left to the collector, not kept.
var encodeBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuffer = 256 << 10

// Check is the cheap part of Decode: the size limit, the header and wire
// version, and structural passes over the bytes (one well-formed CBOR
// item, nesting and memory bounded), without allocating the pack. It does not decode the fields, so a pack it
// accepts may still fail Decode. For copies a peer keeps without reading
// them (a guardian's copy of a pack its sender decoded and validated
// before sending it, decoded in full only if it is ever re-sent).
func Check(b []byte, lim Limits) error {
	lim = lim.withDefaults()
	if err := checkHeader(b, lim); err != nil {
		return err
	}
	if _, err := prescan(b[headerLen:], maxNestedLevels(lim), decodeMemBudget(lim), lim); err != nil {
		return fmt.Errorf("decode pack: %w", err)
	}
	dm, err := decModeFor(lim)
	if err != nil {
		return fmt.Errorf("decode pack: %w", err)
	}
	if err := dm.Wellformed(b[headerLen:]); err != nil {
		return fmt.Errorf("decode pack: %w", cborError(err, lim))
	}
	return nil
}

// checkHeader checks the size limit, the magic bytes and the version.
func checkHeader(b []byte, lim Limits) error {
	if len(b) > lim.MaxBytes {
		return fmt.Errorf("decode pack: %w", &ValidationError{Field: "pack", Limit: "MaxBytes",
			Reason: fmt.Sprintf("%d bytes, over MaxBytes=%d", len(b), lim.MaxBytes)})
	}
	if len(b) < headerLen || b[0] != magic[0] || b[1] != magic[1] {
		n := min(len(b), len(magic))
		return fmt.Errorf("decode pack: %w (starts with %q, want %q)", ErrNotPack, b[:n], magic[:])
	}
	if v := b[len(magic)]; v != WireVersion {
		return fmt.Errorf("decode pack: %w %d (this peer speaks version %d; upgrade the older side)", ErrVersion, v, WireVersion)
	}
	return nil
}

// Decode parses a pack in wire form and checks it against lim (zero fields
// take their DefaultLimits value), in this order: the size limit before
// anything else; then one pass over the bytes that bounds nesting and the
// memory decoding will take (8×MaxBytes, at least 8 MiB); the list limits
// while parsing; everything else through Validate. Errors wrap ErrNotPack,
// ErrVersion or ErrInvalid (a *ValidationError naming the field and the
// limit), or describe malformed CBOR. The pack shares no memory with b.
func Decode(b []byte, lim Limits) (*Pack, error) {
	lim = lim.withDefaults()
	if err := checkHeader(b, lim); err != nil {
		return nil, err
	}
	if _, err := prescan(b[headerLen:], maxNestedLevels(lim), decodeMemBudget(lim), lim); err != nil {
		return nil, fmt.Errorf("decode pack: %w", err)
	}
	dm, err := decModeFor(lim)
	if err != nil {
		return nil, fmt.Errorf("decode pack: %w", err)
	}
	var w wirePack
	if err := dm.Unmarshal(b[headerLen:], &w); err != nil {
		return nil, fmt.Errorf("decode pack: %w", cborError(err, lim))
	}
	p, err := fromWire(&w)
	if err != nil {
		return nil, fmt.Errorf("decode pack: %w", err)
	}
	if err := p.Validate(lim); err != nil {
		return nil, fmt.Errorf("decode pack: %w", err)
	}
	return p, nil
}

// cborError turns the decoder's structural limit errors into
// ValidationErrors naming the Limits field behind them.
func cborError(err error, lim Limits) error {
	var (
		nested *cbor.MaxNestedLevelError
		arr    *cbor.MaxArrayElementsError
		pairs  *cbor.MaxMapPairsError
	)
	switch {
	case errors.As(err, &nested):
		return &ValidationError{Field: "workflow", Limit: "MaxDepth",
			Reason: fmt.Sprintf("nested too deeply for MaxDepth=%d (%v)", lim.MaxDepth, err)}
	case errors.As(err, &arr):
		return &ValidationError{Field: "pack", Limit: "MaxServices",
			Reason: fmt.Sprintf("a list is longer than the limits allow (MaxServices=%d, MaxTrace=%d): %v", lim.MaxServices, lim.MaxTrace, err)}
	case errors.As(err, &pairs):
		return &ValidationError{Field: "outputs", Limit: "MaxServices",
			Reason: fmt.Sprintf("a map is larger than the limits allow (MaxServices=%d): %v", lim.MaxServices, err)}
	}
	return err
}

// maxNestedLevels is the CBOR nesting a pack within lim can need: a
// pattern costs up to four levels (step map, arm list, arm map, body list);
// the pack map, lists and peers add a few more.
func maxNestedLevels(lim Limits) int { return min(4*lim.MaxDepth+8, 65535) }

// decModes caches one CBOR decoding mode per Limits value.
var decModes sync.Map // Limits -> cbor.DecMode

func decModeFor(lim Limits) (cbor.DecMode, error) {
	if dm, ok := decModes.Load(lim); ok {
		return dm.(cbor.DecMode), nil
	}
	nested := maxNestedLevels(lim)
	elems := max(lim.MaxServices, lim.MaxTrace, lim.MaxBranches, lim.MaxFrames, 16)
	dm, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		MaxNestedLevels:  nested,
		MaxArrayElements: elems,
		MaxMapPairs:      max(lim.MaxServices, 16),
	}.DecMode()
	if err != nil {
		return nil, fmt.Errorf("cbor decoding options for %+v: %w", lim, err)
	}
	decModes.Store(lim, dm)
	return dm, nil
}
