package service

import (
	"bytes"
	"errors"
	"strings"
)

// errOutputTooLarge is returned by capBuffer once its limit is passed.
var errOutputTooLarge = errors.New("output too large")

// capBuffer collects up to max bytes; a write past the limit fails, and
// calls onExceed once so the producer can be stopped.
type capBuffer struct {
	buf      bytes.Buffer
	max      int
	exceeded bool
	onExceed func()
}

// Write implements io.Writer.
func (b *capBuffer) Write(p []byte) (int, error) {
	if b.exceeded {
		return 0, errOutputTooLarge
	}
	if b.buf.Len()+len(p) > b.max {
		b.exceeded = true
		if b.onExceed != nil {
			b.onExceed()
		}
		return 0, errOutputTooLarge
	}
	return b.buf.Write(p)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf       []byte
	max       int
	truncated bool
}

// Write implements io.Writer; it never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
		t.truncated = true
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
		t.truncated = true
	}
	return n, nil
}

// String returns the kept tail, valid UTF-8, marked when earlier bytes were
// dropped.
func (t *tailBuffer) String() string {
	b := t.buf
	trunc := t.truncated
	if len(b) > t.max {
		b = b[len(b)-t.max:]
		trunc = true
	}
	s := strings.ToValidUTF8(string(b), "")
	if trunc {
		s = "..." + s
	}
	return s
}
