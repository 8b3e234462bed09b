package pack

import (
	"encoding/binary"
	"fmt"
	"reflect"
)

// decodeMemFactor bounds the memory Decode may allocate to this many times
// Limits.MaxBytes (or times minDecodeMem when MaxBytes is smaller). Honest
// packs stay far below it; the bound stops a hostile pack of a few
// megabytes (millions of empty maps, each decoded into a step struct) from
// exhausting memory before validation gets to reject it.
const (
	decodeMemFactor = 8
	minDecodeMem    = 1 << 20
)

// decodeMemBudget is the bound prescan enforces for lim.
func decodeMemBudget(lim Limits) int { return decodeMemFactor * max(lim.MaxBytes, minDecodeMem) }

// maxElemSize is the largest Go value a CBOR array element of a pack can
// decode into.
var maxElemSize = func() int {
	n := 0
	for _, v := range []any{wireStep{}, wireTrace{}, wirePeer{}, wireFrame{}, wireArm{}, wireAttr{}, []wireStep(nil), ""} {
		n = max(n, int(reflect.TypeOf(v).Size()))
	}
	return n
}()

// prescan walks the CBOR body once, without allocating per item, and
// refuses bodies whose decoding would nest deeper than maxNested or need
// more than memBudget bytes, and returns its estimate of that memory. The
// estimate estimate is deliberately crude and
// high: the body's own bytes (strings are copied) plus, for every array
// element, the largest struct an element can decode into (the decoder
// allocates a slice for the whole array before looking at the elements). It checks only what it must to walk: the
// decoder rejects everything else (tags, indefinite lengths, bad UTF-8,
// trailing bytes) with its own errors.
func prescan(b []byte, maxNested, memBudget int, lim Limits) (mem int, err error) {
	var (
		stack     []uint64 // items still to read in each open container
		remaining uint64   = 1
		i         int
	)
	mem = len(b)
	for {
		if remaining == 0 {
			if len(stack) == 0 {
				return mem, nil
			}
			remaining, stack = stack[len(stack)-1], stack[:len(stack)-1]
			continue
		}
		remaining--
		if i >= len(b) {
			return mem, nil // truncated: the decoder says so
		}
		major, ai := b[i]>>5, b[i]&0x1f
		i++
		var val uint64
		switch {
		case ai < 24:
			val = uint64(ai)
		case ai <= 27:
			n := 1 << (ai - 24)
			if len(b)-i < n {
				return mem, nil
			}
			switch n {
			case 1:
				val = uint64(b[i])
			case 2:
				val = uint64(binary.BigEndian.Uint16(b[i:]))
			case 4:
				val = uint64(binary.BigEndian.Uint32(b[i:]))
			default:
				val = binary.BigEndian.Uint64(b[i:])
			}
			i += n
		default:
			return mem, nil // indefinite length or reserved: the decoder refuses it
		}
		left := uint64(len(b) - i)
		switch major {
		case 2, 3: // byte and text strings
			if val > left {
				return mem, nil
			}
			i += int(val)
		case 4, 5: // arrays and maps; every item takes at least one byte
			items := val
			if major == 5 {
				// Maps decode into struct fields (counted with the
				// element holding them) or into the one outputs map,
				// which MaxMapPairs bounds.
				if val > left/2 {
					return mem, nil
				}
				items = 2 * val
			} else {
				if val > left {
					return mem, nil
				}
				mem += int(val) * maxElemSize
			}
			if mem > memBudget {
				return mem, &ValidationError{Field: "pack", Limit: "MaxBytes",
					Reason: fmt.Sprintf("decoding would take over %d bytes of memory (%d×max(MaxBytes=%d, 1 MiB))", memBudget, decodeMemFactor, lim.MaxBytes)}
			}
			if items > 0 {
				if len(stack)+1 > maxNested {
					return mem, &ValidationError{Field: "workflow", Limit: "MaxDepth",
						Reason: fmt.Sprintf("nested too deeply for MaxDepth=%d (over %d CBOR levels)", lim.MaxDepth, maxNested)}
				}
				stack = append(stack, remaining)
				remaining = items
			}
		}
	}
}
