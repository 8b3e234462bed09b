package pack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/multiformats/go-varint"
)

// ErrFrameTooLarge is returned by ReadFrame for a frame whose declared length
// exceeds the caller's maximum; nothing of the frame body has been read.
var ErrFrameTooLarge = errors.New("frame too large")

// WriteFrame writes b as one frame: its length as an unsigned varint, then
// the bytes. It issues a single Write so that frames from one goroutine are
// never interleaved with partial writes.
func WriteFrame(w io.Writer, b []byte) error {
	if _, err := w.Write(FrameBytes(b)); err != nil {
		return fmt.Errorf("write frame of %d bytes: %w", len(b), err)
	}
	return nil
}

// FrameBytes returns the frame WriteFrame writes whose body is parts one after
// the other, built in one buffer (each part copied once).
func FrameBytes(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	buf := make([]byte, 0, varint.UvarintSize(uint64(n))+n)
	buf = binary.AppendUvarint(buf, uint64(n))
	for _, p := range parts {
		buf = append(buf, p...)
	}
	return buf
}

// ReadFrame reads one frame written by WriteFrame. A frame longer than max
// bytes is rejected with ErrFrameTooLarge before its body is allocated or
// read. A clean end of stream before the first length byte returns io.EOF;
// a stream that ends inside a frame returns io.ErrUnexpectedEOF. Lengths
// must be minimally encoded varints.
//
// ReadFrame reads the length byte by byte when r is not an io.ByteReader, so
// it never consumes bytes past the frame; wrap r in a bufio.Reader for
// speed if nothing else reads from it.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	br, ok := r.(io.ByteReader)
	if !ok {
		br = byteReader{r}
	}
	n, err := varint.ReadUvarint(br)
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case err != nil:
		return nil, fmt.Errorf("read frame length: %w", err)
	}
	if max < 0 || n > uint64(max) {
		return nil, fmt.Errorf("read frame: %w: %d bytes, over the maximum of %d", ErrFrameTooLarge, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read frame of %d bytes: %w", n, err)
	}
	return b, nil
}

// byteReader reads one byte at a time from a plain io.Reader.
type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var one [1]byte
	for {
		n, err := b.r.Read(one[:])
		if n == 1 {
			return one[0], nil
		}
		if err != nil {
			return 0, err
		}
	}
}
