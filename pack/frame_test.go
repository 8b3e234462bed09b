package pack

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestFrameRoundTrip(t *testing.T) {
	frames := [][]byte{{}, []byte("a"), bytes.Repeat([]byte("x"), 127), bytes.Repeat([]byte("y"), 128), bytes.Repeat([]byte("z"), 70_000)}
	var buf bytes.Buffer
	for _, f := range frames {
		if err := WriteFrame(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	// 128 needs a two-byte varint: 0x80 0x01.
	if got := buf.Bytes()[1+0+1+1+1+127]; got != 0x80 {
		t.Fatalf("length prefix of the 128-byte frame starts with %#x, want 0x80", got)
	}
	readers := map[string]func([]byte) io.Reader{
		"byte reader": func(b []byte) io.Reader { return bufio.NewReader(bytes.NewReader(b)) },
		"one byte at a time": func(b []byte) io.Reader {
			return iotest.OneByteReader(struct{ io.Reader }{bytes.NewReader(b)})
		},
	}
	for name, mk := range readers {
		t.Run(name, func(t *testing.T) {
			r := mk(buf.Bytes())
			for i, want := range frames {
				got, err := ReadFrame(r, 1<<20)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("frame %d: got %d bytes, want %d", i, len(got), len(want))
				}
			}
			if _, err := ReadFrame(r, 1<<20); err != io.EOF {
				t.Fatalf("after the last frame: err = %v, want io.EOF", err)
			}
		})
	}
}

// countingReader fails the test if more than limit bytes are read.
type countingReader struct {
	r     io.Reader
	n     int
	limit int
	t     *testing.T
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	if c.n > c.limit {
		c.t.Errorf("read %d bytes, want at most %d", c.n, c.limit)
	}
	return n, err
}

func TestReadFrameRejectsOversizedBeforeReadingBody(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrame(&buf, bytes.Repeat([]byte("x"), 1000)); err != nil {
		t.Fatal(err)
	}
	// Only the two length bytes may be consumed.
	r := &countingReader{r: iotest.OneByteReader(&buf), limit: 2, t: t}
	_, err := ReadFrame(r, 999)
	if !errors.Is(err, ErrFrameTooLarge) || !strings.Contains(err.Error(), "1000 bytes, over the maximum of 999") {
		t.Fatalf("err = %v, want ErrFrameTooLarge naming the sizes", err)
	}
	// A length claiming 2^62 bytes is refused without allocating it.
	huge := []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}
	if _, err := ReadFrame(bytes.NewReader(huge), 1<<20); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("huge length: err = %v, want ErrFrameTooLarge", err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"truncated body", []byte{0x05, 'a', 'b'}, io.ErrUnexpectedEOF},
		{"truncated length", []byte{0x80}, io.ErrUnexpectedEOF},
		{"non-minimal length", []byte{0x81, 0x00, 'a'}, nil},
		{"length overflow", bytes.Repeat([]byte{0xff}, 10), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tt.in), 100)
			if err == nil || err == io.EOF {
				t.Fatalf("err = %v, want a failure", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWriteFrameReportsWriterError(t *testing.T) {
	boom := errors.New("stream reset")
	err := WriteFrame(errWriter{boom}, []byte("abc"))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

func TestFramedPacks(t *testing.T) {
	// Packs travel as frames on a stream: two in a row come back intact.
	var buf bytes.Buffer
	for _, p := range []*Pack{minimalPack(), fullPack()} {
		if err := WriteFrame(&buf, mustEncode(t, p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"wf-1", "01JABCDEF-wf.7"} {
		b, err := ReadFrame(&buf, DefaultLimits().MaxBytes)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Decode(b, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if p.WorkflowID != want {
			t.Errorf("workflow id = %q, want %q", p.WorkflowID, want)
		}
	}
}
